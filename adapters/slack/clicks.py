"""Clicks on the buttons of the agent's questions, in Socket Mode and HTTP mode alike.

Slack wants every interaction acknowledged within 3 s and never sends one again, so the
adapter acknowledges at once and answers the click in its own task: in the conversation's
turn (ChatSerial, shared with its messages, so a click and a typed message are taken in the
order they came), then
- counted: the question's message shows the answer and loses its buttons (chat.update with
  the blocks given explicitly: text alone would not reliably drop them);
- not counted (a stranger, a closed question, another conversation's button): the person is
  told in an ephemeral message, and nothing changes.
While the bridge's store cannot answer (StorageUnavailable) the click is tried again for a
while, as Slack will not send it again; after that the person hears it was not taken.

A question closed other than by its buttons (Adapter.dialog_closed) is changed the same way,
with a line saying how, on the message the sender reported (`sent`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.common.buttons import (
    Asked,
    Click,
    QuestionMessages,
    answered_line,
    click,
    closed_line,
    decode,
)
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.slack.buttons import Clicked, Posted, clicked, closed_blocks
from picobridge.adapters.slack.client import post_ephemeral
from picobridge.adapters.slack.events import PLATFORM
from picobridge.adapters.slack.send import slack_error
from picobridge.contract import BridgeLink, DialogClosed, StorageUnavailable

log = logging.getLogger("picobridge.slack")

# How long a click waits for the store before the person is asked to answer again.
STORAGE_PATIENCE = 60.0
NOT_TAKEN = ("⚠️ I could not take your answer just now (my storage is unavailable). "
             "Please answer again in a moment.")


class SlackClicks:
    def __init__(self, bridge: BridgeLink, client: AsyncWebClient, asked: Asked,
                 serial: ChatSerial, tasks: TaskSet,
                 shown: QuestionMessages[Posted] | None = None,
                 platform: str = PLATFORM) -> None:
        self._bridge = bridge
        self._platform = platform
        self._client = client
        self._asked = asked
        self._serial = serial
        self._tasks = tasks
        self._shown = shown if shown is not None else QuestionMessages()

    def sent(self, dialog_id: str, posted: Posted) -> None:
        """The question's buttons are on `posted`; if it closed meanwhile, it shows that now,
        in the background (the conversation's next reply does not wait for it)."""
        closed = self._shown.sent(dialog_id, posted)
        if closed is not None:
            self._tasks.spawn(self._show(posted, closed_line(closed)),
                              name="slack-question-closed")

    async def closed(self, closed: DialogClosed) -> None:
        posted = self._shown.closed(closed)
        if posted is not None:
            await self._show(posted, closed_line(closed))

    def take(self, body: dict[str, Any]) -> None:
        """A block_actions payload: answered in the background (the caller acknowledges)."""
        where = clicked(body, self._platform)
        if where is None:
            log.warning("a Slack button click was skipped: it names no message in a "
                        "conversation (content not logged)")
            return
        self._tasks.spawn(self._in_turn(where), name="slack-click")

    async def _in_turn(self, where: Clicked) -> None:
        try:
            await self._serial.run(where.chat.key, lambda: self._answer(where))
        except Exception as exc:
            log.error("a click in chat=%s could not be answered (%s)", where.chat.key,
                      exc.__class__.__name__, exc_info=exc)

    async def _answer(self, where: Clicked) -> None:
        result = await self._counted(where)
        if result is None:
            await self._ephemeral(where, NOT_TAKEN)
            return
        parsed = decode(where.data)
        what = f"question {parsed[0]}" if parsed else "an unknown button"
        if result.shown is None:
            log.info("a click on %s in chat=%s by user %s did not count", what,
                     where.chat.key, where.user)
            await self._ephemeral(where, result.notice)
            return
        log.info("%s in chat=%s answered by a button", what, where.chat.key)
        if parsed:
            self._shown.forget(parsed[0])
        await self._show(Posted(where.channel, where.ts, where.text, where.blocks),
                         answered_line(result.shown))

    async def _counted(self, where: Clicked) -> Click | None:
        """What the bridge made of the click; None when the store stayed unavailable."""
        backoff = Backoff(0.5, 5.0)
        deadline = time.monotonic() + STORAGE_PATIENCE
        while True:
            try:
                return await click(self._bridge, self._asked, where.data, where.chat,
                                   where.user)
            except StorageUnavailable:
                if time.monotonic() >= deadline:
                    log.warning("a click in chat=%s was not taken: the store stayed "
                                "unavailable for %.0fs", where.chat.key, STORAGE_PATIENCE)
                    return None
                await backoff.wait()

    async def _show(self, posted: Posted, line: str) -> None:
        """The question shows `line` and loses its buttons. Best effort: a refusal (the
        message deleted, rate limits beyond the client's retries) is logged, by its error
        code only, and the buttons stay."""
        text = f"{posted.text}\n\n{line}" if posted.text else line
        try:
            await self._client.chat_update(channel=posted.channel, ts=posted.ts, text=text,
                                           blocks=closed_blocks(posted.blocks, line))
        except Exception as exc:
            reason = slack_error(exc) if isinstance(exc, SlackApiError) \
                else exc.__class__.__name__
            log.info("the closed question %s keeps its buttons (%s); they no longer count",
                     posted.ts, reason)

    async def _ephemeral(self, where: Clicked, text: str) -> None:
        await post_ephemeral(self._client, where.channel, where.user, text, where.chat.thread_id)
