"""What a chat command answers (core/commands.py runs them)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from picobridge.contract import ChatRef, OutboundFile


@dataclass(frozen=True, slots=True)
class CommandReply:
    """A text, or a menu (`options` as buttons where the platform has them; `chosen` runs on
    a click and returns what to tell the person)."""

    text: str
    options: tuple[str, ...] = ()
    title: str = ""
    chosen: Callable[[str], Awaitable[str]] | None = None
    files: tuple[OutboundFile, ...] = ()  # stored under state_dir already (/export)


# A command's handler: (its argument, the chat, the chat's agent) -> its answer.
Handler = Callable[[str, ChatRef, str], Awaitable[CommandReply]]
