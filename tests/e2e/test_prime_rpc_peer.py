"""The fake pi RPC agent (tests/fakes/fake_prime_agent.py) against the real pi: the same
commands to both, the same shapes back. When pi changes, this test says where the fake (and
so every fault test built on it) no longer tells the truth."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.prime_rpc_support import FAKE_PRIME, ensure_pi, pi_agent_dir
from tests.fakes.fake_llm import FakeLLM

JSON = dict[str, Any]


@pytest.fixture(scope="session")
def pi() -> Path:
    return ensure_pi()


class Peer:
    """An RPC agent on pipes: commands in, every record out kept in order."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.records: list[JSON] = []

    @classmethod
    async def start(cls, command: list[str], cwd: Path, env: dict[str, str]) -> Peer:
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, cwd=cwd, env={**os.environ, **env},
            limit=2**24)
        return cls(proc)

    async def send(self, record: JSON | str) -> None:
        assert self.proc.stdin is not None
        line = record if isinstance(record, str) else json.dumps(record)
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def until(self, predicate: Callable[[JSON], bool]) -> list[JSON]:
        """The records up to and including the first that satisfies `predicate`."""
        assert self.proc.stdout is not None
        start = len(self.records)
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
            assert line, f"the agent closed its output; last records: {self.records[-5:]}"
            record = json.loads(line)
            self.records.append(record)
            if predicate(record):
                return self.records[start:]

    async def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return await asyncio.wait_for(self.proc.wait(), 30)


def shape(record: JSON) -> str:
    kind = record.get("type")
    if kind == "message_update":
        return f"message_update:{record['assistantMessageEvent']['type']}"
    if kind in ("message_start", "message_end"):
        return f"{kind}:{record['message']['role']}"
    if kind == "response":
        mark = "id" if "id" in record else "no-id"
        return f"response:{record.get('command')}:{record.get('success')}:{mark}"
    if kind == "agent_end":
        return f"agent_end:{record['messages'][-1].get('stopReason')}"
    return str(kind)


def response(request_id: str) -> Callable[[JSON], bool]:
    return lambda r: r.get("type") == "response" and r.get("id") == request_id


def agent_end(record: JSON) -> bool:
    return record.get("type") == "agent_end"


def no_id(record: JSON) -> bool:
    return record.get("type") == "response" and "id" not in record


Stall = Callable[[Peer], Awaitable[None]]


async def conversation(peer: Peer, tmp: Path, stall: Stall) -> dict[str, Any]:
    """One script for both agents; what it saw, by step."""
    seen: dict[str, Any] = {}
    await peer.send({"id": "s1", "type": "get_state"})
    (state,) = await peer.until(response("s1"))
    seen["state keys"] = sorted(k for k in state["data"] if k in (
        "sessionFile", "sessionId", "isStreaming", "messageCount", "model"))
    chat = tmp / "sessions" / "chat-1.jsonl"
    await peer.send({"id": "w1", "type": "switch_session", "sessionPath": str(chat)})
    seen["switch"] = (await peer.until(response("w1")))[-1]["data"]
    for step, text in (("plain", "hello"), ("tool", "RUN echo hi-there")):
        await peer.send({"id": step, "type": "prompt", "message": text})
        seen[step] = [shape(r) for r in await peer.until(agent_end)]
        seen[f"{step} answer"] = seen[step] and peer.records[-1]["messages"][-1]["content"]
    await peer.send("not json")
    await peer.send({"id": "b1", "type": "bogus"})
    seen["junk"] = [shape(r) for r in await peer.until(no_id) + await peer.until(no_id)]
    seen["junk errors"] = [r["error"].split(":")[0] for r in peer.records[-2:]]
    # A turn in progress: a second prompt is refused; abort ends the run, then is answered.
    await stall(peer)
    await peer.send({"id": "p2", "type": "prompt", "message": "meanwhile"})
    seen["busy"] = (await peer.until(response("p2")))[-1]
    await peer.send({"id": "a1", "type": "abort"})
    tail = [shape(r) for r in await peer.until(response("a1"))]
    seen["abort"] = [s for s in tail if s.startswith(("agent_end", "response"))]
    gone = tmp / "sessions" / "gone.jsonl"
    gone.write_text(json.dumps({"type": "session", "version": 3, "id": "x",
                                "timestamp": "2026-01-01T00:00:00.000Z",
                                "cwd": str(tmp / "no-such-dir")}) + "\n")
    await peer.send({"id": "w2", "type": "switch_session", "sessionPath": str(gone)})
    refused = (await peer.until(response("w2")))[-1]
    seen["refused"] = (refused["success"], refused["error"].replace(str(tmp), "<tmp>")
                       .split("\nCurrent working directory")[0])
    seen["file"] = [json.loads(line)["message"]["role"] for line in
                    chat.read_text(encoding="utf-8").splitlines()
                    if json.loads(line).get("type") == "message"]
    seen["exit"] = await peer.close()
    return seen


async def test_the_fake_answers_as_the_real_pi_does(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm:
        agent_dir = pi_agent_dir(tmp_path, llm)

        async def stall_pi(peer: Peer) -> None:
            llm.stall_next()
            asked = len(llm.requests)
            await peer.send({"id": "p1", "type": "prompt", "message": "think hard"})
            await peer.until(response("p1"))
            await llm.wait_for(lambda: len(llm.requests) > asked, "the stalled request", 30)

        async def stall_fake(peer: Peer) -> None:
            await peer.send({"id": "p1", "type": "prompt", "message": "#stall think hard"})
            await peer.until(lambda r: shape(r) == "message_update:text_delta")

        results = []
        for name, command, stall in (
                ("pi", [str(pi), "--mode", "rpc", "--offline", "--provider", "fakellm",
                        "--model", "fake-model", "--no-context-files"], stall_pi),
                ("fake", [sys.executable, str(FAKE_PRIME), "--state", str(tmp_path / "fs")],
                 stall_fake)):
            tmp = tmp_path / name
            (tmp / "work").mkdir(parents=True)
            (tmp / "sessions").mkdir()
            peer = await Peer.start(command, tmp / "work",
                                    {"PI_CODING_AGENT_DIR": str(agent_dir)})
            try:
                results.append(await conversation(peer, tmp, stall))
            finally:
                if peer.proc.returncode is None:
                    peer.proc.kill()
                    await peer.proc.wait()
        real, fake = results
    assert real["plain answer"] == [{"type": "text", "text": "you said: hello"}]
    assert real["tool answer"] == [{"type": "text", "text": "ran: hi-there"}]
    assert real["abort"] == ["agent_end:aborted", "response:abort:True:id"]
    for step in real:
        assert fake[step] == real[step], f"{step}: the fake says {fake[step]!r}, pi says " \
                                         f"{real[step]!r}"
