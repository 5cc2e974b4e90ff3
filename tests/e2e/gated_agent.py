#!/usr/bin/env python3
"""A picobot JSON-channel agent whose turns a test steps through (stdlib only).

Every message is answered "echo: <content>", streamed as two text deltas. The first half goes
out at once; when the content holds ``#gate=NAME`` the agent then asks the test's gate server
(``--gate-port``) whether it may go on, and streams the rest and responds only once the test
lets it. So a test can hold a turn with its streamed draft half-written on screen, and knows
(when the next message's gate is reached) that the bridge has finished the previous turn.

Pings are answered by the reader thread while a turn waits at its gate, as picobot does.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import socket
import sys
import threading
from typing import Any

_GATE = re.compile(r"#gate=(\w+)")
_out = threading.Lock()


def emit(record: dict[str, Any]) -> None:
    with _out:
        sys.stdout.buffer.write(json.dumps(record).encode() + b"\n")
        sys.stdout.buffer.flush()


def wait_at_gate(port: int, name: str) -> None:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(name.encode() + b"\n")
        conn.makefile("rb").readline()  # the test answers when the turn may go on


def work(port: int, inbox: queue.Queue[dict[str, Any]]) -> None:
    while True:
        record = inbox.get()
        content = str(record.get("content") or "")
        reply = f"echo: {content}"
        half = len(reply) // 2
        emit({"type": "progress", "event": "text_delta", "text": reply[:half]})
        gate = _GATE.search(content)
        if gate is not None:
            wait_at_gate(port, gate[1])
        emit({"type": "progress", "event": "text_delta", "text": reply[half:]})
        emit({"type": "response", "content": reply, "session": f"json:{record.get('session')}"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gate-port", type=int, required=True)
    args = parser.parse_args()
    inbox: queue.Queue[dict[str, Any]] = queue.Queue()
    threading.Thread(target=work, args=(args.gate_port, inbox), daemon=True).start()
    emit({"type": "ready"})
    # Binary readline splits on b"\n" only, as the channel requires.
    for line in iter(sys.stdin.buffer.readline, b""):
        if not line.strip():
            continue
        record = json.loads(line)
        kind = record.get("type")
        if kind == "ping":
            emit({"type": "pong"})
        elif kind == "shutdown":
            break
        elif kind == "message":
            inbox.put(record)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
