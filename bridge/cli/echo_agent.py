"""`picobridge echo-agent`: a built-in stand-in for `picobot agent --json`.

It speaks picobot's JSON channel (NDJSON on stdin/stdout: ready, ping/pong, message/response,
progress, shutdown) and answers without a model, so an operator can see tokens, access and
rendering work end to end before wiring the real agent (`picobridge chat --echo`,
`picobridge run --echo`).

What it answers:
- any text: `echo: <text>`, with the attachments it was sent listed below;
- "What did I just say?": the session's previous message (per-session memory, kept in
  `echo-agent-memory.json` in its working directory so it survives a restart like a real
  agent's sessions do);
- "markdown": a sample with bold, italics, code, a list and a link, to see each platform's
  rendering;
- "sendfile <name>": a small PNG, written to its working directory and sent back twice, once
  through the response's `attachments` and once through a `MEDIA: <path>` line (the two ways
  an agent sends files, docs/agents.md), to see a file arrive.
Before each answer it reports progress the way picobot does: one tool call and the text in
pieces.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from picobridge.cli.invocation import Invocation
    from picobridge.config.settings import Settings

MEMORY_FILE = "echo-agent-memory.json"
MAX_SESSIONS = 1000
RECALL = re.compile(r"^\W*what did i just say\W*$", re.IGNORECASE)
MARKDOWN_SAMPLE = (
    "**Bold**, _italic_, `inline code` and a [link](https://example.org).\n\n"
    "- a list item\n- another one\n\n"
    "```python\nprint(\"a code block\")\n```"
)


def command() -> list[str]:
    """The argv that runs this agent with the interpreter (and its isolation flags) that runs
    picobridge now."""
    flags = [flag for flag, on in (("-I", sys.flags.isolated), ("-E", sys.flags.ignore_environment),
                                   ("-s", sys.flags.no_user_site), ("-S", sys.flags.no_site))
             if on]
    return [sys.executable, *flags, "-m", "picobridge", "echo-agent"]


def with_echo_agent(settings: Settings) -> Settings:
    """The settings with every agent's workers replaced by the echo agent (same pool sizes)."""
    echo: dict[str, Any] = {"command": command(), "protocol": "picobot-json", "workers": []}
    agents = {name: replace(a, **echo) for name, a in settings.agents.items()}
    if "agent" in settings.configured or not settings.agents:
        return replace(settings, agents=agents, agent=replace(settings.agent, **echo))
    return replace(settings, agents=agents)


class Memory:
    """The last thing said in each session, saved to a file when the folder allows."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._last: dict[str, str] = {}
        if path is not None:
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(loaded, dict):
                    self._last = {str(k): str(v) for k, v in loaded.items()}
            except (OSError, ValueError):
                pass

    def last(self, session: str) -> str | None:
        return self._last.get(session)

    def remember(self, session: str, text: str) -> None:
        self._last.pop(session, None)
        self._last[session] = text
        while len(self._last) > MAX_SESSIONS:
            del self._last[next(iter(self._last))]
        if self._path is None:
            return
        tmp = self._path.with_name(f".{self._path.name}.{os.getpid()}")
        try:
            tmp.write_text(json.dumps(self._last), encoding="utf-8", errors="replace")
            os.replace(tmp, self._path)
        except OSError:
            self._path = None  # an unwritable folder: remember in memory only


SENDFILE = re.compile(r"^\s*sendfile\s+(\S+)\s*$", re.IGNORECASE)


def small_png(width: int = 16, height: int = 16) -> bytes:
    """A valid PNG of a two-colour gradient, written without an imaging library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(
        value for x in range(width) for value in (x * 255 // width, 96, y * 255 // height))
        for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def send_file(name: str, folder: Path) -> tuple[str, list[dict[str, str]]]:
    """The answer to "sendfile <name>": its text (with the MEDIA: line) and attachments."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "picture"
    if not base.lower().endswith(".png"):
        base += ".png"
    (folder / base).write_bytes(small_png())
    (folder / f"media-{base}").write_bytes(small_png(24, 12))
    text = (f"Here is {base}, sent through `attachments`, and media-{base} through a MEDIA: "
            f"line.\nMEDIA: media-{base}")
    return text, [{"name": base, "path": base}]


def _attachment_line(item: Any) -> str:
    if not isinstance(item, dict):
        return "- (an attachment the agent could not read)"
    name = str(item.get("name") or "unnamed")
    if isinstance(item.get("content"), str):
        return f"- {name}: {len(item['content'])} characters inline"
    details = [str(item[k]) for k in ("mime",) if item.get(k)]
    if isinstance(item.get("size"), int):
        details.append(f"{item['size']} bytes")
    where = f" at {item['path']}" if item.get("path") else ""
    return f"- {name}{where}" + (f" ({', '.join(details)})" if details else "")


def answer(text: str, attachments: Sequence[Any], session: str, memory: Memory) -> str:
    if RECALL.match(text):
        said = memory.last(session)
        return f"You said: {said}" if said is not None else "You have not said anything yet."
    memory.remember(session, text)
    reply = MARKDOWN_SAMPLE if text.strip().lower() == "markdown" else f"echo: {text}"
    if attachments:
        reply += "\n\nAttachments:\n" + "\n".join(_attachment_line(a) for a in attachments)
    return reply


class EchoAgent:
    def __init__(self, out: BinaryIO, memory: Memory) -> None:
        self._out = out
        self._memory = memory
        self._tools = 0

    def emit(self, record: dict[str, Any]) -> None:
        # ASCII escapes: a lone surrogate from the wire can always be written back.
        self._out.write(json.dumps(record).encode("ascii") + b"\n")
        self._out.flush()

    def handle(self, line: bytes) -> bool:
        """Act on one input line; False when asked to stop."""
        if not line.strip():
            return True
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            self.emit({"type": "error", "message": "Invalid JSON", "code": "parse_error"})
            return True
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "shutdown":
            return False
        handlers: dict[Any, Callable[[dict[str, Any]], None]] = {
            "ping": lambda _: self.emit({"type": "pong"}),
            "message": self._message,
        }
        handler = handlers.get(kind)
        if handler is None:
            self.emit({"type": "error", "message": f"Unknown message type: {kind}",
                       "code": "unknown_type"})
        else:
            handler(record)
        return True

    def _message(self, record: dict[str, Any]) -> None:
        session = record.get("session")
        session = session if isinstance(session, str) and session else uuid.uuid4().hex
        content = record.get("content")
        text = content if isinstance(content, str) else ""
        attachments = record.get("attachments")
        attachments = attachments if isinstance(attachments, list) else []
        files: list[dict[str, str]] = []
        wanted = SENDFILE.match(text)
        if wanted is not None:
            reply, files = send_file(wanted.group(1), Path.cwd())
        else:
            reply = answer(text, attachments, session, self._memory)
        self._tools += 1
        call = {"id": str(self._tools), "name": "echo"}
        self.emit({"type": "progress", "event": "tool_call_start", **call,
                   "arguments": {"characters": len(text)}})
        self.emit({"type": "progress", "event": "tool_call_done", **call, "result": "ok"})
        for start in range(0, len(reply), 40):
            self.emit({"type": "progress", "event": "text_delta",
                       "text": reply[start:start + 40]})
        response: dict[str, Any] = {"type": "response", "content": reply,
                                    "session": f"json:{session}"}
        if files:
            response["attachments"] = files
        self.emit(response)


def main(memory_dir: Path | None = None) -> int:
    """Serve stdin until EOF or a shutdown record."""
    folder = Path.cwd() if memory_dir is None else memory_dir
    agent = EchoAgent(sys.stdout.buffer, Memory(folder / MEMORY_FILE))
    agent.emit({"type": "ready"})
    stdin = sys.stdin.buffer
    try:
        # A binary readline splits on b"\n" only, as the channel's framing requires.
        while line := stdin.readline():
            if not agent.handle(line.rstrip(b"\n").removesuffix(b"\r")):
                break
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    return 0


def echo_agent_command(invocation: Invocation) -> int:
    return main()
