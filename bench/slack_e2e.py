"""Benchmark: Slack end to end, picobridge against a minimal bolt app.

N chats (DMs of N users) each send M messages through the fake Slack's Socket Mode
(tests/fakes/slack/), one at a time (the next once the previous is answered), to an
instant fake agent (tests/fakes/fake_picobot.py --instant). Both apps run as subprocesses
against their own fake, the way bench/telegram_e2e.py runs the Telegram pair:

- picobridge: `picobridge run` in Socket Mode, with its store, router, outbox and reactions
  (agent.max_in_flight = N), once with the default reactions (a ✅ on every answered
  message: a second Web API call per message) and once with reactions turned off, which
  is what the minimal app does;
- minimal: a bolt AsyncApp on AsyncSocketModeHandler that acknowledges at once, writes each
  message to the same fake agent and posts its answer with chat.postMessage; no store, no
  deduplication, no reactions, no retries.

- durable: the minimal app plus what a bridge that loses nothing must do at the least:
  acknowledge an event only after storing it, store the answer before posting it and mark it
  sent after (SQLite through aiosqlite, one commit each). It shows what durability alone
  costs next to the minimal app. It runs twice: `durable` with synchronous=NORMAL (no commit
  waits for the disk: an OS crash or power cut can take back what was acknowledged), and
  `durable-full` with the syncs picobridge makes (synchronous=FULL for the stored event and
  the stored answer, the sent mark unsynced), the like-for-like baseline.

Latency is from the moment an event is handed to the fake's websocket until the answer's
chat.postMessage reaches the fake. Run: `python bench/slack_e2e.py [--chats 20]
[--messages 25]`. Targets: picobridge's p50 within 1.25x of the minimal app's, throughput at
least 0.8x; the exit status is 1 when a target is missed against the minimal app.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.closed_loop import BaselineAgent, Load, Result, baseline_process  # noqa: E402
from tests.fakes.slack import FakeSlack  # noqa: E402
from tests.harness import Daemon, agent_command, cli_env, write_config  # noqa: E402

LATENCY_TARGET = 1.25
THROUGHPUT_TARGET = 0.8


async def measure(fake: FakeSlack, users: list[str], messages: int, name: str) -> Result:
    async def send(user: str, tag: str) -> None:
        await fake.send_event(fake.dm_message(tag, user=user))

    return await Load(fake, users, "chat.postMessage", send).measure(messages, name)


# Like the minimal app: no reactions (each one is a Web API call of its own).
NO_REACTIONS = {"reaction_received": "", "reaction_done": "", "reaction_failed": ""}


async def bench_picobridge(tmp: Path, users: list[str], messages: int,
                           reactions: bool) -> Result:
    await asyncio.to_thread(tmp.mkdir, parents=True)
    async with FakeSlack(ack_timeout=30) as fake:
        config = {
            "state_dir": str(tmp / "state"),
            "agent": {"command": agent_command(tmp / "agent", "--instant"),
                      "max_in_flight": len(users)},
            "slack": {"bot_token": fake.bot_token, "app_token": fake.app_token,
                      "base_url": fake.api_url, "allowed_users": users,
                      **({} if reactions else NO_REACTIONS)},
            "log": {"level": "WARNING"},
        }
        daemon = await Daemon(write_config(tmp, config)).start()
        try:
            await fake.wait_for_socket(timeout=30)
            return await measure(fake, users, messages,
                                 "picobridge" if reactions else "no-react")
        finally:
            await daemon.stop()


async def bench_minimal(tmp: Path, users: list[str], messages: int,
                        durable: bool = False, sync: str = "NORMAL") -> Result:
    await asyncio.to_thread(tmp.mkdir, parents=True)
    async with FakeSlack(ack_timeout=30) as fake:
        env = cli_env({"BENCH_BOT_TOKEN": fake.bot_token, "BENCH_APP_TOKEN": fake.app_token,
                       "BENCH_API_URL": fake.api_url, "BENCH_DB": str(tmp / "min.db"),
                       "BENCH_SYNC": sync,
                       "BENCH_AGENT": json.dumps(agent_command(tmp / "agent-min", "--instant"))})
        flag = "--durable-app" if durable else "--minimal-app"
        async with baseline_process(str(Path(__file__)), flag, env, str(REPO)):
            await fake.wait_for_socket(timeout=30)
            name = "minimal" if not durable else "durable" if sync == "NORMAL" else \
                "durable-full"
            return await measure(fake, users, messages, name)


# -- the minimal app (runs in its own process) ----------------------------------------------


async def minimal_app(durable: bool) -> None:
    import aiohttp
    import aiosqlite
    from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
    from slack_bolt.app.async_app import AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient

    # One shared HTTP session, as picobridge has: the baseline is not handicapped by a new
    # connection per request.
    session = aiohttp.ClientSession()
    client = AsyncWebClient(token=os.environ["BENCH_BOT_TOKEN"],
                            base_url=os.environ["BENCH_API_URL"], session=session)
    tasks: set[asyncio.Task[Any]] = set()
    # The durable variant keeps what a careful bridge must: each event stored before it is
    # acknowledged, each answer stored before it is posted and marked sent after: three
    # commits per message, one statement each, nothing more (no dedupe, order or retries).
    db = await aiosqlite.connect(os.environ.get("BENCH_DB", ":memory:"), isolation_level=None)
    await db.execute("PRAGMA journal_mode=WAL")
    sync = os.environ.get("BENCH_SYNC", "NORMAL")
    await db.execute(f"PRAGMA synchronous={sync}")
    await db.execute("CREATE TABLE IF NOT EXISTS inbound(ts TEXT PRIMARY KEY, text TEXT)")
    await db.execute("CREATE TABLE IF NOT EXISTS outbox(id INTEGER PRIMARY KEY, channel TEXT,"
                     " text TEXT, sent INTEGER DEFAULT 0)")

    async def post(channel: str, text: str) -> None:
        if not durable:
            await client.chat_postMessage(channel=channel, text=text)
            return
        rows = await db.execute_fetchall(
            "INSERT INTO outbox(channel, text) VALUES (?, ?) RETURNING id", (channel, text))
        await client.chat_postMessage(channel=channel, text=text)
        await mark_sent(next(iter(rows))[0])

    async def mark_sent(row: int) -> None:
        if sync == "NORMAL":
            await db.execute("UPDATE outbox SET sent = 1 WHERE id = ?", (row,))
            return
        conn = db._conn

        def unsynced() -> None:  # as picobridge marks a reply sent: without its own sync
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("UPDATE outbox SET sent = 1 WHERE id = ?", (row,))
            conn.execute("PRAGMA synchronous=FULL")

        await db._execute(unsynced)  # type: ignore[no-untyped-call]

    def answered(channel: str, text: str) -> None:
        task = asyncio.create_task(post(channel, text))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    agent = await BaselineAgent.start(json.loads(os.environ["BENCH_AGENT"]), answered)

    async def forward(event: dict[str, Any]) -> None:
        if event.get("bot_id") or event.get("subtype"):
            return
        if durable:
            await db.execute("INSERT OR IGNORE INTO inbound(ts, text) VALUES (?, ?)",
                             (event.get("ts"), event.get("text", "")))
        await agent.ask(event["channel"], event.get("text", ""))

    # Durable: acknowledge only after the listener (and so the commit) has run.
    app = AsyncApp(client=client, name="minimal", logger=logging.getLogger("slack_bolt.min"),
                   process_before_response=durable)
    app.event("message")(forward)
    handler = AsyncSocketModeHandler(app, os.environ["BENCH_APP_TOKEN"], web_client=client)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await handler.connect_async()  # type: ignore[no-untyped-call]
    await stop.wait()
    await handler.close_async()  # type: ignore[no-untyped-call]
    await agent.close()
    await session.close()
    await db.close()


# -- main ------------------------------------------------------------------------------------


async def main(chats: int, messages: int) -> int:
    users = [f"U0BENCH{n:04d}" for n in range(chats)]
    with tempfile.TemporaryDirectory(prefix="picobridge-bench-") as tmp:
        ours = await bench_picobridge(Path(tmp) / "pb", users, messages, reactions=True)
        plain = await bench_picobridge(Path(tmp) / "pb-plain", users, messages,
                                       reactions=False)
        base = await bench_minimal(Path(tmp) / "min", users, messages)
        durable = await bench_minimal(Path(tmp) / "durable", users, messages, durable=True)
        full = await bench_minimal(Path(tmp) / "durable-full", users, messages, durable=True,
                                   sync="FULL")
    print(f"Slack end to end (Socket Mode), {chats} chats x {messages} messages, "
          "instant fake agent")
    print(ours.line() + "  (defaults: ✅ reaction on every message)")
    print(plain.line() + "  (reactions off, like the minimal app)")
    print(base.line())
    print(durable.line() + "  (minimal app + ack after commit, reply stored before posting)")
    print(full.line() + "  (durable, synced as picobridge syncs)")
    met = True
    for label, result, against in (("defaults", ours, base), ("no-react", plain, base),
                                   ("no-react vs durable", plain, durable),
                                   ("no-react vs durable-full", plain, full)):
        p50 = result.percentile(0.5) / against.percentile(0.5)
        p99 = result.percentile(0.99) / against.percentile(0.99)
        rate = result.throughput / against.throughput
        if against is base:
            met = met and p50 <= LATENCY_TARGET and rate >= THROUGHPUT_TARGET
        print(f"ratios {label:<19} p50 latency {p50:.2f}x (target <= {LATENCY_TARGET}x), "
              f"p99 latency {p99:.2f}x, throughput {rate:.2f}x "
              f"(target >= {THROUGHPUT_TARGET:.2f}x)")
    return 0 if met else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages", type=int, default=25, help="per chat")
    parser.add_argument("--minimal-app", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--durable-app", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.minimal_app or args.durable_app:
        logging.basicConfig(level=logging.WARNING)
        asyncio.run(minimal_app(durable=args.durable_app))
        sys.exit(0)
    sys.exit(asyncio.run(main(args.chats, args.messages)))
