"""What the store's unit tests share: a chat, its numbered messages, and a store of the
test's own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from picobridge.contract import ChatRef, InboundMessage
from picobridge.store import Store

__all__ = ["CHAT", "msg", "store"]

CHAT = ChatRef("telegram", "-100123", "7")


def msg(n: int, chat: ChatRef = CHAT, text: str = "hi") -> InboundMessage:
    return InboundMessage(chat=chat, sender_id="42", text=f"{text} {n}",
                          platform_message_id=f"m{n}", reply_to=str(n))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "db" / "picobridge.db")
    yield s
    await s.close()
