"""Progress of a turn (started, streamed text, tool calls, its end) shown on the chat's
platform. A platform that fails to show progress never holds up or breaks the turn."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from picobridge.contract import Adapter, ChatRef, Outcome, ProgressEvent
from picobridge.core.turns import Turn

log = logging.getLogger("picobridge.router")


class ProgressRelay:
    def __init__(self, adapters: Mapping[str, Adapter]) -> None:
        self._adapters = adapters

    async def show(self, turn: Turn, event: ProgressEvent) -> None:
        adapter = self._adapters.get(turn.chat.platform)
        if adapter is None:
            return
        event = ProgressEvent(event.kind, event.text, event.tool, turn.quoted_ids)
        try:
            await adapter.show_progress(turn.chat, event)
        except Exception:
            log.exception("show_progress failed platform=%s", turn.chat.platform)

    async def clear(self, chat: ChatRef, outcome: Outcome) -> None:
        adapter = self._adapters.get(chat.platform)
        if adapter is None:
            return
        try:
            await adapter.clear_progress(chat, outcome)
        except Exception:
            log.exception("clear_progress failed platform=%s", chat.platform)
