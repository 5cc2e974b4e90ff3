"""Benchmark: memory of an idle `picobridge run`, and its growth per chat.

One daemon with both adapters on the fakes (tests/fakes/telegram/ and tests/fakes/slack/,
Socket Mode) and the instant fake agent. Its resident set (VmRSS in /proc/<pid>/status, the
daemon's process only, not the agent's) is read once it is idle (connected to both platforms,
agent ready, no message yet), after each wave of chats, and at the end, once N distinct chats
(half Telegram private chats, half Slack DMs; `--only` puts them all on one platform while
both adapters still run) have each sent one message and got its reply and Slack reactions.
The users are let in beforehand the way `picobridge access allow` does it (Store.set_access),
so the config stays small and the idle figure honest.

`--platforms telegram` runs the daemon with Telegram alone (Slack not configured at all), for
the idle figure of a Telegram-only bridge. The daemon runs with telegram.rate_limiter off, so
that 10,000 chats are not paced at 30 replies a second; `--rate-limiter` turns it on as a
config does by default (give it a few hundred `--chats`).

Run: `python bench/memory.py [--chats 10000] [--wave 500] [--only telegram|slack]
[--platforms telegram|telegram,slack] [--rate-limiter]`.
Targets (issue 21): idle <= 62 MB with both platforms, <= 50 MB with Telegram alone (80 MB
otherwise); (after - idle) / chats <= 2 KB; the exit status is 1 when one is missed.
The growth after the first wave is printed too: it leaves out one-time costs (lazy
imports, SQLite's page cache filling up, the allocators' high-water mark from the first burst
of concurrent chats), so it is closer to what each further chat costs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from picobridge.store import Store  # noqa: E402
from tests.fakes.slack import FakeSlack  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.harness import Daemon, base_config, write_config  # noqa: E402

IDLE_TARGET_MB = 80.0
IDLE_TARGETS_MB = {"telegram": 50.0, "telegram,slack": 62.0}
PER_CHAT_TARGET_KB = 2.0
TELEGRAM_FIRST_ID = 500_000
REPLY_TIMEOUT = 300.0


def status_kb(pid: int, field: str) -> int:
    """A `field:  1234 kB` line of /proc/<pid>/status, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def mb(kb: int) -> str:
    return f"{kb / 1024:.1f} MB"


def where(pid: int) -> str:
    """Where the resident set sits: anonymous memory (Python's objects and code, malloc's
    heaps, SQLite's page cache) and file pages (the interpreter's and extensions' code)."""
    anon, file = status_kb(pid, "RssAnon"), status_kb(pid, "RssFile")
    return f"anon {mb(anon)}, file {mb(file)}, {status_kb(pid, 'Threads')} threads"


async def grant(db: Path, telegram: list[int], slack: list[str]) -> None:
    """Let the users in as `picobridge access allow` does, before the daemon starts."""
    store = await Store.open(db)
    try:
        for chat in telegram:
            await store.set_access("telegram", str(chat), True)
        for user in slack:
            await store.set_access("slack", user, True)
    finally:
        await store.close()


class Load:
    def __init__(self, telegram: FakeTelegram, slack: FakeSlack) -> None:
        self.telegram = telegram
        self.slack = slack
        self.telegram_sent = 0
        self.slack_sent = 0

    def telegram_replies(self) -> int:
        return len(self.telegram.sent_messages(include_deleted=True))

    def slack_replies(self) -> int:
        return len(self.slack.messages)

    async def wave(self, telegram: list[int], slack: list[str]) -> None:
        """One message from each of these chats; returns once every one is answered."""
        for chat in telegram:
            self.telegram.user_message(chat, chat, f"hello from {chat}", entities=[])
        for user in slack:
            await self.slack.send_event(self.slack.dm_message(f"hello from {user}", user=user))
        self.telegram_sent += len(telegram)
        self.slack_sent += len(slack)
        await asyncio.gather(
            self.telegram.wait_for(
                lambda: self.telegram_replies() >= self.telegram_sent,
                f"{self.telegram_sent} Telegram replies",
                REPLY_TIMEOUT,
            ),
            self.slack.wait_for(
                lambda: self.slack_replies() >= self.slack_sent,
                f"{self.slack_sent} Slack replies",
                REPLY_TIMEOUT,
            ),
        )

    async def settled(self, slack_done: str = "white_check_mark") -> None:
        """Every Slack message carries its done reaction (the last thing the daemon does)."""

        def done() -> bool:
            marked = sum(
                1 for r in self.slack.reaction_log if r.action == "add" and r.name == slack_done
            )
            return marked >= self.slack_sent

        await self.slack.wait_for(done, "every Slack message marked done", REPLY_TIMEOUT)


async def main(chats: int, wave: int, only: str | None, platforms: str,
               rate_limiter: bool = False) -> int:
    if platforms == "telegram":
        only = "telegram"
    half = {"telegram": chats, "slack": 0}.get(only or "", chats // 2)
    telegram_chats = [TELEGRAM_FIRST_ID + n for n in range(half)]
    slack_users = [f"U0MEM{n:06d}" for n in range(chats - half)]
    with tempfile.TemporaryDirectory(prefix="picobridge-memory-") as tmp_name:
        tmp = Path(tmp_name)
        async with FakeTelegram() as telegram, FakeSlack() as slack:
            config = base_config(tmp, "--instant", max_in_flight=8)
            config["log"] = {"level": "INFO"}
            config["telegram"] = {
                "token": telegram.token,
                "base_url": telegram.base_url,
                "base_file_url": telegram.base_file_url,
                "rate_limiter": rate_limiter,
            }
            if "slack" in platforms:
                config["slack"] = {
                    "bot_token": slack.bot_token,
                    "app_token": slack.app_token,
                    "base_url": slack.api_url,
                }
            path = write_config(tmp, config)
            started = time.monotonic()
            await grant(Path(config["state_dir"]) / "picobridge.db", telegram_chats, slack_users)
            print(f"granted {chats} users in {time.monotonic() - started:.1f}s")

            daemon = await Daemon(path).start()
            try:
                assert daemon.proc is not None
                pid = daemon.proc.pid
                await daemon.wait_for_log(r"connected to Telegram as @", timeout=60)
                await daemon.wait_for_log(r"agent ready pid=", timeout=60)
                if "slack" in platforms:
                    await slack.wait_for_socket(timeout=60)
                await telegram.wait_for_poll(timeout=60)
                idle = status_kb(pid, "VmRSS")
                idle_where = where(pid)
                print(f"idle: VmRSS {mb(idle)} ({idle_where})")

                load = Load(telegram, slack)
                checkpoints: list[tuple[int, int]] = []
                started = time.monotonic()
                # Telegram and Slack chats alternate, so every wave has half of each.
                everyone: list[int | str] = []
                for n in range(max(len(telegram_chats), len(slack_users))):
                    everyone += telegram_chats[n : n + 1]
                    everyone += slack_users[n : n + 1]
                for start in range(0, chats, wave):
                    part = everyone[start : start + wave]
                    await load.wave(
                        [c for c in part if isinstance(c, int)],
                        [c for c in part if isinstance(c, str)],
                    )
                    done = load.telegram_sent + load.slack_sent
                    rss = status_kb(pid, "VmRSS")
                    checkpoints.append((done, rss))
                    print(
                        f"{done:>6} chats answered: VmRSS {mb(rss)} "
                        f"({(rss - idle) / done:.2f} KB per chat so far)"
                    )
                if load.slack_sent:
                    await load.settled()
                elapsed = time.monotonic() - started
                after = status_kb(pid, "VmRSS")
                after_where = where(pid)
                peak = status_kb(pid, "VmHWM")
            finally:
                code = await daemon.stop(timeout=60)

    served = load.telegram_sent + load.slack_sent
    per_chat = (after - idle) / served
    first_done, first_rss = checkpoints[0]
    marginal = (after - first_rss) / (served - first_done) if served > first_done else per_chat
    print(
        f"\n{served} chats ({load.telegram_sent} Telegram, {load.slack_sent} Slack), one "
        f"message each, answered in {elapsed:.1f}s; daemon exit code {code}"
    )
    target = IDLE_TARGETS_MB.get(platforms, IDLE_TARGET_MB)
    print(f"platforms  {platforms}" + ("  (rate limiter on)" if rate_limiter else ""))
    print(f"idle RSS   {mb(idle):>9}  (target <= {target:.0f} MB; {idle_where})")
    print(f"after RSS  {mb(after):>9}  (peak {mb(peak)}; {after_where})")
    print(
        f"per chat   {per_chat:7.2f} KB  (target <= {PER_CHAT_TARGET_KB:g} KB); after the "
        f"first {first_done} chats: {marginal:.2f} KB per further chat"
    )
    ok = idle / 1024 <= target and per_chat <= PER_CHAT_TARGET_KB and code == 0
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=10_000)
    parser.add_argument("--wave", type=int, default=500, help="chats writing at once")
    parser.add_argument(
        "--only",
        choices=("telegram", "slack"),
        help="all chats on one platform (both adapters still run), to tell which one grows",
    )
    parser.add_argument(
        "--platforms",
        choices=("telegram", "telegram,slack"),
        default="telegram,slack",
        help="the platforms the daemon runs",
    )
    parser.add_argument("--rate-limiter", action="store_true",
                        help="telegram.rate_limiter on, as by default (sends paced at 30/s)")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.chats, args.wave, args.only, args.platforms,
                              args.rate_limiter)))
