"""Drives tests/fakes/fake_picobot.py as a real subprocess, the way the bridge will."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "fake_picobot.py"
WAIT = 5.0  # upper bound for anything that should happen "at once"

pytestmark = pytest.mark.timeout(30)


@dataclass
class Line:
    raw: bytes  # without the b"\n", but with any b"\r" the fake put before it
    record: Any  # parsed JSON, or None when the line is not JSON


class Fake:
    """A running fake agent plus a reader that splits stdout on b"\\n" only."""

    def __init__(self, proc: asyncio.subprocess.Process, state: Path) -> None:
        self.proc = proc
        self.state = state
        self.lines: asyncio.Queue[Line | None] = asyncio.Queue()
        self.stderr = bytearray()
        self._tasks = [asyncio.create_task(self._read_stdout()), asyncio.create_task(self._drain())]

    @classmethod
    async def start(cls, state: Path, *flags: str) -> Fake:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(FAKE),
            "--state",
            str(state),
            *flags,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(proc, state)

    async def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        while chunk := await self.proc.stdout.read(1 << 20):
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for raw in complete:
                await self.lines.put(Line(raw, _parse(raw)))
        await self.lines.put(None)

    async def _drain(self) -> None:
        # An undrained stderr pipe would block the fake once 64 KiB are queued.
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(1 << 16):
            self.stderr += chunk

    async def send(self, record: Any) -> None:
        await self.send_raw(json.dumps(record, ensure_ascii=False).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def message(self, content: str, session: str | None = "x", **extra: Any) -> None:
        record: dict[str, Any] = {"type": "message", "content": content, **extra}
        if session is not None:
            record["session"] = session
        await self.send(record)

    async def next_line(self, within: float = WAIT) -> Line:
        line = await asyncio.wait_for(self.lines.get(), within)
        assert line is not None, "fake closed stdout"
        return line

    async def until(self, pred: Callable[[Any], bool], within: float = WAIT) -> list[Line]:
        """Lines up to and including the first whose record satisfies ``pred``."""
        seen: list[Line] = []
        async with asyncio.timeout(within):
            while True:
                line = await self.next_line(within)
                seen.append(line)
                if line.record is not None and pred(line.record):
                    return seen

    async def response(self, within: float = WAIT) -> dict[str, Any]:
        lines = await self.until(lambda r: _kind(r) == "response", within)
        record: dict[str, Any] = lines[-1].record
        return record

    async def ready(self) -> None:
        assert (await self.next_line()).record == {"type": "ready"}

    async def wait(self, within: float = WAIT) -> int:
        return await asyncio.wait_for(self.proc.wait(), within)

    def journal(self) -> list[dict[str, Any]]:
        path = self.state / "journal.ndjson"
        if not path.exists():
            return []
        return [json.loads(raw) for raw in path.read_bytes().split(b"\n") if raw.strip()]

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _kind(record: Any) -> Any:
    return record.get("type") if isinstance(record, dict) else None


StartFake = Callable[..., Any]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[StartFake]:
    fakes: list[Fake] = []

    async def _start(*flags: str, state: Path = tmp_path / "state") -> Fake:
        fake = await Fake.start(state, *flags)
        fakes.append(fake)
        return fake

    yield _start
    for fake in fakes:
        await fake.close()


async def running(start: StartFake, *flags: str) -> Fake:
    fake: Fake = await start(*flags)
    await fake.ready()
    return fake


# -- protocol basics ----------------------------------------------------------------------------


async def test_ready_ping_and_response(start: StartFake) -> None:
    fake = await running(start)
    await fake.send({"type": "ping"})
    assert (await fake.next_line()).record == {"type": "pong"}

    await fake.message("hello there")
    lines = await fake.until(lambda r: _kind(r) == "response")
    records = [line.record for line in lines]
    assert records[-1] == {"type": "response", "content": "echo: hello there", "session": "json:x"}
    progress = records[:-1]
    assert progress[0] == {"type": "progress", "event": "reasoning_delta", "text": "thinking..."}
    deltas = [r for r in progress if r.get("event") == "text_delta"]
    assert 2 <= len(deltas) <= 3
    assert "".join(d["text"] for d in deltas) == "echo: hello there"
    assert all("session" not in r for r in progress)


async def test_generated_session_when_none_given(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("one", session=None)
    first = await fake.response()
    await fake.message("two", session=None)
    second = await fake.response()
    assert first["session"].startswith("json:auto-")
    assert first["session"] != second["session"]


async def test_progress_session_flag(start: StartFake) -> None:
    fake = await running(start, "--progress-session")
    await fake.message("hi #tool", session="s1")
    lines = await fake.until(lambda r: _kind(r) == "response")
    assert all(line.record["session"] == "json:s1" for line in lines)


async def test_tool_events(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("look around #tool")
    records = [line.record for line in await fake.until(lambda r: _kind(r) == "response")]
    assert {
        "type": "progress",
        "event": "tool_call_start",
        "id": "1",
        "name": "list_dir",
        "arguments": {"path": "/"},
    } in records
    assert {
        "type": "progress",
        "event": "tool_call_done",
        "id": "1",
        "name": "list_dir",
        "result": "bin etc",
    } in records


async def test_memory_survives_restart(start: StartFake, tmp_path: Path) -> None:
    fake = await running(start)
    await fake.message("What did I just say?", session="mem")
    assert (await fake.response())["content"] == "You have not said anything yet."
    await fake.message("the cat is orange", session="mem")
    await fake.response()
    fake.proc.kill()  # no clean shutdown: memory must already be on disk
    await fake.wait()

    fake = await running(start)
    await fake.message("so, WHAT DID I JUST SAY?", session="mem")
    assert (await fake.response())["content"] == "You said: the cat is orange"
    await fake.message("what did i just say", session="other")
    assert (await fake.response())["content"] == "You have not said anything yet."


async def test_attachments_are_prepended_in_order(start: StartFake) -> None:
    fake = await running(start)
    attachments = [{"name": "a.csv", "content": "a,b\n1,2"}, {"name": "b.txt", "content": "B"}]
    await fake.message("Analyze this", attachments=attachments)
    expected = (
        "[Attachment: a.csv]\na,b\n1,2\n[/Attachment]\n\n"
        "[Attachment: b.txt]\nB\n[/Attachment]\n\n"
        "Analyze this"
    )
    assert (await fake.response())["content"] == f"echo: {expected}"


async def test_bad_input_is_reported_and_survived(start: StartFake) -> None:
    fake = await running(start)
    parse_error = {"type": "error", "message": "Invalid JSON", "code": "parse_error"}
    await fake.send_raw(b"this is not json\n")
    assert (await fake.next_line()).record == parse_error
    await fake.send_raw(b'{"type": "mess\n')
    assert (await fake.next_line()).record == parse_error
    await fake.send_raw(b"\xff\xfe not utf-8\n")
    assert (await fake.next_line()).record == parse_error
    await fake.send({"type": "bogus"})
    assert (await fake.next_line()).record == {
        "type": "error",
        "message": "Unknown message type: bogus",
        "code": "unknown_type",
    }
    await fake.send([1, 2, 3])
    assert (await fake.next_line()).record["code"] == "unknown_type"
    await fake.send({"type": "message", "content": {"nested": True}, "attachments": "nope"})
    assert (await fake.response())["session"].startswith("json:")
    await fake.send({"type": "ping"})
    assert (await fake.next_line()).record == {"type": "pong"}


async def test_input_split_on_newline_only(start: StartFake) -> None:
    fake = await running(start)
    # Raw U+2028/U+2029 inside a JSON string, and a CRLF line ending.
    await fake.send_raw('{"type":"message","content":"a\u2028b\u2029c","session":"x"}\r\n'.encode())
    assert (await fake.response())["content"] == "echo: a\u2028b\u2029c"


async def test_messages_answered_in_order(start: StartFake) -> None:
    fake = await running(start)
    for i in range(5):
        await fake.message(f"m{i}")
    answers = [(await fake.response())["content"] for _ in range(5)]
    assert answers == [f"echo: m{i}" for i in range(5)]


async def test_journal_records_every_input(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("first")
    await fake.response()
    await fake.send_raw(b"junk\n")
    await fake.next_line()
    journal = fake.journal()
    assert journal[0]["event"] == "start"
    assert journal[0]["pid"] == fake.proc.pid
    records = [entry["record"] for entry in journal if "record" in entry]
    assert records[0] == {"type": "message", "content": "first", "session": "x"}
    assert "raw" in records[1]


async def test_shutdown_and_eof_exit_zero(start: StartFake, tmp_path: Path) -> None:
    fake = await running(start)
    await fake.send({"type": "shutdown"})
    assert await fake.wait() == 0
    assert fake.journal()[-1]["event"] == "exit"

    fake = await running(start)
    assert fake.proc.stdin is not None
    fake.proc.stdin.close()
    assert await fake.wait() == 0


async def test_shutdown_does_not_wait_for_slow_turn(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("busy #slow=30")
    await fake.until(lambda r: r.get("event") == "reasoning_delta")
    await fake.send({"type": "shutdown"})
    assert await fake.wait() == 0


# -- directives ---------------------------------------------------------------------------------


async def test_crash(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("boom #crash")
    assert await fake.wait() == 3
    fake = await running(start)
    await fake.message("boom #crash")
    assert await fake.wait() == 3


async def test_crash_once_then_answers_after_restart(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("boom #crash-once")
    assert await fake.wait() == 3
    fake = await running(start)
    await fake.message("boom #crash-once")
    assert (await fake.response())["content"] == "echo: boom #crash-once"
    delivered = [e for e in fake.journal() if e.get("record", {}).get("type") == "message"]
    assert len(delivered) == 2


async def test_directive_must_be_whole_word(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("not a directive: #crashing x#crash #crash_x")
    assert (await fake.response())["content"].startswith("echo: ")


async def test_hang_stops_everything(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("freeze #hang")
    await fake.send({"type": "ping"})
    with pytest.raises(TimeoutError):
        await fake.next_line(within=0.5)
    await fake.send({"type": "shutdown"})  # a hung agent must be killed
    with pytest.raises(TimeoutError):
        await fake.wait(within=0.3)
    assert fake.proc.returncode is None


async def test_hang_once_answers_after_restart(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("freeze #hang-once")
    await fake.send({"type": "ping"})
    with pytest.raises(TimeoutError):
        await fake.next_line(within=0.3)
    await fake.close()
    fake = await running(start)
    await fake.message("freeze #hang-once")
    assert (await fake.response())["content"] == "echo: freeze #hang-once"


async def test_slow_still_answers_pings(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("take your time #slow=0.5")
    await fake.until(lambda r: r.get("event") == "reasoning_delta")
    await fake.send({"type": "ping"})
    assert (await fake.until(lambda r: _kind(r) in ("pong", "response")))[-1].record == {
        "type": "pong"
    }
    assert (await fake.response())["content"] == "echo: take your time #slow=0.5"


async def test_slow_once(start: StartFake) -> None:
    # Asserting on "not within 0.3 s" then "within WAIT" stays true on a loaded machine.
    fake = await running(start)
    await fake.message("wait #slow-once=30")
    with pytest.raises(TimeoutError):
        await fake.response(within=0.3)
    await fake.close()
    fake = await running(start)
    await fake.message("wait #slow-once=30")
    assert (await fake.response())["content"] == "echo: wait #slow-once=30"


async def test_hold_keeps_the_turn_until_released(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("wait for me #hold=go")
    await fake.until(lambda r: r.get("event") == "reasoning_delta")
    await fake.send({"type": "ping"})
    assert (await fake.until(lambda r: _kind(r) in ("pong", "response")))[-1].record == {
        "type": "pong"
    }
    with pytest.raises(TimeoutError):
        await fake.response(within=0.3)
    (fake.state / "release").mkdir()
    (fake.state / "release" / "go").touch()
    assert (await fake.response())["content"] == "echo: wait for me #hold=go"


async def test_ignore_pings_while_busy(start: StartFake) -> None:
    fake = await running(start, "--ignore-pings-while-busy")
    await fake.message("take your time #slow=0.6")
    await fake.send({"type": "ping"})
    lines = await fake.until(lambda r: _kind(r) == "response")
    assert all(_kind(line.record) != "pong" for line in lines)
    await fake.send({"type": "ping"})
    assert (await fake.next_line()).record == {"type": "pong"}


async def test_garbage_then_response(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("junk please #garbage")
    lines = await fake.until(lambda r: _kind(r) == "response")
    raws = [line.raw for line in lines]
    assert b"plain text that is not json" in raws
    assert b'{"type": "resp' in raws
    assert b"" in raws
    assert any(line.raw.startswith(b"\xff") for line in lines)
    assert ["a", "json", "array"] in [line.record for line in lines]
    assert lines[-1].record["content"] == "echo: junk please #garbage"


async def test_huge_response_is_one_line(start: StartFake) -> None:
    fake = await running(start)
    size = 5 * 1024 * 1024
    await fake.message(f"big #huge={size}")
    lines = await fake.until(lambda r: _kind(r) == "response", within=15)
    content = lines[-1].record["content"]
    assert len(content) == size
    assert content.startswith("HUGE:")
    assert content.endswith(":END")
    assert len(lines[-1].raw) > size


async def test_unicode_raw_line_separators_and_crlf(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("odd #unicode")
    line = (await fake.until(lambda r: _kind(r) == "response"))[-1]
    assert b"\xe2\x80\xa8" in line.raw  # U+2028 sent raw, not escaped
    assert b"\xe2\x80\xa9" in line.raw
    assert line.raw.endswith(b"\r")  # the line ended with b"\r\n"
    content = line.record["content"]
    assert content == "echo: odd #unicode \u2028 \u2029 \U0001f600 \r mid"


async def test_double_response(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("twice #double")
    first = await fake.response()
    second = await fake.response()
    assert first["content"] == "echo: twice #double"
    assert second == {
        "type": "response",
        "content": "second answer: twice #double",
        "session": "json:x",
    }


async def test_later_unsolicited_response(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("remind me #later=0.2")
    assert (await fake.response())["content"] == "echo: remind me #later=0.2"
    await fake.send({"type": "ping"})
    assert (await fake.next_line()).record == {"type": "pong"}
    assert await fake.response() == {
        "type": "response",
        "content": "later: remind me #later=0.2",
        "session": "json:x",
    }


async def test_error_directive(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("explode #error")
    lines = await fake.until(lambda r: _kind(r) in ("error", "response"))
    assert lines[-1].record == {"type": "error", "message": "agent exploded", "code": "agent_error"}
    await fake.send({"type": "ping"})
    assert (await fake.next_line()).record == {"type": "pong"}


async def test_stderr_noise(start: StartFake) -> None:
    fake = await running(start)
    await fake.message("noisy #stderr")
    await fake.response()
    await fake.send({"type": "shutdown"})
    await fake.wait()
    await fake._tasks[1]  # the drain ends at EOF on stderr
    assert len(fake.stderr) > 64 * 1024
    assert fake.stderr.count(b"\n") >= 200


# -- command-line flags -------------------------------------------------------------------------


async def test_no_ready(start: StartFake) -> None:
    fake: Fake = await start("--no-ready")
    await fake.send({"type": "ping"})
    assert (await fake.next_line()).record == {"type": "pong"}


async def test_crash_on_start(start: StartFake) -> None:
    fake: Fake = await start("--crash-on-start")
    assert await fake.wait() == 4
    assert await fake.lines.get() is None  # nothing at all on stdout


async def test_ready_delay(start: StartFake) -> None:
    fake: Fake = await start("--ready-delay=0.3")
    with pytest.raises(TimeoutError):
        await fake.next_line(within=0.1)
    await fake.ready()


async def test_startup_stderr(start: StartFake) -> None:
    fake: Fake = await start("--startup-stderr")
    await fake.ready()
    await fake.send({"type": "shutdown"})
    await fake.wait()
    await fake._tasks[1]
    assert b"startup" in fake.stderr


async def test_instant_mode(start: StartFake, tmp_path: Path) -> None:
    fake = await running(start, "--instant")
    await fake.message("quick")
    lines = await fake.until(lambda r: _kind(r) == "response")
    assert [line.record for line in lines] == [
        {"type": "response", "content": "echo: quick", "session": "json:x"}
    ]
    await fake.message("what did I just say")
    assert (await fake.response())["content"] == "You said: quick"
    assert not (tmp_path / "state" / "journal.ndjson").exists()


async def test_instant_mode_with_journal(start: StartFake) -> None:
    fake = await running(start, "--instant", "--journal")
    await fake.message("quick")
    await fake.response()
    assert any(e.get("record", {}).get("content") == "quick" for e in fake.journal())


async def test_lone_surrogate_does_not_kill_the_fake(start: StartFake) -> None:
    fake = await running(start)
    await fake.send_raw(b'{"type":"message","content":"bad \\ud800 half","session":"x"}\n')
    assert (await fake.response())["content"] == "echo: bad ? half"
    await fake.send({"type": "ping"})
    assert (await fake.next_line()).record == {"type": "pong"}
