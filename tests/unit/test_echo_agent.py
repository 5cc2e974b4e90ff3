"""`picobridge echo-agent` on its own wire, as the bridge (or any client of picobot's JSON
channel) drives it: ready, pong, progress before each answer, attachments listed, per-session
memory, errors for what it cannot read, and shutdown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def converse(workdir: Path, *records: dict[str, Any] | bytes) -> list[dict[str, Any]]:
    lines = b"".join(r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n"
                     for r in records)
    done = subprocess.run([sys.executable, "-m", "picobridge", "echo-agent"], input=lines,
                          capture_output=True, cwd=workdir, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.split(b"\n") if line]


def test_the_channel_from_ready_to_shutdown(tmp_path: Path) -> None:
    out = converse(
        tmp_path,
        {"type": "ping"},
        {"type": "message", "content": "hello\u2028there", "session": "s1"},
        {"type": "message", "content": "What did I just say?", "session": "s1"},
        {"type": "message", "content": "what did I just say", "session": "s2"},
        b"not json\n",
        {"type": "dance"},
        {"type": "shutdown"},
        {"type": "message", "content": "never read", "session": "s1"},
    )
    kinds = [r["type"] for r in out]
    assert kinds[:2] == ["ready", "pong"]
    responses = [r for r in out if r["type"] == "response"]
    assert [(r["content"], r["session"]) for r in responses] == [
        ("echo: hello\u2028there", "json:s1"), ("You said: hello\u2028there", "json:s1"),
        ("You have not said anything yet.", "json:s2")]
    errors = [r["code"] for r in out if r["type"] == "error"]
    assert errors == ["parse_error", "unknown_type"]
    # Progress as picobot sends it: a tool call, then the text in pieces, before the answer.
    first_answer = kinds.index("response")
    events = [r["event"] for r in out[2:first_answer]]
    assert events[:2] == ["tool_call_start", "tool_call_done"] and "text_delta" in events
    assert "".join(r["text"] for r in out[2:first_answer]
                   if r.get("event") == "text_delta") == responses[0]["content"]


def test_attachments_are_listed_and_memory_survives_a_restart(tmp_path: Path) -> None:
    out = converse(tmp_path, {"type": "message", "content": "look", "session": "s", "attachments": [
        {"name": "notes.txt", "content": "abc"},
        {"name": "photo.jpg", "path": "/media/photo.jpg", "size": 2048, "mime": "image/jpeg"},
    ]})
    [answer] = [r["content"] for r in out if r["type"] == "response"]
    assert answer == ("echo: look\n\nAttachments:\n- notes.txt: 3 characters inline\n"
                      "- photo.jpg at /media/photo.jpg (image/jpeg, 2048 bytes)")
    again = converse(tmp_path, {"type": "message", "content": "What did I just say?",
                                "session": "s"})
    assert [r["content"] for r in again if r["type"] == "response"] == ["You said: look"]
