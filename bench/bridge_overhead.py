"""What the bridge core costs per message, with durability on.

Runs, in one process and one go:
  1. direct:    records written straight to an instant fake agent, one at a time, each waited
                for (the floor: pipe + agent cost);
  2. bridged:   the same messages through intake -> SQLite store -> router -> the same kind of
                agent -> store outbox -> a no-op adapter, one at a time: latency added;
  3. throughput: N messages from C chats submitted at once, coalescing off so every message
                is its own turn, until every reply is delivered.

Usage: python bench/bridge_overhead.py [--messages 2000] [--chats 20] [--latency-samples 500]
Targets on the project's 2-core machine: >= 500 messages/s, p50 added <= 2 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from picobridge.agent.framing import decode_record, encode_record, read_lines  # noqa: E402
from picobridge.cli import wiring as daemon  # noqa: E402
from picobridge.config.sections import AgentSettings, BridgeSettings  # noqa: E402
from picobridge.config.settings import Settings  # noqa: E402
from picobridge.contract import (  # noqa: E402
    Adapter,
    BridgeLink,
    ChatRef,
    InboundMessage,
    OutgoingReply,
)
from picobridge.store import Store  # noqa: E402

FAKE_AGENT = REPO / "tests" / "fakes" / "fake_picobot.py"


class BenchAdapter(Adapter):
    """Records when each reply would have reached the platform."""

    platform = "console"

    def __init__(self) -> None:
        self.delivered: dict[str, float] = {}
        self.event = asyncio.Event()

    async def start(self, bridge: BridgeLink) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        now = time.perf_counter()
        for message_id in reply.answers:
            self.delivered[message_id] = now
        self.event.set()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def direct_latencies(state: Path, samples: int) -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(FAKE_AGENT), "--state", str(state), "--instant",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    lines = read_lines(proc.stdout)
    record = decode_record(await anext(lines))
    assert record == {"type": "ready"}, record
    out = []
    for i in range(samples):
        started = time.perf_counter()
        proc.stdin.write(encode_record({"type": "message", "content": f"m{i}", "session": "d"}))
        await proc.stdin.drain()
        while True:
            record = decode_record(await anext(lines))
            if record and record.get("type") == "response":
                break
        out.append(time.perf_counter() - started)
    proc.stdin.write(encode_record({"type": "shutdown"}))
    await proc.stdin.drain()
    await proc.wait()
    return out


def settings_for(tmp: Path, coalesce: bool) -> Settings:
    return Settings(
        state_dir=tmp,
        agent=AgentSettings(command=[sys.executable, str(FAKE_AGENT), "--state",
                                     str(tmp / "agent"), "--instant"]),
        bridge=BridgeSettings(coalesce=coalesce),
    )


Body = Callable[[daemon.Daemon, "BenchAdapter"], Awaitable[None]]


async def with_bridge(tmp: Path, coalesce: bool, body: Body) -> None:
    settings = settings_for(tmp, coalesce)
    store = await Store.open(settings.db_path)
    adapter = BenchAdapter()
    bridge = await daemon.assemble(settings, store, [adapter])
    await daemon.start(bridge)
    await bridge.pool.workers[0].first_ready.wait()
    try:
        await body(bridge, adapter)
    finally:
        await daemon.stop(bridge)
        await store.close()


def message(chat: str, n: int) -> InboundMessage:
    # The console platform is trusted, so access control does not get in the way here; the
    # access check itself (one indexed read) still runs.
    return InboundMessage(chat=ChatRef("console", chat), sender_id="u", text=f"m{n}",
                          platform_message_id=f"{chat}-{n}")


async def bridged_latencies(tmp: Path, samples: int) -> list[float]:
    out: list[float] = []

    async def body(bridge: daemon.Daemon, adapter: BenchAdapter) -> None:
        for i in range(samples):
            msg = message("lat", i)
            started = time.perf_counter()
            await bridge.intake.submit(msg)
            while msg.platform_message_id not in adapter.delivered:
                adapter.event.clear()
                await adapter.event.wait()
            out.append(adapter.delivered[msg.platform_message_id] - started)

    await with_bridge(tmp, True, body)
    return out


async def throughput(tmp: Path, messages: int, chats: int) -> float:
    elapsed = 0.0

    async def body(bridge: daemon.Daemon, adapter: BenchAdapter) -> None:
        nonlocal elapsed
        started = time.perf_counter()
        for i in range(messages):
            await bridge.intake.submit(message(f"c{i % chats}", i))
        while len(adapter.delivered) < messages:
            adapter.event.clear()
            await adapter.event.wait()
        elapsed = time.perf_counter() - started

    await with_bridge(tmp, False, body)
    return messages / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--latency-samples", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        direct = await direct_latencies(tmp / "direct", args.latency_samples)
        bridged = await bridged_latencies(tmp / "lat", args.latency_samples)
        rate = await throughput(tmp / "tput", args.messages, args.chats)
    ms = 1000.0
    d50, d99 = percentile(direct, 0.5) * ms, percentile(direct, 0.99) * ms
    b50, b99 = percentile(bridged, 0.5) * ms, percentile(bridged, 0.99) * ms
    print(f"direct to agent:   p50 {d50:.3f} ms  p99 {d99:.3f} ms  (n={len(direct)})")
    print(f"through bridge:    p50 {b50:.3f} ms  p99 {b99:.3f} ms  (n={len(bridged)})")
    print(f"added by bridge:   p50 {b50 - d50:.3f} ms  p99 {b99 - d99:.3f} ms  "
          f"(mean {(statistics.mean(bridged) - statistics.mean(direct)) * ms:.3f} ms)")
    print(f"throughput:        {rate:.0f} messages/s ({args.messages} messages, {args.chats} "
          "chats, one turn per message, SQLite WAL, every message committed before dispatch)")


if __name__ == "__main__":
    asyncio.run(main())
