"""What the bridge core costs per message, with durability on.

Runs, in one process and one go:
  1. direct:    records written straight to an instant fake agent, one at a time, each waited
                for (the floor: pipe + agent cost);
  2. bridged:   the same messages through intake -> SQLite store -> router -> the same kind of
                agent -> store outbox -> a no-op adapter, one at a time: latency added;
  3. throughput: N messages from C chats submitted one after another as each is committed
                (as a platform's messages come in), coalescing off so every message is its own
                turn, until every reply is delivered.

For 2 and 3 it also gives the daemon's CPU time per message (user + system of this process,
which runs the bridge and its database thread; the agent is a child of its own): on a shared
machine the wall figures swing with the load, this one much less. For 3 it splits that CPU
between the event loop's thread and the others (the database's), and counts what the process
wrote per message (bytes and write calls, /proc/self/io: the WAL's pages, the agent's pipe),
which does not move with the load at all (Linux only; left out elsewhere). The load averages
before and after are printed with the figures.

Each of the three runs once per agent protocol: picobot-json against an instant
tests/fakes/fake_picobot.py, prime-rpc against an instant tests/fakes/fake_prime_agent.py (a
turn is a switch_session when the chat changes, then prompt -> response, agent_start,
agent_end).

Usage: python bench/bridge_overhead.py [--messages 2000] [--chats 20] [--latency-samples 500]
                                       [--protocols picobot-json,prime-rpc] [--rounds 3]
Targets on the project's 2-core machine (issue 21, synchronous=FULL): >= 1,500 messages/s,
p50 added <= 0.8 ms; prime-rpc within 1.5x of picobot-json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
FAKE_PRIME = REPO / "tests" / "fakes" / "fake_prime_agent.py"


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


def cpu_seconds() -> float:
    """User + system time of this process so far (every thread; not its children)."""
    times = os.times()
    return times.user + times.system


def loop_thread_cpu() -> float | None:
    """User + system time of the calling thread (the event loop's), or None off Linux."""
    try:
        stat = Path(f"/proc/self/task/{threading.get_native_id()}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def writes_so_far() -> tuple[int, int] | None:
    """Bytes this process has written and its write calls (any file, pipe or socket)."""
    try:
        counters = dict(line.split(": ") for line in
                        Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return None
    return int(counters["wchar"]), int(counters["syscw"])


@dataclass(frozen=True, slots=True)
class Costs:
    """What one throughput run cost per message: CPU seconds (the process, its event loop's
    thread), bytes written and write calls; None where the system does not tell."""

    cpu: float
    loop_cpu: float | None
    written: float | None
    write_calls: float | None


class CostMeter:
    """Started before a run, read after it (in the event loop's thread)."""

    def __init__(self) -> None:
        self._cpu = cpu_seconds()
        self._loop = loop_thread_cpu()
        self._writes = writes_so_far()

    def per_message(self, messages: int) -> Costs:
        loop, writes = loop_thread_cpu(), writes_so_far()
        loop_cpu = None if loop is None or self._loop is None \
            else (loop - self._loop) / messages
        written = calls = None
        if writes is not None and self._writes is not None:
            written = (writes[0] - self._writes[0]) / messages
            calls = (writes[1] - self._writes[1]) / messages
        return Costs((cpu_seconds() - self._cpu) / messages, loop_cpu, written, calls)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def agent_command(protocol: str, state: Path) -> list[str]:
    fake = FAKE_PRIME if protocol == "prime-rpc" else FAKE_AGENT
    return [sys.executable, str(fake), "--state", str(state), "--instant"]


class Direct:
    """The agent on pipes, without the bridge: one exchange, then wait for its end."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin = proc.stdin
        self.lines = read_lines(proc.stdout)

    async def ask(self, record: dict[str, object], until: str) -> None:
        self.stdin.write(encode_record(record))
        await self.stdin.drain()
        while True:
            got = decode_record(await anext(self.lines))
            if got and got.get("type") == until:
                return


async def direct_latencies(protocol: str, state: Path, samples: int) -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        *agent_command(protocol, state), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE)
    agent = Direct(proc)
    if protocol == "prime-rpc":
        # The bridge's first turn of a chat: the handshake, then the chat's session file.
        await agent.ask({"id": "s", "type": "get_state"}, "response")
        await agent.ask({"id": "w", "type": "switch_session",
                         "sessionPath": str(state / "d.jsonl")}, "response")
    else:
        assert decode_record(await anext(agent.lines)) == {"type": "ready"}
    out = []
    for i in range(samples):
        started = time.perf_counter()
        if protocol == "prime-rpc":
            await agent.ask({"id": f"p{i}", "type": "prompt", "message": f"m{i}"}, "agent_end")
        else:
            await agent.ask({"type": "message", "content": f"m{i}", "session": "d"},
                            "response")
        out.append(time.perf_counter() - started)
    agent.stdin.close()
    await proc.wait()
    return out


def settings_for(protocol: str, tmp: Path, coalesce: bool) -> Settings:
    return Settings(
        state_dir=tmp,
        agent=AgentSettings(protocol=protocol, command=agent_command(protocol, tmp / "agent")),
        bridge=BridgeSettings(coalesce=coalesce),
    )


Body = Callable[[daemon.Daemon, "BenchAdapter"], Awaitable[None]]


async def with_bridge(protocol: str, tmp: Path, coalesce: bool, body: Body) -> None:
    settings = settings_for(protocol, tmp, coalesce)
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


async def bridged_latencies(protocol: str, tmp: Path, samples: int
                            ) -> tuple[list[float], float]:
    """The latencies, and the CPU seconds per message they cost."""
    out: list[float] = []
    cpu = 0.0

    async def body(bridge: daemon.Daemon, adapter: BenchAdapter) -> None:
        nonlocal cpu
        cpu = cpu_seconds()
        for i in range(samples):
            msg = message("lat", i)
            started = time.perf_counter()
            await bridge.intake.submit(msg)
            while msg.platform_message_id not in adapter.delivered:
                adapter.event.clear()
                await adapter.event.wait()
            out.append(adapter.delivered[msg.platform_message_id] - started)
        cpu = (cpu_seconds() - cpu) / samples

    await with_bridge(protocol, tmp, True, body)
    return out, cpu


async def throughput(protocol: str, tmp: Path, messages: int, chats: int
                     ) -> tuple[float, Costs]:
    """Messages per second, and what each message cost."""
    elapsed = 0.0
    costs = Costs(0.0, None, None, None)

    async def body(bridge: daemon.Daemon, adapter: BenchAdapter) -> None:
        nonlocal elapsed, costs
        meter = CostMeter()
        started = time.perf_counter()
        for i in range(messages):
            await bridge.intake.submit(message(f"c{i % chats}", i))
        while len(adapter.delivered) < messages:
            adapter.event.clear()
            await adapter.event.wait()
        elapsed = time.perf_counter() - started
        costs = meter.per_message(messages)

    await with_bridge(protocol, tmp, False, body)
    return messages / elapsed, costs


@dataclass(frozen=True, slots=True)
class Figures:
    """One protocol's measurements over the rounds (samples pooled, one rate per round)."""

    protocol: str
    direct: list[float]
    bridged: list[float]
    rates: list[float]
    cpu_latency: list[float]  # CPU seconds per message, one per round
    costs: list[Costs]  # the throughput run's, one per round

    @property
    def added_p50(self) -> float:
        return percentile(self.bridged, 0.5) - percentile(self.direct, 0.5)

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)


async def measure(protocol: str, tmp: Path, args: argparse.Namespace) -> Figures:
    direct = await direct_latencies(protocol, tmp / "direct", args.latency_samples)
    bridged, cpu_latency = await bridged_latencies(protocol, tmp / "lat", args.latency_samples)
    rate, costs = await throughput(protocol, tmp / "tput", args.messages, args.chats)
    return Figures(protocol, direct, bridged, [rate], [cpu_latency], [costs])


def report(f: Figures, args: argparse.Namespace) -> None:
    ms = 1000.0
    d50, d99 = percentile(f.direct, 0.5) * ms, percentile(f.direct, 0.99) * ms
    b50, b99 = percentile(f.bridged, 0.5) * ms, percentile(f.bridged, 0.99) * ms
    print(f"[{f.protocol}]")
    print(f"direct to agent:   p50 {d50:.3f} ms  p99 {d99:.3f} ms  (n={len(f.direct)})")
    print(f"through bridge:    p50 {b50:.3f} ms  p99 {b99:.3f} ms  (n={len(f.bridged)})")
    print(f"added by bridge:   p50 {b50 - d50:.3f} ms  p99 {b99 - d99:.3f} ms  "
          f"(mean {(statistics.mean(f.bridged) - statistics.mean(f.direct)) * ms:.3f} ms)")
    rounds = ", ".join(f"{r:.0f}" for r in f.rates)
    print(f"throughput:        {f.rate:.0f} messages/s, median of rounds ({rounds}) "
          f"({args.messages} messages, {args.chats} chats, one turn per message, SQLite WAL, "
          "every message committed before dispatch)")
    us = 1e6
    cpu = statistics.median(c.cpu for c in f.costs)
    print(f"daemon CPU:        {cpu * us:.0f} us per message "
          f"in the throughput run, {statistics.median(f.cpu_latency) * us:.0f} us one at a "
          "time (median of rounds; user + system, every thread)")
    loop = [c.loop_cpu for c in f.costs if c.loop_cpu is not None]
    if loop:
        print(f"  by thread:       event loop {statistics.median(loop) * us:.0f} us, the others "
              f"(the database's) {(cpu - statistics.median(loop)) * us:.0f} us")
    written = [c.written for c in f.costs if c.written is not None]
    calls = [c.write_calls for c in f.costs if c.write_calls is not None]
    if written and calls:
        print(f"  writes:          {statistics.median(written) / 1024:.1f} KB in "
              f"{statistics.median(calls):.1f} write calls per message in the throughput run "
              "(WAL pages, the agent's pipe; does not move with the load)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--latency-samples", type=int, default=500)
    parser.add_argument("--protocols", default="picobot-json,prime-rpc")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, the protocols taking turns in each (a shared machine's "
                             "load then weighs on all of them alike)")
    args = parser.parse_args()
    protocols = args.protocols.split(",")
    pooled = {p: Figures(p, [], [], [], [], []) for p in protocols}
    load_before = load_average()
    for _ in range(args.rounds):
        for protocol in protocols:
            with tempfile.TemporaryDirectory() as tmpdir:
                got = await measure(protocol, Path(tmpdir), args)
            pooled[protocol].direct.extend(got.direct)
            pooled[protocol].bridged.extend(got.bridged)
            pooled[protocol].rates.extend(got.rates)
            pooled[protocol].cpu_latency.extend(got.cpu_latency)
            pooled[protocol].costs.extend(got.costs)
    figures = list(pooled.values())
    print(f"load average (1, 5, 15 min): {load_before} before, {load_average()} after "
          f"({os.cpu_count()} CPUs)")
    for f in figures:
        report(f, args)
    if len(figures) == 2:
        base, other = figures
        print(f"{other.protocol} relative to {base.protocol}: throughput "
              f"{other.rate / base.rate:.2f}x, p50 added {other.added_p50 / base.added_p50:.2f}x "
              "(target: throughput >= 0.67x, p50 added <= 1.5x)")


if __name__ == "__main__":
    asyncio.run(main())
