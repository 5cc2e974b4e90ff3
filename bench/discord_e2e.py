"""Benchmark: Discord end to end, `picobridge run` against the fake Discord (tests/fakes/discord)
and an instant fake agent.

Closed loop: N people each send M DMs, one at a time (the next once the previous is answered);
latency is from the moment the fake dispatches MESSAGE_CREATE until the answer reaches its
REST API. Catch-up: the daemon is stopped, each person writes B messages, and the time from the
new gateway session to the last of them answered is measured (history reads, dedupe, turns).
Run: `python bench/discord_e2e.py [--people 10] [--messages 10] [--backlog 10]`. It prints
figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.e2e.discord_support import discord_config, online  # noqa: E402
from tests.fakes.discord import FakeDiscord  # noqa: E402
from tests.harness import Daemon  # noqa: E402


async def closed_loop(fake: FakeDiscord, people: list[str], messages: int) -> list[float]:
    latencies: list[float] = []

    async def person(user: str) -> None:
        channel = fake.dm_channel(user).id
        for n in range(messages):
            tag = f"m{user[-3:]}-{n}"
            start = time.monotonic()
            fake.dm(tag, user)
            await fake.wait_for_reply(channel, f"echo: {tag}", timeout=120)
            latencies.append(time.monotonic() - start)

    await asyncio.gather(*(person(user) for user in people))
    return latencies


async def main(args: argparse.Namespace) -> None:
    people = [str(600000000000000000 + n) for n in range(args.people)]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        async with FakeDiscord() as fake:
            for user in people:
                fake.add_user(user, f"p{user[-3:]}")
            config = discord_config(tmp, fake, "--instant", allowed_users=people,
                                    agent={"max_in_flight": args.people},
                                    reaction_received="", reaction_done="")
            async with Daemon(config) as daemon:
                await online(daemon, fake)
                started = time.monotonic()
                latencies = await closed_loop(fake, people, args.messages)
                took = time.monotonic() - started
            total = len(latencies)
            p50 = statistics.median(latencies) * 1000
            p95 = statistics.quantiles(latencies, n=20)[18] * 1000
            print(f"closed loop: {args.people} people x {args.messages} DMs = {total} in "
                  f"{took:.1f}s, {total / took:.1f} msg/s, p50 {p50:.0f} ms, p95 {p95:.0f} ms")
            for n in range(args.backlog):
                for user in people:
                    fake.say(fake.dm_channel(user).id, f"b{user[-3:]}-{n}", user, deliver=False)
            backlog = args.backlog * len(people)
            last = [f"b{u[-3:]}-{args.backlog - 1}" for u in people]
            async with Daemon(config) as daemon:
                await online(daemon, fake, sessions=2)
                started = time.monotonic()
                await fake.wait_for(lambda: all(any(t in m.content for m in fake.sent)
                                                for t in last), "the backlog answered", 300)
                took = time.monotonic() - started
            print(f"catch-up: {backlog} messages missed in {len(people)} DMs answered "
                  f"{took:.1f}s after the new session ({backlog / took:.1f} msg/s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--people", type=int, default=10)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--backlog", type=int, default=10)
    asyncio.run(main(parser.parse_args()))
