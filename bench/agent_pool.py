"""Benchmark: what an agent pool buys, end to end through the fake Bot API.

N chats (default 16) each send one message at once to a fake agent that takes S seconds per
turn (`#slow=S`, default 1), with `agent.pool_size` 1, 2, 4 and 8 (a fresh `picobridge run`
for each size, every worker ready and one warm-up message answered before the clock starts).
Wall time runs from queuing the N updates in the fake to the last answer's sendMessage, and
is set against the ideal ceil(N / size) x S: one agent answers one chat at a time, so a pool
can do no better. The daemon's own resident set (VmRSS of the `picobridge` process, not its
agents') is read after each run.

With `--agents A` (named agents, `[agents.NAME]`) there are A agents with a pool of each size,
the chats split between them by `[[routes]]` (chat i to agent i mod A); the ideal is then
ceil(ceil(N / A) / size) x S, the agents working side by side.

Run: `python bench/agent_pool.py [--chats 16] [--seconds 1] [--sizes 1,2,4,8] [--agents 1]
[--check]`. Targets: wall time within 1.15x of the ideal at every size, and the daemon's RSS
at pool 8 within 5 MB of pool 1 (`--check` exits 1 when one is missed).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.harness import Daemon, agent_command, write_config  # noqa: E402

RATIO_TARGET = 1.15
RSS_TARGET_MB = 5.0
FIRST_CHAT = 20_000
WARMUP_CHAT = 19_999
READY = re.compile(r"agent ready pid=\d+ worker=")


@dataclass
class Run:
    size: int
    chats: int
    seconds: float  # per turn
    wall: float
    rss_kb: int
    agents: int = 1

    @property
    def ideal(self) -> float:
        return math.ceil(math.ceil(self.chats / self.agents) / self.size) * self.seconds

    @property
    def ratio(self) -> float:
        return self.wall / self.ideal


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def answer_time(fake: FakeTelegram, tag: str) -> float | None:
    """When the fake received the first sendMessage carrying this tag."""
    for call in fake.calls:
        if call.method == "sendMessage" and tag in str(call.params.get("text", "")):
            return call.time
    return None


def split(config: dict[str, Any], tmp: Path, size: int, ids: list[int], agents: int) -> None:
    """Agents a1.. beside the default one, each with chats of its own (chat i: agent i % A)."""
    if agents > 1:
        config["agents"] = {f"a{k}": {"command": agent_command(tmp / f"agent{k}"),
                                      "pool_size": size} for k in range(1, agents)}
        config["routes"] = [{"agent": f"a{k}", "chats": [f"telegram:{i}" for i in ids[k::agents]]}
                            for k in range(1, agents)]


async def one_size(tmp: Path, size: int, chats: int, seconds: float, agents: int = 1) -> Run:
    ids = [FIRST_CHAT + n for n in range(chats)]
    async with FakeTelegram() as fake:
        config = {
            "state_dir": str(tmp / "state"),
            "agent": {"command": agent_command(tmp / "agent"), "pool_size": size},
            "telegram": {"token": fake.token, "base_url": fake.base_url,
                         "base_file_url": fake.base_file_url,
                         "allowed_users": [WARMUP_CHAT, *ids], "rate_limiter": False},
            # INFO: the "agent ready" lines say when every worker is up.
            "log": {"level": "INFO"},
        }
        split(config, tmp, size, ids, agents)
        daemon = await Daemon(write_config(tmp, config)).start()
        try:
            await daemon.wait_until(lambda: len(READY.findall(daemon.log)) >= size * agents,
                                    timeout=60, what=f"{size * agents} workers ready")
            await fake.wait_for_poll(timeout=30)
            fake.user_message(WARMUP_CHAT, WARMUP_CHAT, "warm-up", entities=[])
            await fake.wait_for(lambda: answer_time(fake, "warm-up"), "the warm-up answer", 30)

            tags = [f"pool{size}-{chat}" for chat in ids]
            start = time.monotonic()
            for chat, tag in zip(ids, tags, strict=True):
                fake.user_message(chat, chat, f"#slow={seconds:g} {tag}", entities=[])
            budget = 10 * math.ceil(chats / size) * seconds + 60
            await fake.wait_for(lambda: all(answer_time(fake, t) for t in tags),
                                "every answer", budget)
            last = max(t for t in (answer_time(fake, tag) for tag in tags) if t is not None)
            assert daemon.proc is not None
            rss = rss_kb(daemon.proc.pid)
        finally:
            await daemon.stop()
    return Run(size, chats, seconds, last - start, rss, agents)


async def main(chats: int, seconds: float, sizes: list[int], check: bool,
               agents: int = 1) -> int:
    runs = []
    with tempfile.TemporaryDirectory(prefix="picobridge-bench-pool-") as tmp:
        for size in sizes:
            folder = Path(tmp) / f"pool{size}"
            folder.mkdir()
            runs.append(await one_size(folder, size, chats, seconds, agents))
    who = f"{agents} agents, each a pool of the size shown, chats split evenly; " \
        if agents > 1 else ""
    print(f"Agent pool, {who}{chats} chats x one {seconds:g}s turn each (fake agent, #slow)")
    print(f"{'pool':>4}  {'wall s':>7}  {'ideal s':>7}  {'ratio':>6}  {'daemon RSS':>10}")
    for run in runs:
        print(f"{run.size:>4}  {run.wall:>7.2f}  {run.ideal:>7.2f}  {run.ratio:>5.2f}x  "
              f"{run.rss_kb / 1024:>7.1f} MB")
    worst = max(runs, key=lambda r: r.ratio)
    met = worst.ratio <= RATIO_TARGET
    verdict = f"worst ratio {worst.ratio:.2f}x at pool {worst.size} (target <= {RATIO_TARGET}x)"
    by_size = {run.size: run for run in runs}
    if 1 in by_size and max(by_size) > 1:
        top = by_size[max(by_size)]
        growth = (top.rss_kb - by_size[1].rss_kb) / 1024
        met = met and growth <= RSS_TARGET_MB
        verdict += (f"; daemon RSS at pool {top.size} - pool 1: {growth:+.1f} MB "
                    f"(target <= {RSS_TARGET_MB:g} MB)")
    print(f"{verdict}: targets {'met' if met else 'missed'}")
    return 0 if met or not check else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=1.0, help="per turn")
    parser.add_argument("--sizes", default="1,2,4,8", help="pool sizes, comma-separated")
    parser.add_argument("--agents", type=int, default=1, help="named agents, a pool each")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    sys.exit(asyncio.run(main(args.chats, args.seconds, sizes, args.check, args.agents)))
