"""Benchmark: Telegram end to end, picobridge against a minimal python-telegram-bot bot.

N chats each send M messages through the fake Bot API (tests/fakes/telegram/), one
at a time (the next once the previous is answered), to an instant fake agent. Three bots run
as subprocesses, each against its own fake, with no rate limiter:

- picobridge: `picobridge run` with its store, router and outbox (agent.max_in_flight = N);
- minimal: PTB's Application with run_polling-style Updater and concurrent handlers that
  forward each message to the same fake agent and send back its answer; no store at all.
  The targets are against this one.
- durable: as small, but keeping what picobridge keeps (each batch of updates committed with
  synchronous=FULL before the next getUpdates confirms it, each answer stored before it is
  sent and marked sent after, unsynced): its ratios tell what durability itself costs from
  what the rest of picobridge does.

All three run at once, idle in their long poll while another is measured, and take turns
round by round, so that a change in the machine's load (it is shared) falls on each alike;
the figures pool every round, and each round's ratios against the minimal bot are printed.

Latency is from the moment an update is queued in the fake until the answer's sendMessage
reaches it. Run: `python bench/telegram_e2e.py [--chats 20] [--messages 25] [--rounds 3]
[--check]`. Targets: picobridge's p50 within 1.25x of the minimal bot's, throughput at least
0.8x (`--check` exits 1 when one is missed). With every chat waiting for its answer, latency
is the number of chats over throughput, so the two ratios move together. Less bound to the
load: each bot process's CPU time per message (user + system, its threads, not the agent),
and the Bot API calls each makes per message.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.closed_loop import BaselineAgent, Load, Result, baseline_process  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.harness import Daemon, agent_command, cli_env, write_config  # noqa: E402


@dataclass
class Side:
    """One bot under test with its own fake: what it answered, what it cost, what it called."""

    name: str
    fake: FakeTelegram
    pid: int
    results: list[Result] = field(default_factory=list)
    cpu: float = 0.0  # user + system seconds of the bot's process during the measured rounds
    calls: Counter[str] = field(default_factory=Counter)  # API calls in the measured rounds

    async def send(self, chat: int, tag: str) -> None:
        self.fake.user_message(chat, chat, tag, entities=[])

    async def warm_up(self, chats: list[int]) -> None:
        await Load(self.fake, chats, "sendMessage", self.send).run(2, "warmup")

    async def round(self, chats: list[int], messages: int, label: str) -> Result:
        seen, cpu = len(self.fake.calls), process_cpu(self.pid)
        load = Load(self.fake, chats, "sendMessage", self.send)
        seconds, latencies = await load.run(messages, label)
        self.cpu += process_cpu(self.pid) - cpu
        self.calls.update(call.method for call in self.fake.calls[seen:])
        result = Result(self.name, len(latencies), seconds, latencies)
        self.results.append(result)
        return result

    def pooled(self) -> Result:
        return Result(self.name, sum(r.messages for r in self.results),
                      sum(r.seconds for r in self.results),
                      [x for r in self.results for x in r.latencies])

    def costs(self) -> str:
        count = sum(r.messages for r in self.results)
        calls = ", ".join(f"{method} {n / count:.2f}" for method, n in sorted(self.calls.items()))
        return (f"{self.name:<11} CPU {self.cpu / count * 1e6:6.0f} us per message (bot "
                f"process); API calls per message: {calls}")


def process_cpu(pid: int) -> float:
    """User + system seconds of a process so far, all its threads (not its children: the fake
    agent each bot drives is the same program on both sides)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def picobridge_side(tmp: Path, chats: list[int]) -> AsyncIterator[Side]:
    async with FakeTelegram() as fake:
        config = {
            "state_dir": str(tmp / "state"),
            "agent": {"command": agent_command(tmp / "agent", "--instant"),
                      "max_in_flight": len(chats)},
            "telegram": {"token": fake.token, "base_url": fake.base_url,
                         "base_file_url": fake.base_file_url, "allowed_users": chats,
                         "rate_limiter": False},
            "log": {"level": "WARNING"},
        }
        daemon = await Daemon(write_config(tmp, config)).start()
        try:
            await fake.wait_for_poll(timeout=30)
            assert daemon.proc is not None
            yield Side("picobridge", fake, daemon.proc.pid)
        finally:
            await daemon.stop()


@contextlib.asynccontextmanager
async def baseline_side(tmp: Path, durable: bool = False) -> AsyncIterator[Side]:
    async with FakeTelegram() as fake:
        env = cli_env({"BENCH_TOKEN": fake.token, "BENCH_BASE_URL": fake.base_url,
                       "BENCH_AGENT": json.dumps(agent_command(tmp / "agent", "--instant")),
                       "BENCH_DB": str(tmp / "durable.db")})
        flag = "--durable-bot" if durable else "--minimal-bot"
        async with baseline_process(str(Path(__file__)), flag, env, str(REPO)) as proc:
            await fake.wait_for_poll(timeout=30)
            yield Side("durable PTB" if durable else "minimal PTB", fake, proc.pid)


# -- the minimal bot (runs in its own process) -----------------------------------------------


async def minimal_bot() -> None:
    from telegram import Update
    from telegram.ext import Application, ContextTypes, MessageHandler, filters

    waiting: dict[str, deque[asyncio.Future[str]]] = {}

    def answered(session: str, text: str) -> None:
        queue = waiting.get(session)
        if queue:
            queue.popleft().set_result(text)

    agent = await BaselineAgent.start(json.loads(os.environ["BENCH_AGENT"]), answered)

    async def forward(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or message.text is None:
            return
        session = f"chat-{message.chat_id}"
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        waiting.setdefault(session, deque()).append(answer)
        await agent.ask(session, message.text)
        await context.bot.send_message(message.chat_id, await answer)

    app = (Application.builder().token(os.environ["BENCH_TOKEN"])
           .base_url(os.environ["BENCH_BASE_URL"]).concurrent_updates(True).build())
    app.add_handler(MessageHandler(filters.TEXT, forward))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with app:
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=30)
        await app.start()
        await stop.wait()
        await app.updater.stop()
        await app.stop()
    await agent.close()


async def durable_bot() -> None:
    """As small as the minimal bot, but keeping what picobridge keeps: each batch of updates
    committed (synchronous=FULL) before the next getUpdates confirms it, each answer stored
    before it is sent and marked sent after, both unsynced as picobridge's are. Nothing more:
    no dedupe, per-chat order, retries, access or sessions."""
    import aiosqlite
    from telegram import Bot
    from telegram.request import HTTPXRequest

    db = await aiosqlite.connect(os.environ["BENCH_DB"], isolation_level=None)
    for statement in ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                      "CREATE TABLE inbound(update_id INTEGER PRIMARY KEY, chat, text)",
                      "CREATE TABLE outbox(id INTEGER PRIMARY KEY, chat, text, sent DEFAULT 0)"):
        await db.execute(statement)
    # As Application.builder() sets it up for the minimal bot: a pool for the sends.
    bot = Bot(os.environ["BENCH_TOKEN"], base_url=os.environ["BENCH_BASE_URL"],
              request=HTTPXRequest(connection_pool_size=256))
    tasks: set[asyncio.Task[None]] = set()

    async def send(chat: int, text: str) -> None:
        [(row,)] = await on_thread(db, _unsynced, "INSERT INTO outbox(chat, text) "
                                   "VALUES (?, ?) RETURNING id", (chat, text))
        await bot.send_message(chat, text)
        await on_thread(db, _unsynced, "UPDATE outbox SET sent = 1 WHERE id = ?", (row,))

    def answered(session: str, text: str) -> None:
        task = asyncio.create_task(send(int(session.removeprefix("chat-")), text))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    agent = await BaselineAgent.start(json.loads(os.environ["BENCH_AGENT"]), answered)
    async with bot:
        polling = asyncio.create_task(durable_polling(bot, db, agent))
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        polling.cancel()
        await asyncio.gather(polling, *tasks, return_exceptions=True)
    await agent.close()
    await db.close()


async def durable_polling(bot: Any, db: Any, agent: BaselineAgent) -> None:
    offset = None
    while True:
        updates = await bot.get_updates(offset=offset, timeout=30)
        rows = [(u.update_id, m.chat_id, m.text) for u in updates
                if (m := u.message) is not None and m.text is not None]
        if rows:  # one commit per batch, as picobridge's group commit makes it
            await on_thread(db, _insert_inbound, rows)
        for _, chat, text in rows:
            await agent.ask(f"chat-{chat}", text)
        if updates:
            offset = updates[-1].update_id + 1


async def on_thread(db: Any, step: Callable[..., Any], *args: Any) -> Any:
    """`step(connection, *args)` in one go on aiosqlite's thread: no other statement can come
    in between (an open transaction would refuse the unsynced ones' PRAGMA)."""
    conn = db._conn
    return await db._execute(lambda: step(conn, *args))


def _insert_inbound(conn: Any, rows: list[tuple[int, int, str]]) -> None:
    conn.execute("BEGIN")
    conn.executemany("INSERT OR IGNORE INTO inbound VALUES (?, ?, ?)", rows)
    conn.execute("COMMIT")


def _unsynced(conn: Any, sql: str, args: tuple[object, ...]) -> list[Any]:
    """One statement committed without its own sync (the next synced commit carries it)."""
    conn.execute("PRAGMA synchronous=NORMAL")
    try:
        return list(conn.execute(sql, args).fetchall())
    finally:
        conn.execute("PRAGMA synchronous=FULL")


# -- main ------------------------------------------------------------------------------------


async def main(chats: int, messages: int, rounds: int, check: bool) -> int:
    ids = [10_000 + n for n in range(chats)]
    with tempfile.TemporaryDirectory(prefix="picobridge-bench-") as tmp:
        for name in ("pb", "min", "durable"):
            (Path(tmp) / name).mkdir()
        async with picobridge_side(Path(tmp) / "pb", ids) as ours, \
                baseline_side(Path(tmp) / "min") as base, \
                baseline_side(Path(tmp) / "durable", durable=True) as durable:
            sides = [ours, base, durable]
            for side in sides:
                await side.warm_up(ids)
            # Rounds take turns (the other bots idle in their long poll meanwhile), each
            # starting with the next bot, so that a change in the machine's load falls on
            # every side alike.
            for n in range(rounds):
                for side in sides[n % 3:] + sides[:n % 3]:
                    await side.round(ids, messages, f"run{n}")
    report(chats, messages, rounds, ours, base, durable)
    p50, rate = ratios(ours.pooled(), base.pooled())
    return 0 if (p50 <= 1.25 and rate >= 0.8) or not check else 1


def ratios(ours: Result, base: Result) -> tuple[float, float]:
    return (ours.percentile(0.5) / base.percentile(0.5), ours.throughput / base.throughput)


def report(chats: int, messages: int, rounds: int, ours: Side, base: Side,
           durable: Side) -> None:
    print(f"Telegram end to end, {chats} chats x {messages} messages x {rounds} rounds "
          f"(taking turns), instant fake agent; load average {os.getloadavg()[0]:.2f}")
    mine, theirs = ours.pooled(), base.pooled()
    for side in (ours, base, durable):
        print(side.pooled().line())
    for n, (a, b) in enumerate(zip(ours.results, base.results, strict=True)):
        p50, rate = ratios(a, b)
        print(f"round {n}    p50 latency {p50:.2f}x, throughput {rate:.2f}x")
    for side in (ours, base, durable):
        print(side.costs())
    p50, rate = ratios(mine, theirs)
    p99 = mine.percentile(0.99) / theirs.percentile(0.99)
    met = p50 <= 1.25 and rate >= 0.8
    print(f"ratios     p50 latency {p50:.2f}x (target <= 1.25x), p99 latency {p99:.2f}x, "
          f"throughput {rate:.2f}x (target >= 0.80x): targets {'met' if met else 'missed'}")
    p50, rate = ratios(mine, durable.pooled())
    print(f"vs durable p50 latency {p50:.2f}x, throughput {rate:.2f}x (against the durable "
          f"PTB bot: the cost of durability itself left out)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages", type=int, default=25, help="per chat and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per bot, alternating")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--minimal-bot", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--durable-bot", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.minimal_bot or args.durable_bot:
        asyncio.run(durable_bot() if args.durable_bot else minimal_bot())
        sys.exit(0)
    sys.exit(asyncio.run(main(args.chats, args.messages, args.rounds, args.check)))
