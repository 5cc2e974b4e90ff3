"""The closed-loop load both end-to-end benchmarks drive: every chat sends its next message once
the last one is answered, and latency runs from sending to the fake platform seeing the answer.

A platform plugs in two things: how a chat sends a tagged message, and which of the fake's
recorded calls carry answers (and their text)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

TAG_PREFIX = "bench"


@contextlib.asynccontextmanager
async def baseline_process(script: str, flag: str, env: Mapping[str, str],
                           cwd: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run a benchmark's own baseline bot (`script flag`) as a process for the block."""
    proc = await asyncio.create_subprocess_exec(sys.executable, script, flag, env=dict(env),
                                                cwd=cwd)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await proc.wait()


class BaselineAgent:
    """The fake agent as a baseline bot drives it (in the bot's own process): messages go in
    as NDJSON records, each answer is handed to `on_answer(session, text)`."""

    def __init__(self, proc: asyncio.subprocess.Process,
                 on_answer: Callable[[str, str], None]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._on_answer = on_answer
        self._ready = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, argv: Sequence[str],
                    on_answer: Callable[[str, str], None]) -> BaselineAgent:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        agent = cls(proc, on_answer)
        await agent._ready.wait()
        return agent

    async def _read(self) -> None:
        while line := await self._stdout.readline():
            record: dict[str, Any] = json.loads(line)
            if record.get("type") == "ready":
                self._ready.set()
            elif record.get("type") == "response":
                session = str(record.get("session", "")).removeprefix("json:")
                self._on_answer(session, str(record.get("content", "")))

    async def ask(self, session: str, text: str) -> None:
        record = {"type": "message", "session": session, "content": text}
        self._stdin.write(json.dumps(record).encode() + b"\n")
        await self._stdin.drain()

    async def close(self) -> None:
        self._stdin.close()
        await self._proc.wait()
        self._reader.cancel()


class Call(Protocol):
    method: str
    params: Any
    time: float


class Fake(Protocol):
    @property
    def calls(self) -> Sequence[Any]: ...

    async def wait_for(self, predicate: Callable[[], bool], what: str = ...,
                       timeout: float = ...) -> Any: ...


@dataclass
class Result:
    name: str
    messages: int
    seconds: float
    latencies: list[float]

    @property
    def throughput(self) -> float:
        return self.messages / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def line(self) -> str:
        return (f"{self.name:<11} {self.messages:>5} msgs in {self.seconds:6.2f}s  "
                f"{self.throughput:7.1f} msg/s  p50 {self.percentile(0.5) * 1000:6.1f} ms  "
                f"p99 {self.percentile(0.99) * 1000:6.1f} ms")


class Load:
    def __init__(self, fake: Fake, chats: Sequence[Any], answer_method: str,
                 send: Callable[[Any, str], Awaitable[None]]) -> None:
        self.fake = fake
        self.chats = chats
        self._answer_method = answer_method
        self._send = send
        self._waiters: dict[str, asyncio.Future[float]] = {}
        self._seen = 0

    async def _watch(self) -> None:
        while True:
            await self.fake.wait_for(lambda: len(self.fake.calls) > self._seen, timeout=3600)
            calls, self._seen = self.fake.calls[self._seen:], len(self.fake.calls)
            for call in calls:
                if call.method != self._answer_method:
                    continue
                for word in str(call.params.get("text", "")).split():
                    waiter = self._waiters.pop(word, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(call.time)

    async def _chat(self, chat: Any, rounds: int, label: str, out: list[float]) -> None:
        loop = asyncio.get_running_loop()
        for i in range(rounds):
            tag = f"{TAG_PREFIX}-{label}-{chat}-{i}"
            waiter: asyncio.Future[float] = loop.create_future()
            self._waiters[tag] = waiter
            sent = time.monotonic()
            await self._send(chat, tag)
            async with asyncio.timeout(60):
                answered = await waiter
            out.append(answered - sent)

    async def run(self, rounds: int, label: str) -> tuple[float, list[float]]:
        watcher = asyncio.create_task(self._watch())
        latencies: list[float] = []
        start = time.monotonic()
        try:
            await asyncio.gather(*(self._chat(c, rounds, label, latencies) for c in self.chats))
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        return time.monotonic() - start, latencies

    async def measure(self, messages: int, name: str) -> Result:
        await self.run(2, "warmup")
        seconds, latencies = await self.run(messages, "run")
        return Result(name, len(latencies), seconds, latencies)
