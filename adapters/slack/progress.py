"""Showing that the agent works, in Slack: reactions on the user's messages, the assistant
thread status, and (optionally) the answer streamed into a message edited as it grows.

The router calls in while it reads the agent's output, so nothing here waits for Slack: every
call runs in a task this module owns. Failures are logged and forgotten, because progress is
decoration and the reply itself travels through the outbox. A streamed delta only appends to
the turn's `DraftText`; one flush task per stream joins and renders it when an edit is due (at
most once per STREAM_INTERVAL), so many tiny deltas cost time in proportion to their number.

Reactions are kept as a wanted state per message (👀 while waiting, then ✅ or ❌) that one
task per message brings Slack to, one call at a time, so a "done" never races the "eyes" it
replaces and only the net change is sent. 👀 is asked for RECEIPT_GRACE after the message was
stored: an answer faster than that goes out with ✅ alone instead of a 👀 that flickers on and
off (and costs two more API calls against Slack's rate limits).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.common.drafts import DraftQueue, DraftText
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.slack.render import render_slack
from picobridge.adapters.slack.send import StreamTarget, slack_error
from picobridge.contract import ChatRef, Outcome, OutgoingReply

log = logging.getLogger("picobridge.slack.progress")

STREAM_INTERVAL = 1.0  # chat.update is Tier 3 (~50/min): one edit a second per thread is safe
STREAM_PREVIEW = 3000
# Streamed text kept for the preview (its first STREAM_PREVIEW characters, rendered): Markdown
# markup takes room in the source, the rest would never be shown.
STREAM_CAP = 2 * STREAM_PREVIEW
THINKING = "is thinking…"
RECEIPT_GRACE = 0.3  # seconds before 👀 appears on a message still waiting for its answer
_KEEP_REACTIONS = 10_000  # messages whose reaction state is remembered
_HARMLESS = frozenset({"already_reacted", "no_reaction", "message_not_found"})


@dataclass(slots=True)
class _Reactions:
    shown: set[str]
    wanted: set[str] = field(default_factory=set)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    in_grace: bool = False


@dataclass(slots=True)
class _Stream:
    chat: ChatRef
    text: DraftText = field(default_factory=lambda: DraftText(STREAM_CAP))
    ts: str | None = None
    shown: str = ""
    last: float = 0.0
    task: asyncio.Task[None] | None = None
    closed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SlackProgress:
    def __init__(self, client: AsyncWebClient, *, received: str, done: str, failed: str,
                 stream: bool) -> None:
        self._client = client
        self._received = received
        self._done = done
        self._failed = failed
        self._stream_enabled = stream
        self._reactions: OrderedDict[str, _Reactions] = OrderedDict()
        self._turn_messages: dict[str, tuple[str, ...]] = {}
        self._status_chats: set[str] = set()
        self._no_status: set[str] = set()
        self._streams: dict[str, _Stream] = {}  # the running turn's stream, per chat
        self._tasks = TaskSet(log)
        # Streams of finished turns whose answer is not sent yet (the outbox may lag behind
        # the agent), each waiting for its own answer to replace it.
        self._drafts: DraftQueue[_Stream] = DraftQueue(self._tasks, self._discard_stream)

    # -- reactions ---------------------------------------------------------------------------

    def received(self, channel: str, ts: str) -> None:
        self._want(channel, ts, self._received, fresh=True)

    def turn_started(self, chat: ChatRef, message_ids: tuple[str, ...]) -> None:
        self._turn_messages[chat.key] = message_ids
        if chat.thread_id is not None and chat.chat_id.startswith("D") \
                and chat.key not in self._no_status:
            # In an assistant thread Slack shows this under the input box until the reply.
            self._status_chats.add(chat.key)
            self._tasks.spawn(self._set_status(chat, THINKING), name="slack-status")

    def turn_ended(self, chat: ChatRef, outcome: Outcome) -> None:
        ids = self._turn_messages.pop(chat.key, ())
        if outcome is not Outcome.REQUEUED:
            final = self._done if outcome is Outcome.DONE else self._failed
            for ts in ids:
                self._want(chat.chat_id, ts, final)
        if chat.key in self._status_chats:
            self._status_chats.discard(chat.key)
            self._tasks.spawn(self._set_status(chat, ""), name="slack-status")
        stream = self._streams.pop(chat.key, None)
        if stream is not None:
            if outcome is Outcome.DONE:
                self._drafts.add(chat.key, ids, stream)
            else:
                # A failed turn's error reply stands alone; a requeued one streams anew.
                self._tasks.spawn(self._discard_stream(stream), name="slack-stream-discard")

    def _want(self, channel: str, ts: str, name: str, *, fresh: bool = False) -> None:
        # An empty name turns that reaction off.
        wanted = {name} if name else set()
        key = f"{channel}:{ts}"
        state = self._reactions.get(key)
        if state is None:
            # A message this process has not reacted to may still carry the received reaction
            # from before a restart: assume it does (removing a missing one is harmless).
            shown = {self._received} if self._received and not fresh else set()
            if shown == wanted:
                return
            state = _Reactions(shown=shown)
            self._reactions[key] = state
            while len(self._reactions) > _KEEP_REACTIONS:
                self._reactions.popitem(last=False)
        state.wanted = wanted
        state.changed.set()
        if state.task is None or state.task.done():
            state.changed.clear()
            state.task = self._tasks.spawn(self._reconcile(key, channel, ts, state, fresh),
                                           name="slack-reactions")

    async def _reconcile(self, key: str, channel: str, ts: str, state: _Reactions,
                         grace: bool) -> None:
        if grace:
            state.in_grace = True
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RECEIPT_GRACE):
                    await state.changed.wait()
            state.in_grace = False
        while state.shown != state.wanted:
            stale = sorted(state.shown - state.wanted)
            if stale:
                await self._call(self._client.reactions_remove, channel=channel, timestamp=ts,
                                 name=stale[0])
                state.shown.discard(stale[0])
            else:
                name = sorted(state.wanted - state.shown)[0]
                await self._call(self._client.reactions_add, channel=channel, timestamp=ts,
                                 name=name)
                state.shown.add(name)
        if self._received not in state.wanted and self._reactions.get(key) is state:
            del self._reactions[key]  # final: nothing will change on this message any more

    async def _set_status(self, chat: ChatRef, status: str) -> None:
        assert chat.thread_id is not None
        try:
            await self._client.assistant_threads_setStatus(
                channel_id=chat.chat_id, thread_ts=chat.thread_id, status=status)
        except SlackApiError as exc:
            # Not an assistant thread (or no assistant:write scope): stop trying for this chat.
            self._no_status.add(chat.key)
            log.debug("assistant status unavailable for %s: %s", chat.key, slack_error(exc))
        except Exception as exc:
            log.debug("assistant status failed for %s: %s", chat.key, exc.__class__.__name__)

    async def _call(self, method: Callable[..., Awaitable[Any]], **kwargs: Any) -> None:
        try:
            await method(**kwargs)
        except SlackApiError as exc:
            if slack_error(exc) not in _HARMLESS:
                log.warning("Slack %s failed: %s", getattr(method, "__name__", "call"),
                            slack_error(exc))
        except Exception as exc:
            log.warning("Slack %s failed: %s", getattr(method, "__name__", "call"),
                        exc.__class__.__name__)

    # -- streaming ---------------------------------------------------------------------------

    def text(self, chat: ChatRef, delta: str) -> None:
        if not self._stream_enabled or not delta:
            return
        stream = self._streams.get(chat.key)
        if stream is None:
            stream = self._streams[chat.key] = _Stream(chat)
        if stream.closed:
            return
        version = stream.text.version
        stream.text.add(delta)
        if stream.text.version == version:
            return  # past what the preview shows: nothing to edit
        if stream.task is None or stream.task.done():
            stream.task = self._tasks.spawn(self._flush_later(chat, stream),
                                            name="slack-stream")

    async def _flush_later(self, chat: ChatRef, stream: _Stream) -> None:
        while True:
            wait = stream.last + STREAM_INTERVAL - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            async with stream.lock:
                if stream.closed:
                    return
                flushed = stream.text.version
                await self._show(chat, stream, _preview(stream.text))
                stream.last = time.monotonic()
            # Text that arrived while Slack was answering still has to be shown.
            if stream.text.version == flushed:
                return

    async def _show(self, chat: ChatRef, stream: _Stream, shown: str) -> None:
        if not shown or shown == stream.shown:
            return
        try:
            if stream.ts is None:
                resp = await self._client.chat_postMessage(
                    channel=chat.chat_id, thread_ts=chat.thread_id, text=shown,
                    unfurl_links=False, unfurl_media=False)
                stream.ts = str(resp["ts"])
            else:
                await self._client.chat_update(channel=chat.chat_id, ts=stream.ts, text=shown)
            stream.shown = shown
        except Exception as exc:
            log.debug("stream update failed for %s: %s", chat.key, exc.__class__.__name__)

    async def take_stream(self, chat: ChatRef, reply: OutgoingReply) -> StreamTarget | None:
        """The streamed message `reply` should replace (its streaming stops here)."""
        stream = self._drafts.take(chat.key, reply)
        if stream is None:
            return None
        async with stream.lock:
            stream.closed = True
            if stream.task is not None and not stream.task.done():
                stream.task.cancel()
        return StreamTarget(stream.ts) if stream.ts is not None else None

    def settling(self, reply: OutgoingReply) -> contextlib.AbstractContextManager[None]:
        """Around sending `reply`: its stream is forgotten once it is delivered (or refused
        for good), and kept for a retry otherwise."""
        return self._drafts.settling(reply)

    async def _discard_stream(self, stream: _Stream) -> None:
        async with stream.lock:
            stream.closed = True
            if stream.task is not None and not stream.task.done():
                stream.task.cancel()
            if stream.ts is not None:
                await self._call(self._client.chat_delete, channel=stream.chat.chat_id,
                                 ts=stream.ts)

    # -- lifecycle ---------------------------------------------------------------------------

    async def settle(self, timeout: float) -> None:
        """Let pending reaction calls finish (bounded) before the client goes away."""
        for state in self._reactions.values():
            if state.in_grace and state.task is not None:
                state.task.cancel()  # not asked for yet, and nobody is waiting any more
        await self._tasks.wait(timeout)

    async def close(self) -> None:
        await self._tasks.close()
        self._drafts.clear()


def _preview(text: DraftText) -> str:
    chunks = render_slack(text.text(), STREAM_PREVIEW)
    if not chunks:
        return ""
    return chunks[0] + (" …" if len(chunks) == 1 and not text.cut else "\n…")
