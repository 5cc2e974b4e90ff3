"""Benchmark: what a long streamed answer costs the other chats.

`picobridge run` against the fake Bot API (tests/fakes/telegram/) with telegram.stream on and
two agent workers (so chat B's turn never waits for chat A's). The fake agent streams every
answer as one-character text_deltas (`--delta-chars 1`). Chat A asks for an answer of N
characters, so its turn sends N deltas; as soon as A's streamed draft is on screen, chat B
sends a short message. Figures per N:

- chat B: B sends a short message, and the next one as soon as that is answered, for as long
  as A's turn lasts; each B latency runs from the message entering the fake until its answer
  reaches the fake (a few tens of milliseconds when nothing is in the way). The worst of them
  is what another chat loses while the bridge works through A's stream;
- chat A answered after: from A's message until its final answer (N deltas, then the answer).

Run: `python bench/streaming.py [--sizes 10000,100000,300000] [--slack]` (`--slack` measures
the same on the fake Slack, slack.stream on, Socket Mode).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes.slack import DEFAULT_USER, FakeSlack  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.harness import Daemon, agent_command, write_config  # noqa: E402

CHAT_A, CHAT_B = 5001, 5002
SLACK_A, SLACK_B = "U0BENCHA", "U0BENCHB"
WAIT = 900.0  # before the fix, 300k deltas took minutes


@dataclass
class Figures:
    size: int
    b_latencies: list[float]
    a_after: float

    def line(self) -> str:
        ordered = sorted(self.b_latencies)
        median = ordered[len(ordered) // 2]
        return (f"N = {self.size:>7,} deltas   chat B: {len(ordered):3d} answers, median "
                f"{median:7.3f} s, worst {ordered[-1]:7.3f} s   chat A answered after "
                f"{self.a_after:7.3f} s")


def common_config(tmp: Path) -> dict[str, Any]:
    return {
        "state_dir": str(tmp / "state"),
        "agent": {"command": agent_command(tmp / "agent", "--delta-chars", "1"),
                  "pool_size": 2, "turn_timeout": WAIT},
        "log": {"level": "WARNING"},
    }


async def until(check: Callable[[], bool], what: str) -> float:
    """Wait (polling the fake's records, which cost nothing to read) until `check()` holds;
    returns the moment it did."""
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.005)
    return time.monotonic()


async def one_run(size: int, send_a: Callable[[], Awaitable[None]],
                  send_b: Callable[[int], Awaitable[None]], draft_shown: Callable[[], bool],
                  a_done: Callable[[], bool], b_answered: Callable[[int], bool]) -> Figures:
    """A asks for its long answer; once its draft shows, B asks, again and again (each time
    after the previous answer), until A's answer is there."""
    a_sent = time.monotonic()
    await send_a()
    a_answered = asyncio.create_task(until(a_done, "chat A's answer"))
    await until(draft_shown, "chat A's streamed draft")
    latencies: list[float] = []
    while not a_answered.done() or not latencies:
        n = len(latencies) + 1
        b_sent = time.monotonic()
        await send_b(n)
        answered = functools.partial(b_answered, n)
        latencies.append(await until(answered, f"chat B's answer {n}") - b_sent)
    return Figures(size, latencies, await a_answered - a_sent)


async def bench_telegram(tmp: Path, size: int) -> Figures:
    async with FakeTelegram() as fake:
        config = common_config(tmp)
        config["telegram"] = {"token": fake.token, "base_url": fake.base_url,
                              "base_file_url": fake.base_file_url, "stream": True,
                              "allowed_users": [CHAT_A, CHAT_B], "rate_limiter": False}
        daemon = await Daemon(write_config(tmp, config)).start()
        try:
            await fake.wait_for_poll(timeout=30)

            async def send_a() -> None:
                fake.user_message(CHAT_A, CHAT_A, f"stream #huge={size}", entities=[])

            async def send_b(n: int) -> None:
                fake.user_message(CHAT_B, CHAT_B, f"ping {n}", entities=[])

            return await one_run(
                size, send_a, send_b,
                lambda: any((m.text or "").startswith("HUGE:")
                            for m in fake.sent_messages(CHAT_A)),
                lambda: any(m.kind == "document" or (m.text or "").endswith(":END")
                            for m in fake.sent_messages(CHAT_A)),
                lambda n: any(m.text == f"echo: ping {n}" for m in fake.sent_messages(CHAT_B)))
        finally:
            await daemon.stop(timeout=60)


async def bench_slack(tmp: Path, size: int) -> Figures:
    async with FakeSlack() as fake:
        config = common_config(tmp)
        config["slack"] = {"bot_token": fake.bot_token, "app_token": fake.app_token,
                           "base_url": fake.api_url, "stream": True,
                           "allowed_users": [DEFAULT_USER, SLACK_A, SLACK_B]}
        daemon = await Daemon(write_config(tmp, config)).start()
        try:
            await fake.wait_for_socket(timeout=30)
            chat_a, chat_b = fake.dm_channel(SLACK_A), fake.dm_channel(SLACK_B)

            async def send_a() -> None:
                await fake.send_event(fake.dm_message(f"stream #huge={size}", user=SLACK_A))

            async def send_b(n: int) -> None:
                await fake.send_event(fake.dm_message(f"ping {n}", user=SLACK_B))

            return await one_run(
                size, send_a, send_b,
                lambda: any(m.text.startswith("HUGE:") for m in fake.posted_messages(chat_a)),
                lambda: bool(fake.uploaded_files) or any(
                    m.text.endswith(":END") for m in fake.posted_messages(chat_a)),
                lambda n: any(m.text == f"echo: ping {n}" for m in fake.posted_messages(chat_b)))
        finally:
            await daemon.stop(timeout=60)


async def main(sizes: list[int], slack: bool) -> None:
    platform = "Slack (Socket Mode)" if slack else "Telegram"
    print(f"{platform}, stream on, 2 agent workers; chat A streams N one-character deltas, "
          "chat B writes (one message at a time) while A's turn lasts")
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="picobridge-bench-") as tmp:
            run = bench_slack if slack else bench_telegram
            print((await run(Path(tmp), size)).line(), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,300000",
                        help="comma-separated numbers of deltas")
    parser.add_argument("--slack", action="store_true", help="measure Slack instead")
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.slack))
