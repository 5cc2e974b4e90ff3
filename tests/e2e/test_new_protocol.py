"""A new agent protocol is one driver module plus one registry line.

The test writes a throwaway protocol ("echo-lines": a hello record, numbered asks and
answers, numbered pings) as one module, registers it with one line before the CLI starts,
and runs `picobridge chat` against a stand-in agent that speaks it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

from tests.harness import REPO, cli_env, write_config

DRIVER = '''
"""echo-lines: {"hello": 1} at start; {"ask", "id"} answered by {"re", "say"}; {"ping"}."""

import asyncio
import itertools
from typing import Any

from picobridge.agent.driver import Driver
from picobridge.agent.port import AgentRequest, Reply


class EchoLinesDriver(Driver):
    protocol = "echo-lines"

    def __init__(self, io, emit, context) -> None:
        super().__init__(io, emit, context)
        self._hello = asyncio.Event()
        self._pong = asyncio.Event()
        self._ids = itertools.count(1)
        self._asked: dict[int, str] = {}

    def running(self) -> frozenset[str]:
        return frozenset(self._asked.values())

    async def handshake(self) -> None:
        await self._hello.wait()

    async def probe(self) -> None:
        self._pong.clear()
        await self._io.write({"ping": next(self._ids)})
        await self._pong.wait()

    async def start_turn(self, request: AgentRequest) -> None:
        number = next(self._ids)
        self._asked[number] = request.session
        await self._io.write({"ask": request.text, "id": number})

    async def on_record(self, record: dict[str, Any]) -> None:
        if "hello" in record:
            self._hello.set()
        elif "pong" in record:
            self._pong.set()
        elif "re" in record:
            session = self._asked.pop(record["re"])
            await self._emit(Reply.of(session, record["say"]))
'''

AGENT = '''
import json, sys

print(json.dumps({"hello": 1}), flush=True)
for line in sys.stdin:
    record = json.loads(line)
    if "ping" in record:
        print(json.dumps({"pong": record["ping"]}), flush=True)
    elif "ask" in record:
        print(json.dumps({"re": record["id"], "say": record["ask"][::-1]}), flush=True)
'''

LAUNCHER = '''
import sys
from picobridge.agent import protocols

protocols.PROTOCOLS["echo-lines"] = protocols.ProtocolEntry(
    "echo_lines_driver:EchoLinesDriver", ("echo-lines-agent",))

from picobridge.cli import main

sys.exit(main(sys.argv[1:]))
'''


async def test_a_driver_registered_in_one_line_serves_picobridge_chat(tmp_path: Path) -> None:
    (tmp_path / "echo_lines_driver.py").write_text(textwrap.dedent(DRIVER))
    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "launch.py").write_text(textwrap.dedent(LAUNCHER))
    config = write_config(tmp_path, {
        "state_dir": str(tmp_path / "state"),
        "agent": {"protocol": "echo-lines", "command": [sys.executable, str(tmp_path / "agent.py")],
                  "ready_timeout": 10, "ping_interval": 1, "ping_timeout": 2},
    })
    env = cli_env({"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get(
        "PYTHONPATH", "")]).rstrip(os.pathsep)})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(tmp_path / "launch.py"), "chat", "--config", str(config),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env, cwd=REPO)
    out, err = await asyncio.wait_for(proc.communicate(b"hello there\nsecond line\n"), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["ereht olleh", "enil dnoces"]
