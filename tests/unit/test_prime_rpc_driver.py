"""The prime-rpc driver (pi's RPC mode) against a scripted pipe: requests and their ids, the
events of a turn, the agent's own retries, aborts, session files and extension dialogs."""

from __future__ import annotations

import asyncio
import base64
import logging
from pathlib import Path
from typing import Any

import pytest

from picobridge.agent.driver import DriverContext
from picobridge.agent.port import AgentEvent, AgentRequest, DialogRequest, Failure, Progress, Reply
from picobridge.agent.protocols import PROTOCOLS, driver_class, prime_rpc
from picobridge.agent.protocols.prime_rpc import PrimeRpcDriver
from picobridge.config.sections import AgentSettings
from picobridge.contract import Attachment, DialogAnswer, DialogKind

JSON = dict[str, Any]


class Pipe:
    """The agent's stdin: what the driver wrote, in order, to be answered by the test."""

    def __init__(self) -> None:
        self.written: list[JSON] = []
        self._unread: asyncio.Queue[JSON] = asyncio.Queue()
        self.broken = False

    async def write(self, record: JSON) -> None:
        if self.broken:
            raise BrokenPipeError("agent stdin closed")
        self.written.append(record)
        self._unread.put_nowait(record)

    async def next(self) -> JSON:
        return await asyncio.wait_for(self._unread.get(), 1)

    def pending(self) -> int:
        return self._unread.qsize()


class Rig:
    def __init__(self, tmp: Path, **settings: Any) -> None:
        self.events: list[AgentEvent] = []
        self.pipe = Pipe()
        self.sessions = tmp / "state" / "agent-sessions"
        context = DriverContext(AgentSettings(protocol="prime-rpc", **settings), tmp / "state",
                                "w1")
        self.driver = PrimeRpcDriver(self.pipe, self.emit, context)

    async def emit(self, event: AgentEvent) -> None:
        self.events.append(event)

    async def answer(self, kind: str, success: bool = True, **fields: Any) -> JSON:
        """Answer the next request the driver wrote, which must be a `kind`."""
        request = await self.pipe.next()
        assert request["type"] == kind, request
        await self.driver.on_record({"id": request["id"], "type": "response", "command": kind,
                                     "success": success, **fields})
        return request

    async def ready(self, current: str = "/pi/default.jsonl") -> None:
        handshake = asyncio.create_task(self.driver.handshake())
        await self.answer("get_state", data={"sessionFile": current, "isStreaming": False})
        await asyncio.wait_for(handshake, 1)

    async def turn(self, session: str, text: str = "hello", *,
                   attachments: tuple[Attachment, ...] = (), switch: bool = True) -> JSON:
        """Start a turn and answer its switch (if one is due): the prompt record."""
        start = asyncio.create_task(self.driver.start_turn(
            AgentRequest(session, text, attachments)))
        if switch:
            await self.answer("switch_session", data={"cancelled": False})
        await asyncio.wait_for(start, 1)
        prompt = await self.pipe.next()
        assert prompt["type"] == "prompt"
        return prompt

    async def feed(self, *records: JSON) -> None:
        for record in records:
            await self.driver.on_record(record)

    def path(self, session: str) -> str:
        return str(self.sessions / f"{session}.jsonl")


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def assistant(text: str, stop: str = "stop", error: str | None = None) -> JSON:
    message: JSON = {"role": "assistant", "content": [{"type": "text", "text": text}] if text
                     else [], "stopReason": stop}
    if error is not None:
        message["errorMessage"] = error
    return message


def end(*messages: JSON) -> JSON:
    return {"type": "agent_end", "messages": [{"role": "user", "content": []}, *messages]}


def delta(kind: str, text: str) -> JSON:
    return {"type": "message_update", "assistantMessageEvent": {
        "type": kind, "contentIndex": 0, "delta": text, "partial": assistant("whole")},
        "message": assistant("whole")}


# -- registry, handshake, requests -------------------------------------------------------------

def test_the_registry_names_it_with_its_default_command() -> None:
    assert driver_class("prime-rpc") is PrimeRpcDriver
    assert PROTOCOLS["prime-rpc"].default_command == ("prime-agent", "--mode", "rpc")
    assert AgentSettings(protocol="prime-rpc").command == ["prime-agent", "--mode", "rpc"]
    assert PrimeRpcDriver.probes_while_busy and PrimeRpcDriver.can_abort
    assert PrimeRpcDriver.sessions_portable


async def test_an_answered_get_state_is_the_handshake_and_the_probe(rig: Rig) -> None:
    handshake = asyncio.create_task(rig.driver.handshake())
    request = await rig.pipe.next()
    assert request == {"id": "pb-1", "type": "get_state"}
    await asyncio.sleep(0)
    assert not handshake.done()
    await rig.feed({"id": "pb-1", "type": "response", "command": "get_state", "success": True,
                    "data": {"sessionFile": "/pi/default.jsonl"}})
    await asyncio.wait_for(handshake, 1)
    probe = asyncio.create_task(rig.driver.probe())
    await rig.answer("get_state", data={"isStreaming": True})
    await asyncio.wait_for(probe, 1)
    assert rig.driver.shutdown_record() is None


async def test_a_refused_get_state_still_counts_as_an_answer(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    handshake = asyncio.create_task(rig.driver.handshake())
    await rig.answer("get_state", success=False, error="internal error")
    await asyncio.wait_for(handshake, 1)
    probe = asyncio.create_task(rig.driver.probe())
    await rig.answer("get_state", success=False, error="internal error")
    await asyncio.wait_for(probe, 1)
    assert "refused get_state (internal error)" in caplog.text


async def test_responses_that_overtake_each_other_find_their_request(rig: Rig) -> None:
    await rig.ready()
    start = asyncio.create_task(rig.driver.start_turn(AgentRequest("s1", "hello")))
    switch = await rig.pipe.next()
    probe = asyncio.create_task(rig.driver.probe())
    state = await rig.pipe.next()
    # The probe's answer first, then the switch's: each resolves its own request.
    await rig.feed({"id": state["id"], "type": "response", "command": "get_state",
                    "success": True, "data": {}})
    await asyncio.wait_for(probe, 1)
    assert not start.done()
    await rig.feed({"id": switch["id"], "type": "response", "command": "switch_session",
                    "success": True, "data": {"cancelled": False}})
    await asyncio.wait_for(start, 1)
    assert (await rig.pipe.next())["type"] == "prompt"
    assert len({r["id"] for r in rig.pipe.written}) == len(rig.pipe.written)


async def test_a_response_without_an_id_answers_no_request(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    probe = asyncio.create_task(rig.driver.probe())
    await rig.pipe.next()
    await rig.feed({"type": "response", "command": "parse", "success": False,
                    "error": "Failed to parse command: Unexpected token"},
                   {"type": "response", "command": "bogus", "success": False,
                    "error": "Unknown command: bogus"})
    await asyncio.sleep(0)
    assert not probe.done()
    assert "response to no request of ours (parse)" in caplog.text
    assert "response to no request of ours (bogus)" in caplog.text
    probe.cancel()


# -- sessions ---------------------------------------------------------------------------------

async def test_the_agent_is_switched_to_the_sessions_file_only_when_it_changes(
        rig: Rig) -> None:
    await rig.ready()
    prompt = await rig.turn("s1")
    switch = rig.pipe.written[1]
    assert switch == {"id": "pb-2", "type": "switch_session", "sessionPath": rig.path("s1")}
    assert prompt == {"id": "pb-3", "type": "prompt", "message": "hello"}
    assert rig.driver.running() == {"s1"}
    await rig.feed(end(assistant("hi")))
    await rig.turn("s1", "again", switch=False)
    await rig.feed(end(assistant("hi again")))
    await rig.turn("s2")
    assert [r["sessionPath"] for r in rig.pipe.written if r["type"] == "switch_session"] == [
        rig.path("s1"), rig.path("s2")]


async def test_sessions_dir_and_the_agents_own_current_file(tmp_path: Path) -> None:
    rig = Rig(tmp_path, sessions_dir=tmp_path / "chats")
    # The agent already has this session open (a restart that kept it): no switch.
    await rig.ready(current=str(tmp_path / "chats" / "s1.jsonl"))
    await rig.turn("s1", switch=False)
    assert [r["type"] for r in rig.pipe.written] == ["get_state", "prompt"]


async def test_a_refused_session_file_is_moved_aside_and_the_chat_told(rig: Rig) -> None:
    await rig.ready()
    rig.sessions.mkdir(parents=True)
    file = rig.sessions / "s1.jsonl"
    file.write_text('{"type":"session","cwd":"/gone"}\n')
    start = asyncio.create_task(rig.driver.start_turn(AgentRequest("s1", "hello")))
    await rig.answer("switch_session", success=False,
                     error="Stored session working directory does not exist: /gone\n"
                           "Session file: x\nCurrent working directory: /work")
    retried = await rig.answer("switch_session", data={"cancelled": False})
    await asyncio.wait_for(start, 1)
    assert retried["sessionPath"] == rig.path("s1")
    (aside,) = rig.sessions.glob("s1.jsonl.refused-*")
    assert aside.read_text() == '{"type":"session","cwd":"/gone"}\n'
    assert not file.exists()
    await rig.pipe.next()
    await rig.feed(end(assistant("fresh start")))
    assert rig.events == [Reply.of("s1", "⚠️ The agent could not open this conversation's "
                                      "history, so it starts afresh.\n\nfresh start")]
    # Told once: the next turn of the chat is plain.
    await rig.turn("s1", switch=False)
    await rig.feed(end(assistant("plain")))
    assert rig.events[-1] == Reply.of("s1", "plain")


async def test_a_switch_an_extension_cancels_fails_the_turn(rig: Rig) -> None:
    await rig.ready()
    start = asyncio.create_task(rig.driver.start_turn(AgentRequest("s1", "hello")))
    await rig.answer("switch_session", data={"cancelled": True})
    await asyncio.wait_for(start, 1)
    (failure,) = rig.events
    assert isinstance(failure, Failure) and failure.code == "refused"
    assert "declined" in failure.message
    assert rig.pipe.pending() == 0  # no prompt: it would run in another chat's session
    assert rig.driver.running() == frozenset()
    # Nothing was switched: the next turn of that session asks again.
    next_turn = asyncio.create_task(rig.driver.start_turn(AgentRequest("s1", "again")))
    assert (await rig.answer("switch_session", data={}))["sessionPath"] == rig.path("s1")
    await asyncio.wait_for(next_turn, 1)


async def test_a_switch_never_answered_ends_by_itself(tmp_path: Path) -> None:
    rig = Rig(tmp_path, ready_timeout=0.05)
    await rig.ready()
    with pytest.raises(TimeoutError):
        await rig.driver.start_turn(AgentRequest("s1", "hello"))
    assert rig.driver.running() == frozenset()


# -- a turn -----------------------------------------------------------------------------------

async def test_a_turns_events_become_progress_and_its_answer(rig: Rig) -> None:
    await rig.ready()
    await rig.turn("s1")
    await rig.feed({"type": "agent_start"}, delta("thinking_delta", "hmm"),
                   delta("text_delta", "line\u2028one"),
                   {"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash",
                    "args": {"command": "ls"}},
                   {"type": "tool_execution_update", "toolCallId": "c1", "toolName": "bash"},
                   {"type": "tool_execution_end", "toolCallId": "c1", "toolName": "bash",
                    "isError": False},
                   {"type": "compaction_start", "reason": "threshold"},
                   {"type": "extension_ui_request", "id": "u1", "method": "notify",
                    "message": "heads up", "notifyType": "info"},
                   end({"role": "assistant", "content": [{"type": "toolCall", "id": "c1"}],
                        "stopReason": "toolUse"}, {"role": "toolResult", "content": []},
                       assistant("done \u2028 here")))
    assert rig.events == [
        Progress("s1", "reasoning", "hmm"), Progress("s1", "text", "line\u2028one"),
        Progress("s1", "tool_start", "", "bash"), Progress("s1", "tool_done", "", "bash"),
        Progress("s1", "status", "Compacting the conversation's memory…"),
        Progress("s1", "status", "heads up"), Reply.of("s1", "done \u2028 here")]
    assert rig.driver.running() == frozenset()
    # After the turn, stray events (a late compaction) belong to nobody.
    await rig.feed({"type": "compaction_end"}, end(assistant("stray")))
    assert len(rig.events) == 7


async def test_a_refused_prompt_ends_the_turn_with_its_error(rig: Rig) -> None:
    await rig.ready()
    prompt = await rig.turn("s1")
    await rig.feed({"id": prompt["id"], "type": "response", "command": "prompt",
                    "success": False, "error": "Agent is already processing."})
    assert rig.events == [Failure("s1", "Agent is already processing.", "refused")]
    assert rig.driver.running() == frozenset()


async def test_a_prompt_carries_images_and_inlines_text_files(rig: Rig, tmp_path: Path) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"\xff\xd8\xff jpeg bytes")
    await rig.ready()
    prompt = await rig.turn("s1", "look", attachments=(
        Attachment("notes.txt", content="a,b"),
        Attachment("photo.jpg", path=str(photo), size=12, mime="image/jpeg"),
        Attachment("report.pdf", path="/state/media/report.pdf", size=99,
                   mime="application/pdf")))
    assert prompt["message"] == (
        "[Attachment: notes.txt]\na,b\n[/Attachment]\n\n"
        "[Attachment: report.pdf] The user sent a file that was saved to "
        "/state/media/report.pdf (size: 99 bytes, type: application/pdf)\n\nlook")
    (image,) = prompt["images"]
    assert image == {"type": "image", "mimeType": "image/jpeg",
                     "data": base64.b64encode(b"\xff\xd8\xff jpeg bytes").decode()}


async def test_a_file_labelled_an_image_goes_as_an_image_only_if_its_bytes_are_one(
        rig: Rig, tmp_path: Path) -> None:
    liar = tmp_path / "liar.png"
    liar.write_bytes(b"just some text, not a picture")
    webp = tmp_path / "real.bin"
    webp.write_bytes(b"RIFF\x10\x00\x00\x00WEBPVP8 rest")
    await rig.ready()
    prompt = await rig.turn("s1", "see", attachments=(
        Attachment("liar.png", path=str(liar), size=29, mime="image/png"),
        Attachment("real.bin", path=str(webp), size=20, mime="application/octet-stream")))
    assert prompt["message"] == (
        f"[Attachment: liar.png] The user sent a file that was saved to {liar} "
        "(size: 29 bytes, type: image/png)\n\nsee")
    (image,) = prompt["images"]
    assert image["mimeType"] == "image/webp"
    assert base64.b64decode(image["data"]) == webp.read_bytes()


async def test_a_failed_write_forgets_the_turn(rig: Rig) -> None:
    await rig.ready()
    rig.pipe.broken = True
    with pytest.raises(BrokenPipeError):
        await rig.driver.start_turn(AgentRequest("s1", "hello"))
    assert rig.driver.running() == frozenset()


async def test_an_answer_too_large_to_read_ends_the_turn(rig: Rig) -> None:
    await rig.ready()
    await rig.turn("s1")
    await rig.driver.on_unreadable(b'{"type":"message_update","assistantMessageEvent"')
    assert rig.events == []
    await rig.driver.on_unreadable(b'{"type": "agent_end", "messages": [{"role"')
    assert rig.events == [Failure("s1", "the agent's answer was too large to read (over "
                                        "16 MiB)", "too_large")]


# -- the agent's own retries ------------------------------------------------------------------

async def test_a_retried_run_counts_only_its_last_end(rig: Rig) -> None:
    await rig.ready()
    await rig.turn("s1")
    await rig.feed({"type": "agent_start"}, end(assistant("", "error", "500 boom")),
                   {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3,
                    "delayMs": 2000, "errorMessage": "500 boom"},
                   {"type": "agent_start"}, delta("text_delta", "ok"),
                   {"type": "auto_retry_end", "success": True, "attempt": 1},
                   {"type": "agent_end", "messages": [assistant("ok")]})
    assert rig.events == [Progress("s1", "status", "The model failed; trying again (1 of 3)…"),
                          Progress("s1", "text", "ok"), Reply.of("s1", "ok")]


async def test_a_run_the_agent_gives_up_on_is_a_failure(rig: Rig) -> None:
    await rig.ready()
    await rig.turn("s1")
    await rig.feed(end(assistant("", "error", "500 boom")),
                   {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 1,
                    "delayMs": 10, "errorMessage": "500 boom"},
                   {"type": "agent_start"},
                   {"type": "agent_end", "messages": [assistant("", "error", "500 boom")]},
                   {"type": "auto_retry_end", "success": False, "attempt": 1,
                    "finalError": "500 boom"})
    assert rig.events[-1] == Failure("s1", "500 boom", "retry_failed")
    assert len([e for e in rig.events if not isinstance(e, Progress)]) == 1


async def test_an_error_end_without_a_retry_fails_after_the_wait(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prime_rpc, "RETRY_NOTICE_WAIT", 0.01)
    await rig.ready()
    await rig.turn("s1")
    await rig.feed(end(assistant("", "error", "400 bad request")))
    verdict = rig.driver._verdict
    assert verdict is not None and rig.events == []
    await asyncio.wait_for(verdict, 1)
    assert (await rig.pipe.next())["type"] == "get_state"  # it checked the agent is there
    assert rig.events == [Failure("s1", "400 bad request", "model_error")]


async def test_an_error_end_of_an_agent_that_died_fails_nothing(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prime_rpc, "RETRY_NOTICE_WAIT", 0.01)
    await rig.ready()
    await rig.turn("s1")
    await rig.feed(end(assistant("", "error", "500 boom")))
    verdict = rig.driver._verdict
    assert verdict is not None
    rig.pipe.broken = True  # the process is gone; the worker has put the turn back
    await asyncio.wait_for(verdict, 1)
    assert rig.events == []


# -- aborts and dialogs -----------------------------------------------------------------------

async def test_abort_is_sent_without_waiting_and_the_partial_answer_marked(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    await rig.ready()
    await rig.turn("s1")
    await asyncio.wait_for(rig.driver.abort("s1"), 1)  # pi answers only once the run ended
    abort = await rig.pipe.next()
    assert abort["type"] == "abort"
    await rig.driver.abort("s2")  # not the running turn: nothing is sent
    assert rig.pipe.pending() == 0
    with caplog.at_level(logging.WARNING):
        await rig.feed(end(assistant("half an ans", "aborted", "Request was aborted")),
                       {"id": abort["id"], "type": "response", "command": "abort",
                        "success": True})
    assert rig.events == [Reply.of("s1", "half an ans\n\n_(stopped)_", stopped=True)]
    assert "no request of ours" not in caplog.text
    await rig.turn("s1", switch=False)
    await rig.feed(end(assistant("", "aborted", "Request was aborted")))
    assert rig.events[-1] == Reply.of("s1", "_(stopped)_", stopped=True)


async def test_an_abort_while_the_agent_waits_to_retry_is_a_stop(rig: Rig) -> None:
    await rig.ready()
    await rig.turn("s1")
    await rig.feed(end(assistant("", "error", "500 boom")),
                   {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3,
                    "delayMs": 20000, "errorMessage": "500 boom"})
    await rig.driver.abort("s1")
    assert (await rig.pipe.next())["type"] == "abort"
    await rig.feed({"type": "auto_retry_end", "success": False, "attempt": 1,
                    "finalError": "Retry cancelled"})
    # Compared under a name of its own: mypy would keep `rig.events[-1]` narrowed to Reply
    # past the next turn, whose last event is another.
    stopped = rig.events[-1]
    assert stopped == Reply.of("s1", "_(stopped)_", stopped=True)
    # The next turn's give-up is the model's failure again, not a stop.
    await rig.turn("s1", switch=False)
    await rig.feed({"type": "auto_retry_end", "success": False, "attempt": 3,
                    "finalError": "500 boom"})
    assert rig.events[-1] == Failure("s1", "500 boom", "retry_failed")


@pytest.mark.parametrize("method", ["confirm", "select", "input", "editor"])
async def test_a_turns_dialogs_go_to_the_person_and_their_answer_back(rig: Rig,
                                                                     method: str) -> None:
    await rig.ready()
    await rig.turn("s1")
    await rig.feed({"type": "extension_ui_request", "id": "ui-7", "method": method,
                    "title": "Allow?", "options": ["Allow", "Block"], "timeout": 30000})
    [asked] = [e for e in rig.events if isinstance(e, DialogRequest)]
    assert asked == DialogRequest("s1", "ui-7", DialogKind(method), "Allow?", "",
                                  ("Allow", "Block"), "", 30.0)
    assert rig.pipe.pending() == 0  # nothing answered yet: the person is asked
    await rig.driver.answer_dialog("ui-7", DialogAnswer(confirmed=True) if method == "confirm"
                                   else DialogAnswer(value="Block"))
    expected = {"confirmed": True} if method == "confirm" else {"value": "Block"}
    assert await rig.pipe.next() == {"type": "extension_ui_response", "id": "ui-7", **expected}
    await rig.driver.answer_dialog("ui-7", DialogAnswer(cancelled=True))
    assert await rig.pipe.next() == {"type": "extension_ui_response", "id": "ui-7",
                                     "cancelled": True}


async def test_a_dialog_outside_any_turn_is_answered_cancelled_at_once(rig: Rig) -> None:
    await rig.ready()
    await rig.feed({"type": "extension_ui_request", "id": "ui-8", "method": "confirm",
                    "title": "Allow?"})
    assert await rig.pipe.next() == {"type": "extension_ui_response", "id": "ui-8",
                                     "cancelled": True}


async def test_terminal_ui_requests_need_no_answer(rig: Rig) -> None:
    await rig.ready()
    for method in ("setStatus", "setWidget", "setTitle", "set_editor_text", "notify"):
        await rig.feed({"type": "extension_ui_request", "id": f"ui-{method}",
                        "method": method, "message": "idle"})
    assert rig.pipe.pending() == 0 and rig.events == []
