"""The chat commands as Discord slash commands, from the one command catalogue: the bridge's
own /new, /status, /stop, /help... and the agent commands (/model, /think...) of every agent
the bot's routes can reach (BridgeLink.offered_commands), registered globally, or in each
guild of `discord.guilds` (guild commands show at once; global ones may take a while).

Discord holds slash commands per application, guild and context, never per channel, so a
channel cannot show only its own agent's: a command another reachable agent offers shows
everywhere, and the bridge answers it in a chat whose agent lacks it with a word saying so.
With `discord.guilds` listed, guild channels and DMs have lists of their own (guild commands,
global ones for DMs), each the union of what the routes for that kind of chat ("group",
"private") reach. They are registered again only when they differ from what Discord holds."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from picobridge.adapters.discord.client import RoutedHTTP
from picobridge.adapters.discord.settings import DiscordSettings
from picobridge.contract import BridgeCommand

log = logging.getLogger("picobridge.discord")

GUILD_INSTALL, BOT_DM, GUILD = 0, 1, 0
STRING = 3  # an option's type


def catalogue(commands: Sequence[BridgeCommand], in_dms: bool) -> list[dict[str, Any]]:
    contexts = [GUILD, BOT_DM] if in_dms else [GUILD]
    # Each takes what may follow it as typed (`/agent NAME`): the bridge reads the command
    # line as it would from a message.
    option = {"type": STRING, "name": "text", "required": False,
              "description": "What follows the command, if anything"}
    return [{"name": c.name, "type": 1, "description": c.description[:1].upper()
             + c.description[1:100], "contexts": contexts, "integration_types": [GUILD_INSTALL],
             "options": [option]}
            for c in commands if c.listed]


def _same(held: Sequence[Mapping[str, Any]], wanted: list[dict[str, Any]]) -> bool:
    def key(commands: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, int]]:
        return {(str(c.get("name")), str(c.get("description")),
                 len(c.get("options") or ())) for c in commands}

    return key(held) == key(wanted)


async def register(http: RoutedHTTP, app_id: int, settings: DiscordSettings,
                   offered: Callable[[str | None], Sequence[BridgeCommand]]) -> None:
    """`offered(kind)`: the commands for chats of that kind (None: of any kind)."""
    if isinstance(settings.guilds, list):
        wanted = catalogue(offered("group"), in_dms=False)
        for guild in settings.guilds:
            held = await http.get_guild_commands(app_id, int(guild))
            if not _same(held, wanted):
                await http.bulk_upsert_guild_commands(app_id, int(guild), wanted)
                log.info("Discord: slash commands registered in guild %s", guild)
        # DMs have no guild: their commands are global.
        wanted = [{**c, "contexts": [BOT_DM]}
                  for c in catalogue(offered("private"), in_dms=True)]
    else:
        wanted = catalogue(offered(None), in_dms=True)
    held = await http.get_global_commands(app_id)
    if not _same(held, wanted):
        await http.bulk_upsert_global_commands(app_id, wanted)
        log.info("Discord: slash commands registered globally")
