"""Which Discord messages are for the bot, and where their conversation is. Pure functions
over discord.py objects, no network.

Conversations: a DM channel is one conversation; a guild text channel is one (the bot answers
there only when mentioned or replied to); a thread is its own conversation (chat = its parent
channel, thread = the thread), answered when mentioned, replied to, or once the bridge holds
a conversation for it. Platform ids are message ids (snowflakes are unique across Discord).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import discord

from picobridge.contract import ChatRef

PLATFORM = "discord"


@dataclass(frozen=True, slots=True)
class Parsed:
    """A message that may be for the bot, before the gating that needs the bridge."""

    chat: ChatRef
    channel_id: int  # where answers go (the thread itself for a thread)
    sender_id: str
    sender_name: str
    text: str
    guild_id: str | None
    addressed: bool  # a DM, a mention of the bot, or a reply to it
    in_thread: bool


def chat_ref(channel: object) -> ChatRef:
    if isinstance(channel, discord.Thread):
        return ChatRef(PLATFORM, str(channel.parent_id), str(channel.id))
    return ChatRef(PLATFORM, str(getattr(channel, "id", "")))


def target_channel(chat: ChatRef) -> int:
    """The channel a conversation's messages go to."""
    return int(chat.thread_id if chat.thread_id is not None else chat.chat_id)


def _mentions(message: discord.Message, me: int) -> bool:
    return any(user.id == me for user in message.mentions) or \
        f"<@{me}>" in message.content or f"<@!{me}>" in message.content


def _replies_to(message: discord.Message, me: int) -> bool:
    ref = message.reference
    resolved = ref.resolved if ref is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == me


def strip_mention(text: str, me: int) -> str:
    return re.sub(rf"<@!?{me}>", "", text).strip()


def parse(message: discord.Message, me: int, allow_bots: bool = False) -> Parsed | None:
    """The message as the bridge may see it, or None when it is never for the bot (its own
    messages, other bots, system messages)."""
    if message.author.id == me or (message.author.bot and not allow_bots):
        return None
    if message.type not in (discord.MessageType.default, discord.MessageType.reply):
        return None
    guild = message.guild
    dm = guild is None
    addressed = dm or _mentions(message, me) or _replies_to(message, me)
    text = message.content if dm else strip_mention(message.content, me)
    name = getattr(message.author, "global_name", None) or message.author.name
    return Parsed(chat=chat_ref(message.channel), channel_id=message.channel.id,
                  sender_id=str(message.author.id), sender_name=name, text=text,
                  guild_id=None if guild is None else str(guild.id), addressed=addressed,
                  in_thread=isinstance(message.channel, discord.Thread))
