"""Benchmark: Telegram end to end, picobridge against a minimal python-telegram-bot bot.

N chats each send M messages through the fake Bot API (tests/fakes/telegram/), one
at a time (the next once the previous is answered), to an instant fake agent. Both bots run
as subprocesses against their own fake, with no rate limiter:

- picobridge: `picobridge run` with its store, router and outbox (agent.max_in_flight = N);
- minimal: PTB's Application with run_polling-style Updater and concurrent handlers that
  forward each message to the same fake agent and send back its answer; no store at all.

Latency is from the moment an update is queued in the fake until the answer's sendMessage
reaches it. Run: `python bench/telegram_e2e.py [--chats 20] [--messages 25] [--check]`.
Targets: picobridge's p50 within 1.25x of the minimal bot's, throughput at least 0.8x
(`--check` exits 1 when one is missed). With every chat waiting for its answer, latency is
the number of chats over throughput, so the two ratios move together.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.closed_loop import BaselineAgent, Load, Result, baseline_process  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.harness import Daemon, agent_command, cli_env, write_config  # noqa: E402


async def measure(fake: FakeTelegram, chats: list[int], messages: int, name: str) -> Result:
    async def send(chat: int, tag: str) -> None:
        fake.user_message(chat, chat, tag, entities=[])

    return await Load(fake, chats, "sendMessage", send).measure(messages, name)


async def bench_picobridge(tmp: Path, chats: list[int], messages: int) -> Result:
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
            return await measure(fake, chats, messages, "picobridge")
        finally:
            await daemon.stop()


async def bench_minimal(tmp: Path, chats: list[int], messages: int) -> Result:
    async with FakeTelegram() as fake:
        env = cli_env({"BENCH_TOKEN": fake.token, "BENCH_BASE_URL": fake.base_url,
                       "BENCH_AGENT": json.dumps(agent_command(tmp / "agent-min", "--instant"))})
        async with baseline_process(str(Path(__file__)), "--minimal-bot", env, str(REPO)):
            await fake.wait_for_poll(timeout=30)
            return await measure(fake, chats, messages, "minimal PTB")


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


# -- main ------------------------------------------------------------------------------------


async def main(chats: int, messages: int, check: bool) -> int:
    ids = [10_000 + n for n in range(chats)]
    with tempfile.TemporaryDirectory(prefix="picobridge-bench-") as tmp:
        for name in ("pb", "min"):
            (Path(tmp) / name).mkdir()
        ours = await bench_picobridge(Path(tmp) / "pb", ids, messages)
        base = await bench_minimal(Path(tmp) / "min", ids, messages)
    print(f"Telegram end to end, {chats} chats x {messages} messages, instant fake agent")
    print(ours.line())
    print(base.line())
    p50 = ours.percentile(0.5) / base.percentile(0.5)
    p99 = ours.percentile(0.99) / base.percentile(0.99)
    rate = ours.throughput / base.throughput
    met = p50 <= 1.25 and rate >= 0.8
    print(f"ratios     p50 latency {p50:.2f}x (target <= 1.25x), p99 latency {p99:.2f}x, "
          f"throughput {rate:.2f}x (target >= 0.80x): targets {'met' if met else 'missed'}")
    return 0 if met or not check else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages", type=int, default=25, help="per chat")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--minimal-bot", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.minimal_bot:
        asyncio.run(minimal_bot())
        sys.exit(0)
    sys.exit(asyncio.run(main(args.chats, args.messages, args.check)))
