#!/usr/bin/env python3
"""A scriptable stand-in for prime-agent's JSONL/RPC mode, i.e. the pi coding agent's
``pi --mode rpc`` (stdlib only).

It speaks the protocol the way the real program (0.73.1) does, as recorded in
shared/peers/prime-rpc-peer.md: no ready record (an answered ``get_state`` is readiness),
request ids echoed, a response without id for a parse error or an unknown command, the
``prompt`` response before ``agent_start``, the event sequences of a plain turn and of a tool
turn, ``abort`` answered only after the aborted run's ``agent_end``, a second prompt during a
turn refused, ``switch_session`` during a turn tearing the running turn down, and session
files: ``switch_session`` loads the file at the path or starts an empty session that is
written there lazily (header and all entries at the first assistant message, then appended),
a file without a valid header is truncated to a fresh one, and a file whose header names a
working directory that no longer exists is refused with pi's own error.

Run: ``python fake_prime_agent.py --state DIR [flags]``. Flags: ``--instant`` (a turn is only
the prompt response, ``agent_start`` and ``agent_end``; no journal, no session files),
``--journal`` (keep the journal in --instant), ``--crash-on-start``, ``--no-state`` (never
answer get_state), ``--refuse-state`` (answer get_state with success false),
``--startup-ui`` (setTitle/setWidget/setStatus requests at start, as extensions print),
``--confirm-switch`` (an extension asks a confirm dialog before every switch_session and
cancels the switch unless confirmed), ``--ack-delay=SECONDS`` (responses to switch_session and
prompt come that late, so get_state responses overtake them).

What it answers (the last user message decides, as the fake LLM does for the real pi):
"What did I just say?" -> "You said: <the user message before>" (from the session, so it
shows what the session file holds), "RUN <command>" -> a bash tool call (run for real, in a
session of its own as pi does) then "ran: <output>", anything else -> "you said: <text>".

Directives are whole words in the prompt text: ``#crash``, ``#crash-once`` (exit 3 on
receipt), ``#hang``, ``#hang-once`` (from receipt on, nothing is answered or emitted),
``#slow=N`` (stream "Working on it… ", then wait N seconds, abortable), ``#stall`` (the same,
until aborted), ``#deaf-abort-once`` (a stall that ignores abort and never answers it, the
first time), ``#refuse`` (the prompt is answered success false), ``#no-id`` (id-less parse
error and unknown command responses before the prompt's), ``#error`` (the run ends with
stopReason "error" and no retry), ``#retry`` (an error run, ``auto_retry_start``, the retried
run, ``auto_retry_end``: agent_end comes twice), ``#retry-fail`` (every attempt fails, then
``auto_retry_end`` success false), ``#error-crash-once`` (an error agent_end, then exit 3),
``#ui=METHOD`` (an extension_ui_request: confirm, select, input, editor wait for the
extension_ui_response and the answer names it; notify does not wait), ``#unicode`` (U+2028,
U+2029 and an emoji in the answer), ``#huge=N`` (an answer of N characters, streamed with the
whole message on every update as pi does), ``#thinking``, ``#compact`` (compaction events),
``#mute-after`` (answer, then never answer get_state again).

State under DIR: ``journal.ndjson`` (one line per received record and per start/exit, written
before the record is acted on), ``seen.json`` (contents that already fired a ``-once``
directive), ``sessions/`` (the default session's directory).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

JSON = dict[str, Any]
RECALL_PHRASE = "what did i just say"
UNICODE_SUFFIX = " \u2028 \u2029 \U0001f600 mid"
PARTIAL = "Working on it… "
BUSY_ERROR = ("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') "
              "to queue the message.")
DIALOGS = frozenset({"confirm", "select", "input", "editor"})

_BEFORE = r"(?<![\w#-])"
_AFTER = r"(?![\w=-])"
_NUM = r"(\d+(?:\.\d+)?)(?![\w.])"


def has_flag(content: str, name: str) -> bool:
    return re.search(_BEFORE + re.escape("#" + name) + _AFTER, content) is not None


def number_arg(content: str, name: str) -> float | None:
    match = re.search(_BEFORE + re.escape("#" + name) + "=" + _NUM, content)
    return float(match.group(1)) if match else None


def word_arg(content: str, name: str) -> str | None:
    match = re.search(_BEFORE + re.escape("#" + name) + r"=([A-Za-z_]+)", content)
    return match.group(1) if match else None


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def now_ms() -> int:
    return int(time.time() * 1000)


def compact(record: JSON) -> str:
    """JSON as JavaScript's JSON.stringify writes it (U+2028 stays as it is)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def text_of(message: JSON) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and p.get("type") == "text")
    return ""


def assistant(content: list[JSON], stop: str = "stop", error: str | None = None) -> JSON:
    message: JSON = {"role": "assistant", "content": content, "api": "openai-completions",
                     "provider": "fakellm", "model": "fake-model",
                     "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                               "totalTokens": 15, "cost": {"input": 0, "output": 0,
                                                           "cacheRead": 0, "cacheWrite": 0,
                                                           "total": 0}},
                     "stopReason": stop, "timestamp": now_ms()}
    if error is not None:
        message["errorMessage"] = error
    return message


class SessionFile:
    """One session as pi keeps it: a header and message entries, written lazily."""

    def __init__(self, path: Path, cwd: str, persist: bool) -> None:
        self.path = path
        self.cwd = cwd
        self.persist = persist
        self.id = str(uuid.uuid4())
        self.header: JSON = {"type": "session", "version": 3, "id": self.id,
                             "timestamp": now_iso(), "cwd": cwd}
        self.entries: list[JSON] = []
        self.flushed = False

    @classmethod
    def open(cls, path: Path, process_cwd: str, persist: bool) -> SessionFile:
        """pi's SessionManager.open: load the file, or an empty session to be written there."""
        lines: list[JSON] = []
        if path.exists():
            for raw in path.read_bytes().split(b"\n"):
                with contextlib.suppress(ValueError):
                    entry = json.loads(raw)
                    if isinstance(entry, dict):
                        lines.append(entry)
        header = next((e for e in lines if e.get("type") == "session"), None)
        cwd = header.get("cwd") if header is not None else None
        session = cls(path, cwd if isinstance(cwd, str) else process_cwd, persist)
        if header is None:
            if path.exists() and persist:
                # No valid header: pi truncates it to a fresh one, silently.
                path.write_text(compact(session.header) + "\n", encoding="utf-8")
                session.flushed = True
            return session
        session.header = header
        session.id = str(header.get("id", session.id))
        session.entries = [e for e in lines if e.get("type") != "session"]
        session.flushed = True
        return session

    @property
    def messages(self) -> list[JSON]:
        return [e["message"] for e in self.entries
                if e.get("type") == "message" and isinstance(e.get("message"), dict)]

    def append(self, message: JSON) -> None:
        parent = self.entries[-1]["id"] if self.entries else None
        entry = {"type": "message", "id": secrets.token_hex(4), "parentId": parent,
                 "timestamp": now_iso(), "message": message}
        self.entries.append(entry)
        if not self.persist:
            return
        if not any(m.get("role") == "assistant" for m in self.messages):
            self.flushed = False
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            if not self.flushed:
                for line in (self.header, *self.entries):
                    fh.write(compact(line) + "\n")
                self.flushed = True
            else:
                fh.write(compact(entry) + "\n")


class Turn:
    """One prompt being answered."""

    def __init__(self, session: SessionFile) -> None:
        self.session = session
        self.aborted = threading.Event()
        self.torn = False  # switch_session during the turn: it never ends
        self.deaf = False  # ignores abort
        self.done = threading.Event()


class FakePrimeAgent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.state = Path(args.state)
        self.state.mkdir(parents=True, exist_ok=True)
        self.journal_on = args.journal or not args.instant
        self.out_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.hung = threading.Event()
        self.muted = False
        self.cwd = os.getcwd()
        self.session = SessionFile(self.default_path(), self.cwd, not args.instant)
        self.turn: Turn | None = None
        self.delayed = 0  # responses held back by --ack-delay
        self.dialogs: dict[str, tuple[threading.Event, list[JSON]]] = {}

    def default_path(self) -> Path:
        stamp = now_iso().replace(":", "-").replace(".", "-")
        return self.state / "sessions" / f"{stamp}_{uuid.uuid4()}.jsonl"

    # -- output and journal -------------------------------------------------------------------

    def emit(self, record: JSON) -> None:
        if self.hung.is_set():
            return
        data = compact(record).encode("utf-8", "replace") + b"\n"
        with self.out_lock:
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except (OSError, ValueError):
                pass

    def respond(self, request: JSON, data: Any = None, error: str | None = None,
                echo_id: bool = True) -> None:
        record: JSON = {}
        if echo_id and "id" in request:
            record["id"] = request["id"]
        record.update(type="response", command=request.get("type"), success=error is None)
        if error is not None:
            record["error"] = error
        elif data is not None:
            record["data"] = data
        self.emit(record)

    def journal(self, entry: JSON) -> None:
        if not self.journal_on:
            return
        line = json.dumps({"t": time.time(), "pid": os.getpid(), **entry},
                          ensure_ascii=False) + "\n"
        with self.state_lock, contextlib.suppress(OSError), \
                open(self.state / "journal.ndjson", "a", encoding="utf-8",
                     errors="replace") as fh:
            fh.write(line)

    def exit(self, code: int, reason: str) -> None:
        self.journal({"event": "exit", "code": code, "reason": reason})
        acquired = self.out_lock.acquire(timeout=2)
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.buffer.flush()
        if acquired:
            self.out_lock.release()
        os._exit(code)

    def first_time(self, directive: str, content: str) -> bool:
        key = f"{directive}\x00{content}"
        path = self.state / "seen.json"
        with self.state_lock:
            try:
                seen = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                seen = []
            if key in seen:
                return False
            seen.append(key)
            path.write_text(json.dumps(seen), encoding="utf-8")
            return True

    # -- input --------------------------------------------------------------------------------

    def read_loop(self) -> None:
        fd = sys.stdin.buffer.fileno()
        buf = bytearray()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            if b"\n" not in chunk:
                continue
            # LF only: U+2028 inside a JSON string is not a line break.
            *lines, rest = buf.split(b"\n")
            buf = bytearray(rest)
            for line in lines:
                self.safe_handle(bytes(line))
        if buf:
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
        try:
            record: Any = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            self.journal({"record": {"raw": repr(line[:2000])}})
            self.emit({"type": "response", "command": "parse", "success": False,
                       "error": f"Failed to parse command: {exc}"})
            return
        self.journal({"record": record})
        if self.hung.is_set() or not isinstance(record, dict):
            return
        kind = record.get("type")
        if kind == "extension_ui_response":
            waiting = self.dialogs.pop(str(record.get("id")), None)
            if waiting is not None:
                waiting[1].append(record)
                waiting[0].set()
            return
        handler = getattr(self, f"on_{kind}", None) if isinstance(kind, str) else None
        if handler is None:
            self.respond(record, error=f"Unknown command: {kind}", echo_id=False)
            return
        handler(record)

    # -- commands -----------------------------------------------------------------------------

    def on_get_state(self, request: JSON) -> None:
        if self.args.no_state or self.muted:
            return
        if self.args.refuse_state:
            self.respond(request, error="Cannot read the agent state")
            return
        if self.delayed:
            self.journal({"event": "overtook", "id": request.get("id")})
        turn = self.turn
        self.respond(request, {
            "model": {"id": "fake-model", "name": "Fake Model", "api": "openai-completions",
                      "provider": "fakellm", "reasoning": False, "input": ["text", "image"],
                      "contextWindow": 128000, "maxTokens": 4096},
            "thinkingLevel": "off", "isStreaming": turn is not None, "isCompacting": False,
            "steeringMode": "one-at-a-time", "followUpMode": "one-at-a-time",
            "sessionFile": str(self.session.path), "sessionId": self.session.id,
            "autoCompactionEnabled": True, "messageCount": len(self.session.messages),
            "pendingMessageCount": 0})

    def on_get_messages(self, request: JSON) -> None:
        self.respond(request, {"messages": self.session.messages})

    def on_switch_session(self, request: JSON) -> None:
        if self.args.ack_delay or self.args.confirm_switch:
            threading.Thread(target=self.switch, args=(request,), daemon=True).start()
        else:
            self.switch(request)

    def hold_back(self) -> None:
        """--ack-delay: what the agent answers next waits, while other requests are answered."""
        if self.args.ack_delay:
            with self.state_lock:
                self.delayed += 1
            time.sleep(self.args.ack_delay)
            with self.state_lock:
                self.delayed -= 1

    def switch(self, request: JSON) -> None:
        self.hold_back()
        if self.args.confirm_switch and not self.ask("confirm", {
                "title": "Switch session?", "message": "The current session will be left."
        }).get("confirmed"):
            self.respond(request, {"cancelled": True})
            return
        raw = request.get("sessionPath")
        path = Path(self.cwd, raw) if isinstance(raw, str) else None
        if path is None:
            self.respond(request, error="sessionPath is required")
            return
        opened = SessionFile.open(path, os.getcwd(), not self.args.instant)
        if not os.path.exists(opened.cwd):
            # pi's MissingSessionCwdError, word for word.
            self.respond(request, error=(
                f"Stored session working directory does not exist: {opened.cwd}\n"
                f"Session file: {path}\nCurrent working directory: {self.cwd}"))
            return
        turn = self.turn
        if turn is not None:
            turn.torn = True  # the running turn is torn down: it never ends
            self.turn = None
        self.session = opened
        self.cwd = opened.cwd
        self.respond(request, {"cancelled": False})

    def on_new_session(self, request: JSON) -> None:
        self.session = SessionFile(self.session.path.parent / self.default_path().name,
                                   self.cwd, not self.args.instant)
        self.respond(request, {"cancelled": False})

    def on_abort(self, request: JSON) -> None:
        turn = self.turn
        if turn is None:
            self.respond(request)
            return
        if turn.deaf:
            return  # a tool that ignores the signal: abort never returns

        def answer_when_ended() -> None:
            turn.done.wait()
            self.respond(request)

        turn.aborted.set()
        threading.Thread(target=answer_when_ended, daemon=True).start()

    def on_prompt(self, request: JSON) -> None:
        text = request.get("message")
        text = text if isinstance(text, str) else ""
        if has_flag(text, "crash") or (has_flag(text, "crash-once")
                                        and self.first_time("crash-once", text)):
            self.exit(3, "crash directive")
        if has_flag(text, "hang") or (has_flag(text, "hang-once")
                                       and self.first_time("hang-once", text)):
            self.journal({"event": "hang"})
            self.hung.set()
            return
        if self.turn is not None:
            self.respond(request, error=BUSY_ERROR)
            return
        if self.args.instant:
            self.instant_turn(request, text)
            return
        turn = self.turn = Turn(self.session)
        turn.deaf = has_flag(text, "deaf-abort-once") and self.first_time("deaf-abort", text)
        threading.Thread(target=self.run_turn, args=(turn, request, text), daemon=True).start()

    # -- a turn -------------------------------------------------------------------------------

    def turn_emit(self, turn: Turn, record: JSON) -> None:
        if not turn.torn:
            self.emit(record)

    def run_turn(self, turn: Turn, request: JSON, text: str) -> None:
        try:
            self.hold_back()
            if has_flag(text, "no-id"):
                self.emit({"type": "response", "command": "parse", "success": False,
                           "error": "Failed to parse command: Unexpected token 'o', \"not json\""
                                    " is not valid JSON"})
                self.emit({"type": "response", "command": "bogus", "success": False,
                           "error": "Unknown command: bogus"})
            if has_flag(text, "refuse"):
                self.respond(request, error="The model refused this prompt (#refuse)")
                return
            self.respond(request)
            self.work(turn, request, text)
        finally:
            turn.done.set()
            if self.turn is turn:
                self.turn = None

    def instant_turn(self, request: JSON, text: str) -> None:
        """--instant: the response and the run's bounds, in one write, at once."""
        messages = [{"role": "user", "content": [{"type": "text", "text": text}]},
                    assistant([{"type": "text", "text": f"you said: {text}"}])]
        records = ({"id": request.get("id"), "type": "response", "command": "prompt",
                    "success": True}, {"type": "agent_start"},
                   {"type": "agent_end", "messages": messages})
        data = "".join(compact(r) + "\n" for r in records).encode()
        with self.out_lock:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    def user_message(self, request: JSON, text: str) -> JSON:
        content: list[JSON] = [{"type": "text", "text": text}]
        images = request.get("images")
        if isinstance(images, list):
            content += [i for i in images if isinstance(i, dict) and i.get("type") == "image"]
        return {"role": "user", "content": content, "timestamp": now_ms()}

    def end_message(self, turn: Turn, message: JSON) -> None:
        self.turn_emit(turn, {"type": "message_end", "message": message})
        if not self.args.instant:
            turn.session.append(message)

    def work(self, turn: Turn, request: JSON, text: str) -> None:
        user = self.user_message(request, text)
        run: list[JSON] = [user]
        self.turn_emit(turn, {"type": "agent_start"})
        self.turn_emit(turn, {"type": "turn_start"})
        self.turn_emit(turn, {"type": "message_start", "message": user})
        self.end_message(turn, user)
        if self.failures(turn, text, run):
            return
        ui = word_arg(text, "ui")
        if text.startswith("RUN "):
            self.tool_round(turn, text[4:], run)
        answer = self.answer(turn, text, run)
        if ui is not None:
            answer += " " + self.extension_ui(ui)
        message = self.stream(turn, answer, text, run)
        run.append(message)
        self.turn_emit(turn, {"type": "turn_end", "message": message, "toolResults": []})
        if has_flag(text, "mute-after"):
            self.journal({"event": "muted"})
            self.muted = True
        self.finish(turn, run)
        if has_flag(text, "compact"):
            # pi checks the context size after the run: compaction events follow agent_end.
            self.turn_emit(turn, {"type": "compaction_start", "reason": "threshold"})
            self.turn_emit(turn, {"type": "compaction_end", "reason": "threshold",
                                  "aborted": False, "willRetry": False})

    def finish(self, turn: Turn, messages: list[JSON]) -> None:
        """agent_end; the agent takes the next prompt as soon as it is read (as pi does)."""
        if self.turn is turn:
            self.turn = None
        self.turn_emit(turn, {"type": "agent_end", "messages": messages})

    def answer(self, turn: Turn, text: str, run: list[JSON]) -> str:
        if run[-1].get("role") == "toolResult":
            return f"ran: {text_of(run[-1]).strip()}"
        users = [text_of(m) for m in turn.session.messages if m.get("role") == "user"]
        huge = number_arg(text, "huge")
        if RECALL_PHRASE in text.lower():
            answer = f"You said: {users[-2]}" if len(users) > 1 else "You said nothing yet."
        elif huge is not None:
            answer = "HUGE:" + "x" * max(0, int(huge) - 9) + ":END"
        else:
            answer = f"you said: {text}"
        return answer + (UNICODE_SUFFIX if has_flag(text, "unicode") else "")

    def stream(self, turn: Turn, answer: str, text: str, run: list[JSON]) -> JSON:
        """The assistant message, streamed; pi puts the whole message on every update."""
        whole = assistant([{"type": "text", "text": answer}])
        self.turn_emit(turn, {"type": "message_start", "message": assistant([])})
        if has_flag(text, "thinking"):
            self.update(turn, whole, {"type": "thinking_delta", "contentIndex": 0,
                                      "delta": "Let me think."})
        self.update(turn, whole, {"type": "text_start", "contentIndex": 0})
        waited = number_arg(text, "slow")
        if waited is not None or has_flag(text, "stall") or turn.deaf:
            self.update(turn, whole, {"type": "text_delta", "contentIndex": 0,
                                      "delta": PARTIAL})
            # #stall and #deaf-abort-once wait without end (a deaf turn is never aborted).
            if turn.aborted.wait(waited):
                partial = assistant([{"type": "text", "text": PARTIAL}], "aborted",
                                    "Request was aborted")
                self.end_message(turn, partial)
                return partial
            answer = PARTIAL + answer
            whole = assistant([{"type": "text", "text": answer}])
        size = max(1, -(-len(answer) // 3))
        for i in range(0, len(answer), size):
            self.update(turn, whole, {"type": "text_delta", "contentIndex": 0,
                                      "delta": answer[i:i + size]})
        self.update(turn, whole, {"type": "text_end", "contentIndex": 0, "content": answer})
        self.end_message(turn, whole)
        return whole

    def update(self, turn: Turn, whole: JSON, event: JSON) -> None:
        if self.args.instant:
            return
        self.turn_emit(turn, {"type": "message_update",
                              "assistantMessageEvent": {**event, "partial": whole},
                              "message": whole})

    def failures(self, turn: Turn, text: str, run: list[JSON]) -> bool:
        """The error endings; True when the turn is over."""
        error = "500 The server had an error "
        failed = assistant([], "error", error)
        if has_flag(text, "error") or (has_flag(text, "error-crash-once")
                                        and self.first_time("error-crash", text)):
            self.end_message(turn, failed)
            self.turn_emit(turn, {"type": "turn_end", "message": failed, "toolResults": []})
            self.finish(turn, [*run, failed])
            if has_flag(text, "error-crash-once"):
                self.exit(3, "error-crash directive")
            return True
        attempts = 2 if has_flag(text, "retry-fail") else 1 if has_flag(text, "retry") else 0
        if not attempts:
            return False
        self.end_message(turn, failed)
        self.turn_emit(turn, {"type": "turn_end", "message": failed, "toolResults": []})
        self.turn_emit(turn, {"type": "agent_end", "messages": [*run, failed]})
        for attempt in range(1, attempts + 1):
            self.turn_emit(turn, {"type": "auto_retry_start", "attempt": attempt,
                                  "maxAttempts": attempts, "delayMs": 200,
                                  "errorMessage": error})
            time.sleep(0.2)
            self.turn_emit(turn, {"type": "agent_start"})
            self.turn_emit(turn, {"type": "turn_start"})
            if has_flag(text, "retry-fail"):
                self.end_message(turn, failed)
                self.turn_emit(turn, {"type": "turn_end", "message": failed, "toolResults": []})
                self.turn_emit(turn, {"type": "agent_end", "messages": [failed]})
                continue
            answer = self.answer(turn, text, run)
            message = self.stream(turn, answer, text, [])
            self.turn_emit(turn, {"type": "auto_retry_end", "success": True,
                                  "attempt": attempt})
            self.turn_emit(turn, {"type": "turn_end", "message": message, "toolResults": []})
            self.finish(turn, [message])
            return True
        if self.turn is turn:
            self.turn = None
        self.turn_emit(turn, {"type": "auto_retry_end", "success": False, "attempt": attempts,
                              "finalError": error})
        return True

    def tool_round(self, turn: Turn, command: str, run: list[JSON]) -> None:
        call_id = f"call_{secrets.token_hex(6)}"
        args = {"command": command}
        call = assistant([{"type": "toolCall", "id": call_id, "name": "bash",
                           "arguments": args}], "toolUse")
        self.turn_emit(turn, {"type": "message_start", "message": assistant([])})
        encoded = json.dumps(args)
        self.update(turn, call, {"type": "toolcall_start", "contentIndex": 0})
        for delta in ("", encoded[:12], encoded[12:24], encoded[24:]):
            self.update(turn, call, {"type": "toolcall_delta", "contentIndex": 0,
                                     "delta": delta})
        self.update(turn, call, {"type": "toolcall_end", "contentIndex": 0})
        self.end_message(turn, call)
        run.append(call)
        base = {"toolCallId": call_id, "toolName": "bash"}
        self.turn_emit(turn, {"type": "tool_execution_start", **base, "args": args})
        self.turn_emit(turn, {"type": "tool_execution_update", **base, "args": args,
                              "partialResult": {"content": []}})
        # pi's bash tool runs the command detached: a session of its own.
        done = subprocess.run(["/bin/bash", "-c", command], capture_output=True, text=True,
                              cwd=self.cwd, start_new_session=True, check=False)
        output = done.stdout + done.stderr
        result = {"content": [{"type": "text", "text": output}]}
        self.turn_emit(turn, {"type": "tool_execution_update", **base, "args": args,
                              "partialResult": {**result, "details": {}}})
        self.turn_emit(turn, {"type": "tool_execution_end", **base, "result": result,
                              "isError": done.returncode != 0})
        tool_result = {"role": "toolResult", "toolCallId": call_id, "toolName": "bash",
                       "content": result["content"], "isError": done.returncode != 0,
                       "timestamp": now_ms()}
        self.turn_emit(turn, {"type": "message_start", "message": tool_result})
        self.end_message(turn, tool_result)
        run.append(tool_result)
        self.turn_emit(turn, {"type": "turn_end", "message": call, "toolResults": [tool_result]})
        self.turn_emit(turn, {"type": "turn_start"})

    def ask(self, method: str, fields: JSON) -> JSON:
        """An extension's dialog: the request, then (for dialogs) wait for its response."""
        ui_id = str(uuid.uuid4())
        waiting: tuple[threading.Event, list[JSON]] = (threading.Event(), [])
        if method in DIALOGS:
            self.dialogs[ui_id] = waiting
        self.emit({"type": "extension_ui_request", "id": ui_id, "method": method, **fields})
        if method not in DIALOGS:
            return {}
        waiting[0].wait()
        return {k: v for k, v in waiting[1][0].items() if k not in ("type", "id")}

    def extension_ui(self, method: str) -> str:
        self.ask("setStatus", {"statusKey": "fake", "statusText": "asking"})
        asks: dict[str, JSON] = {
            "confirm": {"title": "Allow?", "message": "The tool wants to run."},
            "select": {"title": "Pick one", "options": ["Allow", "Block"]},
            "input": {"title": "Enter a value", "placeholder": "type something..."},
            "editor": {"title": "Edit", "prefill": "draft"},
            "notify": {"message": "Heads up from the agent", "notifyType": "info"},
        }
        fields = asks.get(method, {})
        answer = self.ask(method, fields)
        if method not in DIALOGS:
            return f"[{method} sent]"
        return f"[{method} answered {json.dumps(answer, sort_keys=True)}]"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fake pi (prime-agent) RPC mode")
    parser.add_argument("--state", required=True, help="directory for the journal and sessions")
    parser.add_argument("--mode", default="rpc", choices=["rpc"])
    parser.add_argument("--instant", action="store_true")
    parser.add_argument("--journal", action="store_true")
    parser.add_argument("--crash-on-start", action="store_true")
    parser.add_argument("--no-state", action="store_true")
    parser.add_argument("--refuse-state", action="store_true")
    parser.add_argument("--startup-ui", action="store_true")
    parser.add_argument("--confirm-switch", action="store_true")
    parser.add_argument("--ack-delay", type=float, default=0.0, metavar="SECONDS")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    agent = FakePrimeAgent(args)
    agent.journal({"event": "start", "argv": sys.argv[1:], "cwd": os.getcwd()})
    if args.crash_on_start:
        agent.exit(4, "crash on start")
    if args.startup_ui:
        agent.ask("setTitle", {"title": "fake pi"})
        agent.ask("setWidget", {"widgetKey": "fake", "widgetLines": ["Loaded and ready."]})
        agent.ask("setStatus", {"statusKey": "fake", "statusText": "Turns: 0"})
    agent.read_loop()


if __name__ == "__main__":
    main()
