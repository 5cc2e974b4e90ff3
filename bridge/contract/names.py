"""Names shared by the bridge and the platforms: the default agent, and how one bot of a
platform is told from another.

A platform may run several bots (two bots of one chat service, two workspaces' apps), each
with its own name. The bridge sees each bot as a platform of its own, `<platform>@<bot>` (the
bot named `default` is plain `<platform>`, as when there was only one), so its chat keys,
deduplication keys, access list and positions never mix with another bot's, and the core
stays free of any platform: it only ever splits that name in two, here.
"""

from __future__ import annotations

import re

DEFAULT_AGENT = "default"
DEFAULT_BOT = "default"
BOT_SEPARATOR = "@"
# Agent and bot names appear in session ids, worker names, metrics labels and URLs.
NAME_PATTERN = r"^[A-Za-z0-9_-]{1,40}$"
_NAME = re.compile(NAME_PATTERN)


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


def bot_platform(platform: str, bot: str) -> str:
    """The name the bridge knows one bot of a platform by: `chat`, `chat@work`."""
    return platform if bot == DEFAULT_BOT else f"{platform}{BOT_SEPARATOR}{bot}"


def split_platform(name: str) -> tuple[str, str]:
    """`chat@work` -> ("chat", "work"); `chat` -> ("chat", "default")."""
    platform, sep, bot = name.partition(BOT_SEPARATOR)
    return (platform, bot) if sep else (platform, DEFAULT_BOT)
