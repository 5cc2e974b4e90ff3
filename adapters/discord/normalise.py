"""A Discord message for the bot as the bridge's `InboundMessage`."""

from __future__ import annotations

import discord

from picobridge.adapters.discord.parse import Parsed
from picobridge.contract import Attachment, InboundMessage


def normalise(message: discord.Message, parsed: Parsed,
              attachments: tuple[Attachment, ...] = (), refused: tuple[str, ...] = ()
              ) -> InboundMessage:
    text = parsed.text
    if refused:
        text += (f"\n\n[{len(refused)} attached file(s) could not be received: "
                 f"{'; '.join(refused)}]")
    if parsed.guild_id is not None and parsed.chat.thread_id is None:
        # A guild channel is shared by everyone in it: the agent hears who speaks.
        text = f"{parsed.sender_name}: {text}"
    return InboundMessage(
        chat=parsed.chat, sender_id=parsed.sender_id, sender_name=parsed.sender_name,
        text=text, platform_message_id=str(message.id), attachments=attachments,
        reply_to=str(message.id), sent_at=message.created_at.timestamp(),
        chat_kind="private" if parsed.guild_id is None else "group")
