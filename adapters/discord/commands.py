"""The chat commands as Discord slash commands: what the bridge offers for the agent chats
get by default (BridgeLink.commands: its own /new, /status, /stop, /help..., and the agent's
/model, /think... where its protocol has them), from the one command catalogue, registered
globally, or in each guild of `discord.guilds` (guild commands show at once; global ones may
take a while to appear). Discord holds one list per bot, not per chat, as Telegram's menu.
They are registered again only when the catalogue differs from what Discord holds."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
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
                   commands: Sequence[BridgeCommand]) -> None:
    if isinstance(settings.guilds, list):
        wanted = catalogue(commands, in_dms=False)
        for guild in settings.guilds:
            held = await http.get_guild_commands(app_id, int(guild))
            if not _same(held, wanted):
                await http.bulk_upsert_guild_commands(app_id, int(guild), wanted)
                log.info("Discord: slash commands registered in guild %s", guild)
        # DMs have no guild: their commands are global.
        wanted = [{**c, "contexts": [BOT_DM]} for c in catalogue(commands, in_dms=True)]
    else:
        wanted = catalogue(commands, in_dms=True)
    held = await http.get_global_commands(app_id)
    if not _same(held, wanted):
        await http.bulk_upsert_global_commands(app_id, wanted)
        log.info("Discord: slash commands registered globally")
