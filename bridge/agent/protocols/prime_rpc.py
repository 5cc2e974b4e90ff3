"""prime-agent's JSONL/RPC mode (`prime-agent --mode rpc`, the pi coding agent's `pi --mode rpc`),
see shared/seeds/prime-agent-rpc-protocol.md and the facts observed with the real program in
shared/peers/prime-rpc-peer.md (where they differ, the program wins).

- There is no ready record: an answered `get_state` is both the handshake and the health
  probe (it is answered mid-turn; even a refusal proves the agent reads and writes). Requests
  carry ids; a response without one (a parse error, an unknown command) is logged and never
  taken for another request's answer.
- Every picobridge session is one session file, `<sessions dir>/<session>.jsonl`. Before a
  turn the agent is switched to the chat's file when it is not the current one, never during
  a turn (that would drop the running turn). A file the agent refuses is moved aside and the
  chat starts afresh, with a word to the user; a switch an extension cancels fails the turn
  (it would otherwise run in whatever session the agent has open: another chat's).
- A turn is handed over once its prompt is written; the prompt's response (a refusal) and
  everything after it come through the events. Nothing the driver awaits can outlive its
  process: the switch is bounded by `agent.ready_timeout`, and abort is not awaited (pi
  answers it only once the run has ended, and a stuck run never does).
- The answer is the last assistant message's text at `agent_end`, except that a run ending in
  an error may be retried by the agent itself (`auto_retry_start` follows at once): then the
  retried run's end counts, and the error only if `auto_retry_end` says it failed.
- One prompt at a time per process (the agent refuses a second one).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from picobridge.agent.driver import Driver, DriverContext, DriverIO, Emit
from picobridge.agent.outfiles import files_in_text
from picobridge.agent.port import (
    AgentRequest,
    ControlKind,
    Failure,
    Progress,
    Reply,
)
from picobridge.agent.protocols.prime_rpc_controls import (
    COMMANDS,
    Applied,
    Injections,
    PrimeControls,
    RequestFailed,
    message_text,
    model_key,
)
from picobridge.agent.protocols.prime_rpc_wire import (
    assistant_text,
    dialog_request,
    images_of,
    move_aside,
    progress_of,
    prompt_text,
)
from picobridge.contract import DialogAnswer

log = logging.getLogger("picobridge.agent")

# How long an error ending may wait for the agent's own retry to be announced.
RETRY_NOTICE_WAIT = 2.0
STOPPED = "_(stopped)_"
_UI_IGNORED = frozenset({"setStatus", "setWidget", "setTitle", "set_editor_text"})


class Declined(RequestFailed):
    """The agent answered a switch with cancelled: true."""


class PrimeRpcDriver(PrimeControls, Driver):
    protocol: ClassVar[str] = "prime-rpc"
    probes_while_busy: ClassVar[bool] = True
    can_abort: ClassVar[bool] = True
    sessions_portable: ClassVar[bool] = True
    max_turns: ClassVar[int | None] = 1  # the agent refuses a second prompt while one runs
    commands: ClassVar[Mapping[str, str]] = COMMANDS
    controls: ClassVar[frozenset[ControlKind]] = frozenset(ControlKind)
    keeps_aborted: ClassVar[bool] = True  # the user message, tool calls and partial text

    def __init__(self, io: DriverIO, emit: Emit, context: DriverContext) -> None:
        super().__init__(io, emit, context)
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._unawaited: set[str] = set()  # requests sent without waiting for their answer
        self._prompt: str | None = None  # the running turn's prompt, until it is answered
        self._sessions = context.settings.sessions_dir or context.state_dir / "agent-sessions"
        self._workdir = context.settings.workdir_in(context.state_dir)
        self._current_file: str | None = None
        self._turn: str | None = None  # the session whose prompt runs
        self._notice: str | None = None  # said before the turn's answer (a refused file)
        self._stopping = False  # an abort was sent for the running turn
        # A run that ended in an error waits here for the agent's own retry to be announced.
        self._verdict: asyncio.Task[None] | None = None
        self._applied = Applied()  # the person's choices the open session has
        self._default_model = ""  # the agent's own, at start
        self._injected = Injections()
        self._answer = ""  # the run's last assistant text (the answer before a follow-up)

    # -- Driver ----------------------------------------------------------------------------

    def running(self) -> frozenset[str]:
        return frozenset({self._turn}) if self._turn is not None else frozenset()

    async def handshake(self) -> None:
        state = await self._state()
        data = state.get("data")
        current = data.get("sessionFile") if isinstance(data, dict) else None
        self._current_file = current if isinstance(current, str) else None
        self._default_model = model_key(state)

    async def probe(self) -> None:
        await self._state()

    async def start_turn(self, request: AgentRequest) -> None:
        self._turn = request.session
        self._notice = None
        self._stopping = False
        try:
            # An agent that dies here never answers: the wait must end by itself.
            async with asyncio.timeout(self._context.settings.ready_timeout):
                await self._switch_to(request.session)
                await self._apply(request.settings)
            self._answer = ""
            # Files are read off the loop, but a turn without attachments (most) skips the
            # thread hop: it is on every turn's path.
            images = (await asyncio.to_thread(images_of, request.attachments)
                      if request.attachments else {})
            record: dict[str, Any] = {"type": "prompt",
                                      "message": prompt_text(request, images)}
            if images:
                record["images"] = list(images.values())
            # Its response comes before the run's events; a refusal ends the turn there.
            self._prompt = self._new_id()
            await self._io.write({"id": self._prompt, **record})
        except RequestFailed as exc:
            await self._end(Failure(request.session, str(exc), "refused"))
        except BaseException:
            self._turn = self._prompt = None
            raise

    async def answer_dialog(self, request_id: str, answer: DialogAnswer) -> None:
        response: dict[str, Any] = {"type": "extension_ui_response", "id": request_id}
        if answer.cancelled:
            response["cancelled"] = True
        elif answer.confirmed is not None:
            response["confirmed"] = answer.confirmed
        else:
            response["value"] = answer.value or ""
        await self._io.write(response)

    async def abort(self, session: str) -> None:
        if self._turn == session:
            self._stopping = True
            # Answered only after the run ended: the worker waits for the turn, not for this.
            await self._post({"type": "abort"})

    async def on_record(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "response":
            await self._answered(record)
        elif kind == "extension_ui_request":
            await self._ui_request(record)
        elif self._turn is not None:
            await self._turn_event(kind, record)

    async def on_unreadable(self, head: bytes) -> None:
        if self._turn is not None and b'"agent_end"' in head.replace(b" ", b""):
            await self._end(Failure(self._turn, "the agent's answer was too large to read "
                                                "(over 16 MiB)", "too_large"))

    # -- requests --------------------------------------------------------------------------

    def _new_id(self) -> str:
        return f"pb-{next(self._ids)}"

    async def _state(self) -> dict[str, Any]:
        try:
            return await self._request({"type": "get_state"})
        except RequestFailed as exc:
            log.warning("worker %s: the agent refused get_state (%s); it answered all the same",
                        self._context.worker, str(exc)[:300])
            return {}

    async def _post(self, record: dict[str, Any]) -> None:
        """A request whose answer nobody waits for (it is still recognised as ours)."""
        request_id = self._new_id()
        self._unawaited.add(request_id)
        await self._io.write({"id": request_id, **record})

    def closed(self) -> None:
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the agent is gone"))

    async def _request(self, record: dict[str, Any]) -> dict[str, Any]:
        request_id = self._new_id()
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = waiter
        try:
            await self._io.write({"id": request_id, **record})
            response = await waiter
        finally:
            self._pending.pop(request_id, None)
        if response.get("success") is not True:
            error = response.get("error")
            raise RequestFailed(error if isinstance(error, str) and error
                                else f"the agent refused {record['type']}")
        return response

    async def _answered(self, record: dict[str, Any]) -> None:
        request_id = record.get("id")
        if request_id is not None and request_id == self._prompt:
            self._prompt = None
            if record.get("success") is not True and self._turn is not None:
                error = record.get("error")
                await self._end(Failure(self._turn, error if isinstance(error, str) and error
                                        else "the agent refused the prompt", "refused"))
            return
        if isinstance(request_id, str) and request_id in self._unawaited:
            self._unawaited.discard(request_id)
            return
        waiter = self._pending.get(request_id) if isinstance(request_id, str) else None
        if waiter is None:
            # A parse error or an unknown command carries no id: it answers nobody.
            log.warning("worker %s: agent response to no request of ours (%s): %.300s",
                        self._context.worker, record.get("command"), record.get("error"))
            return
        if not waiter.done():
            waiter.set_result(record)

    # -- sessions --------------------------------------------------------------------------

    async def _switch_to(self, session: str) -> None:
        path = str((self._sessions / f"{session}.jsonl").absolute())
        if self._current_file == path:
            return
        try:
            await self._switch_request(path)
        except Declined:
            raise
        except RequestFailed as exc:
            # Its history cannot be used (pi refuses a file whose working directory is gone):
            # keep it aside for the operator and start afresh, rather than a stuck chat.
            aside = f"{path}.refused-{int(time.time())}"
            await asyncio.to_thread(move_aside, path, aside)
            log.warning("worker %s: the agent refused session file %s (%s); moved to %s",
                        self._context.worker, path, str(exc).splitlines()[0], aside)
            await self._switch_request(path)
            self._notice = ("⚠️ The agent could not open this conversation's history, so it "
                            "starts afresh.")
        self._current_file = path
        self._applied.reset()  # pi puts its command line's model back at every switch

    async def _switch_request(self, path: str) -> None:
        response = await self._request({"type": "switch_session", "sessionPath": path})
        data = response.get("data")
        if isinstance(data, dict) and data.get("cancelled") is True:
            # An extension vetoed it: the agent is still in the session it had open.
            raise Declined("the agent declined to open this conversation's session "
                           "(an extension cancelled the switch)")

    # -- a turn's events -------------------------------------------------------------------

    async def _turn_event(self, kind: Any, record: dict[str, Any]) -> None:
        session = self._turn
        assert session is not None
        progress = progress_of(kind, record)
        if progress is not None:
            await self._emit(Progress(session, *progress))
        if kind == "message_start":
            await self._message_started(session, record.get("message"))
        elif kind == "message_end":
            text = assistant_text([record.get("message")])[0]
            if isinstance(record.get("message"), dict) and \
                    record["message"].get("role") == "assistant":
                self._answer = text
        if kind in ("agent_start", "auto_retry_start"):
            self._cancel_verdict()
        elif kind == "auto_retry_end" and record.get("success") is False:
            if self._stopping:
                # Aborted while it waited to retry: pi reports "Retry cancelled".
                await self._end(Reply.of(session, STOPPED, stopped=True))
                return
            final = record.get("finalError")
            error = final if isinstance(final, str) else "the agent gave up retrying"
            await self._end(Failure(session, error, "retry_failed"))
        elif kind == "agent_end":
            await self._run_ended(session, record.get("messages"))

    async def _message_started(self, session: str, message: Any) -> None:
        text = message_text(message)
        tag = self._injected.seen(text) if text is not None else None
        if tag is not None:
            # A follow-up begins: what the agent said before it answers what came before.
            delivered = self._injected.take_delivered()
            answer, self._answer = self._answer, ""
            await self._emit(Reply.of(session, *files_in_text(answer, self._workdir),
                                      delivered=delivered, continues=tag))

    async def _run_ended(self, session: str, messages: Any) -> None:
        text, reason, error = assistant_text(messages)
        if reason == "error":
            # The agent may retry by itself; its auto_retry_start follows at once.
            self._cancel_verdict()
            self._verdict = asyncio.create_task(
                self._no_retry(session, error or "the model failed"), name="rpc-verdict")
            return
        if reason == "aborted":
            await self._end(Reply.of(session, f"{text}\n\n{STOPPED}" if text.strip()
                                     else STOPPED, stopped=True))
            return
        await self._end(Reply.of(session, *files_in_text(text, self._workdir)))

    async def _no_retry(self, session: str, error: str) -> None:
        await asyncio.sleep(RETRY_NOTICE_WAIT)
        self._verdict = None  # this task ends the turn: it must not cancel itself
        try:
            # Still there? If the process died meanwhile, the worker has put the turn back
            # (maybe already sent it to the next process): this error is no longer its end.
            await self._post({"type": "get_state"})
        except (OSError, TimeoutError):
            return
        await self._end(Failure(session, error, "model_error"))

    def _cancel_verdict(self) -> None:
        if self._verdict is not None:
            self._verdict.cancel()
            self._verdict = None

    async def _end(self, event: Reply | Failure) -> None:
        self._cancel_verdict()
        if self._turn != event.session:
            return
        self._turn = self._prompt = None
        undelivered = self._injected.undelivered()
        if undelivered:
            # pi keeps them for its next prompt; switching the session in again drops them.
            self._current_file = None
        if isinstance(event, Reply):
            reply = dataclasses.replace(event.reply, text=f"{self._notice}\n\n{event.text}") \
                if self._notice else event.reply
            event = Reply(event.session, reply, self._injected.take_delivered(),
                          undelivered=undelivered, stopped=event.stopped)
        else:
            self._injected.take_delivered()
            event = Failure(event.session, event.message, event.code, undelivered)
        self._notice = None
        await self._emit(event)

    # -- extension UI ----------------------------------------------------------------------

    async def _ui_request(self, record: dict[str, Any]) -> None:
        method, ui_id = record.get("method"), record.get("id")
        if method in _UI_IGNORED:
            return  # status lines and widgets of a terminal UI: nothing to show in a chat
        if method == "notify":
            message = record.get("message")
            if self._turn is not None and isinstance(message, str):
                await self._emit(Progress(self._turn, "status", message))
            return
        if not isinstance(ui_id, str):
            return
        request = dialog_request(self._turn, ui_id, method, record)
        if request is None:
            # Nobody to ask (no turn runs) or a kind of dialog unknown here: the extension hears
            # "cancelled" at once rather than blocking its agent.
            log.info("worker %s: agent dialog %s cancelled: nobody to ask",
                     self._context.worker, method)
            await self._io.write({"type": "extension_ui_response", "id": ui_id,
                                  "cancelled": True})
            return
        await self._emit(request)
