"""`picobridge check` for Discord: sign in with the token, read the application's flags and
say which privileged intent the Developer Portal has not granted."""

from __future__ import annotations

import discord

from picobridge.adapters.discord.client import BridgeClient
from picobridge.adapters.discord.settings import DiscordSettings

# Application flags: the Developer Portal's switch for the Message Content intent (verified
# bots get the GATEWAY_* flag, others the *_LIMITED one).
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)


def describe_login(client: discord.Client) -> str:
    user = client.user
    return f"bot {user} ({user.id})" if user is not None else "a bot"


def missing_intents(client: discord.Client) -> str:
    return ("the Message Content intent is not enabled for this bot (Developer Portal > "
            "Bot > Privileged Gateway Intents > Message Content Intent)")


async def verify(settings: DiscordSettings) -> str:
    assert settings.token is not None
    client = BridgeClient(settings.base_url, {})
    try:
        try:
            await client.login(settings.token.get_secret_value())
        except discord.LoginFailure:
            raise RuntimeError("Discord refused the bot token (check discord.token)") from None
        info = await client.application_info()
        if not info.flags.value & MESSAGE_CONTENT_FLAGS:
            raise RuntimeError(f"{describe_login(client)} signed in, but "
                               + missing_intents(client))
        return f"{describe_login(client)} of application {info.name} ({info.id}); " \
               "Message Content intent granted"
    finally:
        await client.close()
