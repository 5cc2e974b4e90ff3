"""picobot's JSON channel (`picobot agent --json`), see shared/seeds/picobot-json-channel.md.

Sessions are sent as plain ids and come back scoped as "json:<id>"; the scope is stripped so
the router only ever sees the ids it chose. Progress and error records may carry no session:
they belong to the turn this driver sent, which is why `agent.max_in_flight` stays 1 per
process for this protocol (with several turns in flight they could not be told apart, and are
then logged and dropped rather than pinned on the wrong chat).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from pathlib import Path
from typing import Any, ClassVar

from picobridge.agent.driver import Driver, DriverContext, DriverIO, Emit
from picobridge.agent.outfiles import files_in_record, files_in_text
from picobridge.agent.port import AgentEvent, AgentRequest, Failure, Progress, Reply
from picobridge.contract import Attachment

log = logging.getLogger("picobridge.agent")

SESSION_SCOPE = "json:"
# The session of a response whose line is too long to parse, from the line's first bytes.
_RESPONSE_SESSION = re.compile(rb'"session":"([^"\\]{1,200})"')

_PROGRESS_KINDS = {
    "text_delta": "text",
    "reasoning_delta": "reasoning",
    "tool_call_start": "tool_start",
    "tool_call_done": "tool_done",
}


def _attachment(att: Attachment) -> dict[str, str]:
    if att.content is not None:
        return {"name": att.name, "content": att.content}
    # The agent runs on the same host: a saved file is handed over by its path.
    details = [f"The user sent a file that was saved to {att.path}"]
    if att.size is not None:
        details.append(f"size: {att.size} bytes")
    if att.mime:
        details.append(f"type: {att.mime}")
    return {"name": att.name, "content": "\n".join(details)}


def _session(record: dict[str, Any]) -> str | None:
    value = record.get("session")
    if not isinstance(value, str) or not value:
        return None
    return value.removeprefix(SESSION_SCOPE)


def message_record(request: AgentRequest) -> dict[str, Any]:
    record: dict[str, Any] = {"type": "message", "content": request.text,
                              "session": request.session}
    if request.attachments:
        record["attachments"] = [_attachment(a) for a in request.attachments]
    return record


def decode(record: dict[str, Any], workdir: Path) -> AgentEvent | str | None:
    """An event (session as the agent wrote it), "ready"/"pong", or None for other records.
    `workdir` is the agent's, where a relative path of a file it sends starts."""
    kind = record.get("type")
    if kind == "response":
        content = record.get("content")
        attached = files_in_record(record.get("attachments"), workdir)
        if content is None and attached:
            content = ""  # files alone are an answer too
        if isinstance(content, str):
            answer, named = files_in_text(content, workdir)
            return Reply.of(_session(record), answer, attached + named)
        # An answer that is not text is the agent's fault: say so rather than show "None".
        return Failure(_session(record), "the agent sent an answer without text",
                       "bad_response")
    if kind == "progress":
        event = str(record.get("event", ""))
        text = record.get("text")
        return Progress(_session(record), _PROGRESS_KINDS.get(event, event),
                        text if isinstance(text, str) else "", str(record.get("name") or ""))
    if kind == "error":
        code = record.get("code")
        message = record.get("message")
        return Failure(_session(record),
                       message if isinstance(message, str) and message else "unknown error",
                       code if isinstance(code, str) else None)
    if kind in ("ready", "pong"):
        return str(kind)
    return None


class PicobotDriver(Driver):
    protocol: ClassVar[str] = "picobot-json"

    def __init__(self, io: DriverIO, emit: Emit, context: DriverContext) -> None:
        super().__init__(io, emit, context)
        self._ready = asyncio.Event()
        self._pong = asyncio.Event()
        self._running: list[str] = []  # sessions in the order their turns were sent
        # Progress without a session comes in floods (a streamed answer is thousands of
        # deltas): said once per agent process, then only at debug level.
        self._said_sessionless_progress = False
        self._workdir = context.settings.workdir_in(context.state_dir)

    def running(self) -> frozenset[str]:
        return frozenset(self._running)

    async def handshake(self) -> None:
        await self._ready.wait()

    async def probe(self) -> None:
        self._pong.clear()
        await self._io.write({"type": "ping"})
        await self._pong.wait()

    async def start_turn(self, request: AgentRequest) -> None:
        # Listed before the write: a fast agent may answer before the write returns.
        self._running.append(request.session)
        try:
            await self._io.write(message_record(request))
        except BaseException:
            self._forget(request.session)
            raise

    def shutdown_record(self) -> dict[str, Any] | None:
        return {"type": "shutdown"}

    async def on_unreadable(self, head: bytes) -> None:
        compact = head.replace(b" ", b"")
        if b'"type":"response"' not in compact:
            return  # progress or noise: the answer may still come
        session = _RESPONSE_SESSION.search(compact)
        named = session.group(1).decode("utf-8", "replace") if session else None
        await self._dispatch(Failure(named.removeprefix(SESSION_SCOPE) if named else None,
                                     "the agent's answer was too large to read (over 16 MiB)",
                                     "too_large"))

    async def on_record(self, record: dict[str, Any]) -> None:
        event = decode(record, self._workdir)
        if event == "ready":
            self._ready.set()
        elif event == "pong":
            self._pong.set()
        elif event is None:
            log.debug("agent record of unknown type ignored: %.200s", record.get("type"))
        elif not isinstance(event, str):
            await self._dispatch(event)

    async def _dispatch(self, event: AgentEvent) -> None:
        if event.session is None:
            if len(self._running) != 1:
                self._drop_sessionless(event)
                return
            event = _stamped(event, self._running[0])
        if isinstance(event, Reply | Failure):
            self._forget(event.session)
        await self._emit(event)

    def _drop_sessionless(self, event: AgentEvent) -> None:
        level = logging.WARNING
        if isinstance(event, Progress):
            level = logging.DEBUG if self._said_sessionless_progress else logging.WARNING
            self._said_sessionless_progress = True
        log.log(level, "worker %s: agent %s without a session while %d turns run; dropped%s",
                self._context.worker, type(event).__name__.lower(), len(self._running),
                " (further progress like it is logged at debug level)"
                if isinstance(event, Progress) and level == logging.WARNING else "")

    def _forget(self, session: str | None) -> None:
        if session in self._running:
            self._running.remove(session)


def _stamped(event: AgentEvent, session: str) -> AgentEvent:
    return dataclasses.replace(event, session=session)
