"""The platforms picobridge knows. A new platform is one package and one line here.

Each entry names the platform's `Platform` class (its config section, allow list, user-id
rule and adapter factory) as "module:Class". Platform modules are cheap to import; an
adapter's libraries load only when the platform is enabled, so `picobridge chat` does not pay
for libraries it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from picobridge.config.settings import Settings
    from picobridge.contract import Adapter, Platform

# The command line's parser reads these names for every command, `--help` included: this
# module imports no platform (and not the contract) until a platform is asked for.
PLATFORMS: dict[str, str] = {
    "telegram": "picobridge.adapters.telegram.platform:TelegramPlatform",
    "slack": "picobridge.adapters.slack.platform:SlackPlatform",
    "matrix": "picobridge.adapters.matrix.platform:MatrixPlatform",
    "discord": "picobridge.adapters.discord.platform:DiscordPlatform",
}


# `picobridge chat`'s chats (adapters/console), which is not a registered platform.
CONSOLE = "console"


def platform(name: str) -> Platform:
    from picobridge.contract import Platform

    module_name, _, class_name = PLATFORMS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, Platform)):
        raise TypeError(f"{PLATFORMS[name]} is not a Platform")
    return cls()


def platforms() -> dict[str, Platform]:
    return {name: platform(name) for name in PLATFORMS}


def library_loggers() -> list[str]:
    """Every platform's library loggers, held at WARNING (Platform.library_loggers)."""
    return [name for p in platforms().values() for name in p.library_loggers]


def secret_shapes() -> list[str]:
    """Every platform's token shapes, redacted from the log (Platform.secret_shapes)."""
    return [shape for p in platforms().values() for shape in p.secret_shapes]


def bots(settings: Settings, named_only: bool = False) -> dict[str, tuple[Platform, Any]]:
    """Every configured bot of every platform, by the name the bridge knows it by
    (`telegram`, `telegram@work`), with its platform and its keys; with `named_only`, only
    of the platforms the configuration names (a platform it does not name has one bot, off,
    with its section's defaults)."""
    platforms = settings.named_platforms if named_only else settings.platforms
    return {bot: (p, section) for name, p in platforms.items()
            for bot, section in p.bots(settings.section(name)).items()}


def enabled_platforms(settings: Settings) -> list[str]:
    """The bots that run, by the name the bridge knows them by."""
    return [bot for bot, (p, section) in bots(settings, named_only=True).items()
            if p.active(section)]


def build_adapters(settings: Settings) -> list[Adapter]:
    # Only the platforms the configuration names: an unnamed one's default section would
    # import its settings module (its classes) into a daemon that never runs it.
    found = bots(settings, named_only=True)
    return [platform.bot_adapter(settings, bot, section)
            for bot, (platform, section) in found.items() if platform.active(section)]


def allow_lists(settings: Settings) -> dict[str, frozenset[str]]:
    """Who each bot's section lets in; nobody on a platform the configuration does not name
    (its one bot has its section's defaults, which are nobody)."""
    lists = dict.fromkeys(settings.platforms, frozenset[str]())
    lists.update((bot, p.allowed_users(section))
                 for bot, (p, section) in bots(settings, named_only=True).items())
    return lists
