#!/usr/bin/env python3
"""A scriptable stand-in for ``picobot agent --json`` (stdlib only).

Speaks the NDJSON channel protocol on stdin/stdout so the bridge can be tested against
crashes, hangs, junk output, huge lines and odd Unicode without a real model.

Run: ``python fake_picobot.py --state DIR [flags]``.  Flags: ``--no-ready``,
``--crash-on-start``, ``--ready-once``, ``--ready-delay=SECONDS``,
``--ignore-pings-while-busy``, ``--instant``, ``--journal``, ``--startup-stderr``,
``--progress-session``, ``--name=NAME`` (answers begin with ``[NAME]``, for tests of several
named agents), ``--deaf`` (ready, then never reads stdin: the bridge's writes fill its pipe),
``--delta-chars=N`` (stream every answer as text_deltas of N characters, many per write, as a
fast model does; by default an answer streams in three deltas).

Directives are whole words in a message's (attachment-expanded) content: ``#crash``,
``#crash-once``, ``#hang``, ``#hang-once``, ``#hang-after`` (answer once, then stop answering
anything), ``#slow=N``, ``#slow-once=N``, ``#hold=NAME`` (busy until the file
``DIR/release/NAME`` exists: a test keeps the turn for as long as it needs, not for a guessed
number of seconds), ``#garbage``,
``#huge=N``, ``#unicode``, ``#double``, ``#later=N``, ``#stderr``, ``#error``, ``#tool``,
``#lone-surrogate`` (the answer carries a lone UTF-16 surrogate as a JSON escape),
``#reply=NAME`` (the response's ``content`` and ``attachments`` come from
``DIR/replies/NAME.json``; the files its ``delete_after`` lists are deleted as soon as the next
message arrives, as an agent that cleans up its temp files does: the first moment the bridge
could have let it).
Hostile output: ``#nested=N`` (a line of N nested arrays first), ``#bad-utf8`` (invalid UTF-8
inside the answer), ``#content-null`` / ``#content-object`` / ``#content-missing``,
``#orphan-exit`` (once: start a grandchild in a session of its own that keeps our pipes open,
then exit 3), ``#crash-after=N`` (once: exit 3 after N seconds of work).
``#crash``/``#hang`` act as soon as the line is read (even behind a busy turn); the others act
when the message's turn comes (messages are worked one at a time, in arrival order).

State under DIR: ``sessions.json`` (user contents per session), ``seen.json`` (contents that
already fired a ``-once`` directive) and ``journal.ndjson`` (one line per received record and
per start/exit/SIGTERM, written before the record is acted on, and an ``answer`` event just
before a message's response or error record is written: agents sharing DIR append to one
file, so the order of receipts and answers across them can be read from it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

RECALL_PHRASE = "what did i just say"
UNICODE_SUFFIX = " \u2028 \u2029 \U0001f600 \r mid"
# Every kind of line a careless agent (or a library printing to stdout) might emit.
GARBAGE_LINES: tuple[bytes, ...] = (
    b"plain text that is not json\n",
    b'{"type": "resp\n',
    b"\xff\xfe\x80 not utf-8 \xc3\x28\n",
    b'["a", "json", "array"]\n',
    b"\n",
)

# Directive names may contain '-', so '#crash' must not match inside '#crash-once'.
_BEFORE = r"(?<![\w#-])"
_AFTER = r"(?![\w=-])"
_NUM = r"(\d+(?:\.\d+)?)(?![\w.])"


def has_flag(content: str, name: str) -> bool:
    return re.search(_BEFORE + re.escape("#" + name) + _AFTER, content) is not None


def number_arg(content: str, name: str) -> float | None:
    match = re.search(_BEFORE + re.escape("#" + name) + "=" + _NUM, content)
    return float(match.group(1)) if match else None


def load_json(path: Path, default: Any) -> Any:
    # Corrupt or missing state must never stop the fake from starting.
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


def save_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    # "replace": a lone surrogate from the wire must not make state unwritable.
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8", errors="replace")
    os.replace(tmp, path)


def message_content(record: dict[str, Any]) -> str:
    """The content the agent sees: attachment blocks first, then the text."""
    raw = record.get("content")
    content = raw if isinstance(raw, str) else str(raw or "")
    attachments = record.get("attachments")
    if not isinstance(attachments, list):
        return content
    blocks = [
        f"[Attachment: {a.get('name', '')}]\n{a.get('content', '')}\n[/Attachment]\n\n"
        for a in attachments
        if isinstance(a, dict)
    ]
    return "".join(blocks) + content


def chunks(text: str, parts: int = 3) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class FakeAgent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.state = Path(args.state)
        self.state.mkdir(parents=True, exist_ok=True)
        self.journal_on = args.journal or not args.instant
        self.out_lock = threading.Lock()
        self.journal_lock = threading.Lock()
        self.busy_lock = threading.Lock()
        self.seen_lock = threading.Lock()
        self.busy = 0  # messages received but not yet fully answered
        self.hung = threading.Event()
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.auto_sessions = 0
        self.doomed: list[str] = []  # files to delete when the next message arrives
        self.sessions: dict[str, list[str]] = load_json(self.state / "sessions.json", {})
        self.seen: list[str] = load_json(self.state / "seen.json", [])
        if not isinstance(self.sessions, dict):
            self.sessions = {}
        if not isinstance(self.seen, list):
            self.seen = []

    # -- output -------------------------------------------------------------------------------

    def emit_bytes(self, data: bytes) -> None:
        if self.hung.is_set():
            return
        with self.out_lock:
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except (OSError, ValueError):
                # The reader went away; keep running until stdin tells us to stop.
                pass

    def emit(self, record: dict[str, Any], end: bytes = b"\n") -> None:
        text = json.dumps(record, ensure_ascii=False)
        self.emit_bytes(text.encode("utf-8", errors="replace") + end)

    def progress(self, session: str, **fields: Any) -> None:
        if self.args.instant:
            return
        record: dict[str, Any] = {"type": "progress", **fields}
        if self.args.progress_session:
            record["session"] = session
        self.emit(record)

    def stream_deltas(self, session: str, text: str, size: int) -> None:
        """`text` as text_deltas of `size` characters. One write per ~64 KiB of records: a
        write per record would make the fake, not the bridge, what a benchmark measures."""
        if self.args.instant:
            return
        batch: list[bytes] = []
        length = 0
        for i in range(0, len(text), size):
            record: dict[str, Any] = {"type": "progress", "event": "text_delta",
                                      "text": text[i : i + size]}
            if self.args.progress_session:
                record["session"] = session
            line = json.dumps(record, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
            batch.append(line)
            length += len(line)
            if length >= 1 << 16:
                self.emit_bytes(b"".join(batch))
                batch, length = [], 0
        if batch:
            self.emit_bytes(b"".join(batch))

    def journal(self, entry: dict[str, Any]) -> None:
        if not self.journal_on:
            return
        entry = {"t": time.time(), "pid": os.getpid(), **entry}
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self.journal_lock:
            try:
                path = self.state / "journal.ndjson"
                with open(path, "a", encoding="utf-8", errors="replace") as fh:
                    fh.write(line)
                    fh.flush()
            except OSError:
                pass

    def count_starts(self) -> int:
        path = self.state / "journal.ndjson"
        if not path.exists():
            return 0
        return path.read_bytes().count(b'"event": "start"')

    def exit(self, code: int, reason: str) -> None:
        self.journal({"event": "exit", "code": code, "reason": reason})
        # Don't cut a line that another thread is halfway through, but don't wait forever.
        acquired = self.out_lock.acquire(timeout=2)
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.buffer.flush()
        if acquired:
            self.out_lock.release()
        os._exit(code)

    def terminated(self) -> None:
        """SIGTERM: noted in the journal, then the default action (death by the signal)."""
        # Not through journal(): the interrupted thread may hold its lock. One O_APPEND write.
        if self.journal_on:
            entry = {"t": time.time(), "pid": os.getpid(), "event": "signal", "signal": "SIGTERM"}
            with contextlib.suppress(OSError):
                fd = os.open(self.state / "journal.ndjson", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                os.write(fd, (json.dumps(entry) + "\n").encode())
                os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    # -- state --------------------------------------------------------------------------------

    def scripted_reply(self, content: str) -> dict[str, Any]:
        match = re.search(_BEFORE + r"#reply=([\w.-]+)", content)
        if match is None:
            return {}
        script = load_json(self.state / "replies" / f"{match.group(1)}.json", {})
        return script if isinstance(script, dict) else {}

    def first_time(self, directive: str, content: str) -> bool:
        key = f"{directive}\x00{content}"
        with self.seen_lock:
            # Agents of a pool share DIR: what another one has seen counts too.
            on_disk = load_json(self.state / "seen.json", [])
            if isinstance(on_disk, list):
                self.seen.extend(k for k in on_disk if k not in self.seen)
            if key in self.seen:
                return False
            self.seen.append(key)
            # Written before acting, so a crash/hang caused by this content is remembered.
            save_json(self.state / "seen.json", self.seen)
            return True

    def remember(self, session: str, content: str) -> None:
        self.sessions.setdefault(session, []).append(content)
        if not self.args.instant:
            save_json(self.state / "sessions.json", self.sessions)

    # -- input --------------------------------------------------------------------------------

    def read_loop(self) -> None:
        fd = sys.stdin.buffer.fileno()
        buf = bytearray()  # amortised appends; bytes += would copy a long line per chunk
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            if b"\n" not in chunk:
                continue  # re-splitting a multi-MiB partial line per chunk would be quadratic
            # Split on b"\n" only: U+2028 inside a JSON string is not a line break.
            *lines, rest = buf.split(b"\n")
            buf = bytearray(rest)
            for line in lines:
                self.safe_handle(bytes(line))
        self.safe_handle(bytes(buf))
        if self.hung.is_set():
            threading.Event().wait()
        self.exit(0, "eof")

    def safe_handle(self, line: bytes) -> None:
        try:
            self.handle_line(line[:-1] if line.endswith(b"\r") else line)
        except Exception as exc:  # bad input must never kill the reader
            self.journal({"event": "reader_exception", "error": repr(exc)})

    def handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            record: Any = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            self.journal({"record": {"raw": repr(line[:2000])}})
            self.emit({"type": "error", "message": "Invalid JSON", "code": "parse_error"})
            return
        self.journal({"record": record})
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "ping":
            ignore = self.args.ignore_pings_while_busy and self.busy > 0
            if not ignore:
                self.emit({"type": "pong"})
        elif kind == "shutdown":
            if self.hung.is_set():
                return  # a hung agent hears nothing; the bridge must kill it
            self.exit(0, "shutdown")
        elif kind == "message":
            while self.doomed:
                Path(self.doomed.pop()).unlink(missing_ok=True)
            if self.hung.is_set():
                return
            # Crash and hang act on receipt, so "send #hang, then ping" is deterministic.
            content = message_content(record)
            if has_flag(content, "crash") or (
                has_flag(content, "crash-once") and self.first_time("crash-once", content)
            ):
                self.exit(3, "crash directive")
            if has_flag(content, "hang") or (
                has_flag(content, "hang-once") and self.first_time("hang-once", content)
            ):
                self.journal({"event": "hang"})
                self.hung.set()
                return
            with self.busy_lock:
                self.busy += 1
            record["_busy"] = True
            self.inbox.put(record)
        else:
            if isinstance(record, dict):
                shown = kind if isinstance(kind, str) else json.dumps(kind, ensure_ascii=False)
            else:
                shown = type(record).__name__  # e.g. a bare array or number
            self.emit(
                {
                    "type": "error",
                    "message": f"Unknown message type: {shown}",
                    "code": "unknown_type",
                }
            )

    # -- hostile output -----------------------------------------------------------------------

    def hostile(self, content: str, session: str) -> bool:
        """Misbehave as asked; True when the turn has been answered (or will never be)."""
        nested = number_arg(content, "nested")
        if nested is not None:
            depth = int(nested)
            self.emit_bytes(b"[" * depth + b"]" * depth + b"\n")
        crash_after = number_arg(content, "crash-after")
        if crash_after is not None and self.first_time("crash-after", content):
            time.sleep(crash_after)
            self.exit(3, "crash-after directive")
        if has_flag(content, "orphan-exit") and self.first_time("orphan-exit", content):
            orphan = subprocess.Popen(["sleep", "600"], stdout=sys.stdout, stderr=sys.stderr,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
            self.journal({"event": "orphan", "orphan_pid": orphan.pid})
            self.exit(3, "orphan-exit directive")
        if has_flag(content, "bad-utf8"):
            head = json.dumps({"type": "response", "session": session})[:-1]
            self.emit_bytes(head.encode() + b', "content": "caf\xe9 \xff ok: ' +
                            content.encode() + b'"}\n')
            return True
        for kind, value in (("null", None), ("object", {"a": 1}), ("missing", ...)):
            if has_flag(content, f"content-{kind}"):
                record: dict[str, Any] = {"type": "response", "session": session}
                if value is not ...:
                    record["content"] = value
                self.emit(record)
                return True
        return False

    # -- work ---------------------------------------------------------------------------------

    def work_loop(self) -> None:
        while True:
            record = self.inbox.get()
            if self.hung.is_set():
                threading.Event().wait()
            try:
                self.process(record)
            except Exception as exc:  # the fake must survive its own bugs like picobot does
                self.journal({"event": "agent_exception", "error": repr(exc)})
                self.emit({"type": "error", "message": str(exc), "code": "agent_error"})
            finally:
                self.not_busy(record)

    def not_busy(self, record: dict[str, Any]) -> None:
        """The message counts as answered once, as soon as its answer is about to leave: a
        ping read right after the answer is then never taken for one sent while busy."""
        if record.pop("_busy", None):
            with self.busy_lock:
                self.busy -= 1

    def process(self, record: dict[str, Any]) -> None:
        content = message_content(record)
        given = record.get("session")
        if isinstance(given, str) and given:
            session = f"json:{given}"
        else:
            self.auto_sessions += 1
            session = f"json:auto-{os.getpid()}-{self.auto_sessions}"
        key = session.removeprefix("json:")

        if has_flag(content, "stderr"):
            noise = "stderr noise " + "n" * 400
            for i in range(200):
                sys.stderr.write(f"{i:03d} {noise}\n")
            sys.stderr.flush()

        self.progress(session, event="reasoning_delta", text="thinking...")
        delay = number_arg(content, "slow")
        once_delay = number_arg(content, "slow-once")
        if once_delay is not None and self.first_time("slow-once", content):
            delay = max(delay or 0.0, once_delay)
        if delay:
            time.sleep(delay)
        held = re.search(_BEFORE + r"#hold=([\w.-]+)", content)
        while held and not (self.state / "release" / held.group(1)).exists():
            time.sleep(0.05)  # the test's file, in another process: nothing to await

        if has_flag(content, "error"):
            self.journal({"event": "answer", "session": key})
            self.emit({"type": "error", "message": "agent exploded", "code": "agent_error"})
            return
        if self.hostile(content, session):
            return

        if has_flag(content, "tool"):
            call = {"id": "1", "name": "list_dir"}
            self.progress(session, event="tool_call_start", **call, arguments={"path": "/"})
            self.progress(session, event="tool_call_done", **call, result="bin etc")

        history = self.sessions.get(key, [])
        huge = number_arg(content, "huge")
        if RECALL_PHRASE in content.lower():
            reply = f"You said: {history[-1]}" if history else "You have not said anything yet."
            reply = f"[{self.args.name}] {reply}" if self.args.name else reply
        elif huge is not None:
            size = int(huge)
            body = "x" * max(0, size - len("HUGE:") - len(":END"))
            reply = f"HUGE:{body}:END" if size >= 9 else "x" * size
        else:
            reply = f"echo: {content}"
            reply = f"[{self.args.name}] {reply}" if self.args.name else reply
        unicode_mode = has_flag(content, "unicode")
        if unicode_mode:
            reply += UNICODE_SUFFIX
        # Memory goes to disk before the reply leaves, so a kill right after it loses nothing.
        self.remember(key, content)

        if self.args.delta_chars > 0:
            self.stream_deltas(session, reply, self.args.delta_chars)
        else:
            for piece in chunks(reply):
                self.progress(session, event="text_delta", text=piece)
        if has_flag(content, "garbage"):
            for junk in GARBAGE_LINES:
                self.emit_bytes(junk)
        response: dict[str, Any] = {"type": "response", "content": reply, "session": session}
        scripted = self.scripted_reply(content)
        hold = scripted.get("hold_until")
        while isinstance(hold, str) and not Path(hold).exists():
            time.sleep(0.05)
        response.update({k: v for k, v in scripted.items() if k in ("content", "attachments")})
        self.journal({"event": "answer", "session": key})
        self.not_busy(record)
        if has_flag(content, "lone-surrogate"):
            # Valid JSON, but it decodes to a str no UTF-8 encoder accepts.
            response["content"] = reply + " broken \ud800 half"
            self.emit_bytes(json.dumps(response, ensure_ascii=True).encode() + b"\n")
        elif has_flag(content, "double"):
            # Both in one write: a second answer that arrived after the chat's next message
            # was sent could not be told from that message's answer (the protocol names only
            # the session), so the test keeps to the case that can be decided.
            second = {"type": "response", "content": f"second answer: {content}",
                      "session": session}
            self.emit_bytes((json.dumps(response) + "\n" + json.dumps(second) + "\n").encode())
        else:
            self.emit(response, end=b"\r\n" if unicode_mode else b"\n")
        self.doomed.extend(str(p) for p in scripted.get("delete_after", []))
        if has_flag(content, "hang-after") and self.first_time("hang-after", content):
            # Wedged while idle: the turn is answered, then nothing (pings included) is.
            self.journal({"event": "hang"})
            self.hung.set()
        later = number_arg(content, "later")
        if later is not None:
            unsolicited = {"type": "response", "content": f"later: {content}", "session": session}
            timer = threading.Timer(later, self.emit, args=(unsolicited,))
            timer.daemon = True
            timer.start()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fake picobot JSON channel agent")
    parser.add_argument("--state", required=True, help="directory for memory and journal")
    parser.add_argument("--no-ready", action="store_true", help="never print the ready record")
    parser.add_argument("--ready-once", action="store_true",
                        help="print ready on the first start only (a restart never gets ready)")
    parser.add_argument("--crash-on-start", action="store_true", help="exit 4 before ready")
    parser.add_argument("--start-when", metavar="PATH",
                        help="exit 4 before ready while PATH does not exist")
    parser.add_argument("--ready-delay", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--ignore-pings-while-busy", action="store_true")
    parser.add_argument("--instant", action="store_true", help="no progress, no journal")
    parser.add_argument("--journal", action="store_true", help="keep the journal in --instant")
    parser.add_argument("--startup-stderr", action="store_true")
    parser.add_argument("--progress-session", action="store_true")
    parser.add_argument("--deaf", action="store_true",
                        help="after ready, never read stdin (the bridge's writes fill the pipe)")
    parser.add_argument("--name", default="", help="say who answers: '[NAME] echo: ...'")
    parser.add_argument("--delta-chars", type=int, default=0, metavar="N",
                        help="stream answers as text_deltas of N characters (0: three deltas)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    agent = FakeAgent(args)
    # Which service-manager and bridge variables leaked into our environment, by name only.
    leaked = sorted(k for k in os.environ
                    if k.startswith(("NOTIFY_SOCKET", "WATCHDOG_", "PICOBRIDGE_",
                                     "CREDENTIALS_DIRECTORY")))
    starts_before = agent.count_starts()
    agent.journal({"event": "start", "argv": sys.argv[1:], "env": leaked})
    signal.signal(signal.SIGTERM, lambda *_: agent.terminated())
    if args.startup_stderr:
        for i in range(5):
            sys.stderr.write(f"fake picobot: startup log line {i}\n")
        sys.stderr.flush()
    if args.crash_on_start or (args.start_when and not os.path.exists(args.start_when)):
        agent.exit(4, "crash on start")
    if args.ready_delay > 0:
        time.sleep(args.ready_delay)
    if not args.no_ready and not (args.ready_once and starts_before > 0):
        agent.emit({"type": "ready"})
    if args.deaf:
        agent.journal({"event": "deaf"})
        threading.Event().wait()  # until a signal ends it
    threading.Thread(target=agent.work_loop, name="worker", daemon=True).start()
    agent.read_loop()


if __name__ == "__main__":
    main()
