"""Soak: 2,000 messages from 50 chats, Telegram and Slack at once, through one `picobridge run`
while everything around it misbehaves.

25 Telegram private chats and 25 Slack DMs each send 40 numbered messages ("c07 m012") in bursts
of 1 to 6 (the next burst once the chat's earlier messages are all answered), so messages queue
and several of one chat may be answered together: coalescing (on by default) turns them into one
turn whose echo holds all of them, which is why replies are parsed for every "cNN mNNN" token
they contain. Meanwhile:

- the agent crashes (#crash-once) on 8 and hangs (#hang-once) on 4 messages of a seeded random
  sample, with a 3 s turn timeout, 1 s pings and up to MAX_IN_FLIGHT turns at once;
- both platforms answer every FLOOD_EVERY-th send with 429 (retry after 1 s), and every
  FIVE_XX_EVERY answers a few calls (sends, and Telegram's getUpdates) get a 5xx;
- the daemon is SIGKILLed three times, after about 25 %, 50 % and 75 % of the messages were
  answered, and started again each time with the same config.
- another process holds the database's write lock (at about 38 %), then the disk under
  state_dir (a 64 MB tmpfs) fills up (at about 62 %), each until the daemon reports it cannot
  store and 2 s more.

At the end: every message answered in its own chat, in order (the first appearance of each
token in the chat's replies increases), nothing answered in the wrong chat, no turn given up,
no message left waiting in the store, and duplicates only of the kind a SIGKILL causes: the
reply being delivered at the kill sent again, verbatim, right after (at most one per chat per
kill, so at most 3 x 50 replies; see `check_duplicates`).

Run with `pytest -s -m slow tests/reliability` to see the figures. The last test of this file
is the minimal reproduction of a router race the soak found.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import shutil
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from picobridge.agent.port import Reply as AgentReply
from picobridge.contract import ChatRef, InboundMessage, ReplyKind
from picobridge.core.outbox import Outbox
from picobridge.core.router import Router
from picobridge.store import Store, StoredReply
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.harness import (
    SHORT_BUSY_TIMEOUT,
    AgentJournal,
    Daemon,
    base_config,
    run_cli,
    write_config,
)
from tests.reliability.soak_stages import first_appearances, stage_report
from tests.storage_faults import fill, small_filesystem, write_lock
from tests.unit.test_router import Recorder, ScriptedAgent

SEED = 20240917
TELEGRAM_CHATS = 25
SLACK_CHATS = 25
PER_CHAT = 40
MAX_BURST = 6
CRASHES = 8
HANGS = 4
KILL_AT = (0.25, 0.50, 0.75)
# Storage faults while messages flow: another process holds the database's write lock past
# the daemon's busy timeout, and later the disk under state_dir fills up; both pass. Each lasts
# until the daemon has said it cannot store (a message, at intake, or an answer: when every
# chat waits for its answers nobody sends), then HOLD seconds more: a fixed duration alone
# could fall in a lull (every chat waiting on a restarting agent) and test nothing.
LOCK_AT, FULL_AT, HOLD = 0.38, 0.62, 2.0
INTAKE_OUTAGE = "cannot store"
ANSWER_KEPT = "storing the answer failed"
OUTAGE_TIMEOUT = 60.0
STATE_DISK = "64m"
MAX_IN_FLIGHT = 4
FLOOD_EVERY = 20
FIVE_XX_EVERY = 200
BURST_TIMEOUT = 150.0
KILL_GRACE = 0.25
TOKEN = re.compile(r"\bc(\d{2}) m(\d{3})\b")
TELEGRAM_BASE_ID = 710_000
# The bridge's line for a 429 from Telegram: Telegram's are counted where the bridge saw them,
# Slack's where the fake answered them (Call.status; slack-sdk retries some 429s itself).
TELEGRAM_429_LOG = "Telegram flood control"


@dataclass(frozen=True)
class Posted:
    text: str
    numbers: tuple[int, ...]  # this chat's message numbers it answers
    at: float  # when the fake recorded it (time.monotonic())


@dataclass
class Chat:
    number: int
    platform: str  # "telegram" or "slack"
    address: str  # Telegram chat (= user) id, or Slack user id
    channel: str  # where the bot answers: the Telegram chat id, or the Slack DM channel
    sent: int = 0
    # Every reply the bot posted here, in order.
    replies: list[Posted] = field(default_factory=list)
    answered: set[int] = field(default_factory=set)

    def text(self, index: int, directive: str | None) -> str:
        base = f"c{self.number:02d} m{index:03d}"
        return f"{base} {directive}" if directive else base


class Replies:
    """The bot's posts on both fakes, parsed as they arrive, behind one condition to wait on."""

    def __init__(self, telegram: FakeTelegram, slack: FakeSlack, chats: list[Chat]) -> None:
        self.telegram = telegram
        self.slack = slack
        self.by_channel = {chat.channel: chat for chat in chats}
        self.changed = asyncio.Condition()
        self.answered = 0  # distinct messages answered, all chats
        self.foreign: list[str] = []  # a chat's token in another chat's reply
        self.untagged: list[str] = []  # replies answering no message (errors, notices)
        self.unknown: list[str] = []  # posts to a chat the soak never wrote in
        self._telegram_seen = 0
        self._slack_seen = 0

    def take(self, channel: str, text: str) -> None:
        chat = self.by_channel.get(channel)
        if chat is None:
            self.unknown.append(f"{channel}: {text[:200]}")
            return
        own: list[int] = []
        for number, index in TOKEN.findall(text):
            if int(number) == chat.number:
                own.append(int(index))
            else:
                self.foreign.append(f"c{number} m{index} answered in {channel}")
        if not own:
            self.untagged.append(f"{channel}: {text[:200]}")
            return
        chat.replies.append(Posted(text, tuple(own), time.monotonic()))
        fresh = set(own) - chat.answered
        chat.answered |= fresh
        self.answered += len(fresh)

    async def follow(self) -> None:
        await asyncio.gather(self._follow_telegram(), self._follow_slack())

    def _telegram_new(self) -> bool:
        return len(self.telegram.sent_messages(include_deleted=True)) > self._telegram_seen

    def _slack_new(self) -> bool:
        return len(self.slack.messages) > self._slack_seen

    def catch_up(self) -> None:
        """Take what the fakes recorded and the followers have not looked at yet."""
        fresh_telegram = self.telegram.sent_messages(include_deleted=True)[self._telegram_seen :]
        self._telegram_seen += len(fresh_telegram)
        for message in fresh_telegram:
            self.take(str(message.chat_id), message.text or message.caption or "")
        fresh_slack = self.slack.messages[self._slack_seen :]
        self._slack_seen += len(fresh_slack)
        for posted in fresh_slack:
            self.take(posted.channel, posted.text)

    async def _follow_telegram(self) -> None:
        while True:
            try:
                await self.telegram.wait_for(self._telegram_new, timeout=3600)
            except TimeoutError:
                continue
            self.catch_up()
            await self._notify()

    async def _follow_slack(self) -> None:
        while True:
            try:
                await self.slack.wait_for(self._slack_new, timeout=3600)
            except TimeoutError:
                continue
            self.catch_up()
            await self._notify()

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def reached(self, count: int) -> Callable[[], bool]:
        return lambda: self.answered >= count

    async def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            async with asyncio.timeout(timeout), self.changed:
                await self.changed.wait_for(predicate)
        except TimeoutError:
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for {what} "
                f"({self.answered} messages answered so far)"
            ) from None


def make_chats(slack: FakeSlack) -> list[Chat]:
    chats = []
    for n in range(TELEGRAM_CHATS):
        chat_id = str(TELEGRAM_BASE_ID + n)
        chats.append(Chat(n, "telegram", chat_id, chat_id))
    for n in range(TELEGRAM_CHATS, TELEGRAM_CHATS + SLACK_CHATS):
        user = f"U0SOAK{n:02d}"
        chats.append(Chat(n, "slack", user, slack.dm_channel(user)))
    return chats


def plan_faults(rng: random.Random, chats: list[Chat]) -> dict[tuple[int, int], str]:
    """Which messages make the agent crash or hang: in different chats, anywhere in them."""
    chosen = rng.sample(chats, CRASHES + HANGS)
    return {
        (chat.number, rng.randrange(PER_CHAT)): "#crash-once" if k < CRASHES else "#hang-once"
        for k, chat in enumerate(chosen)
    }


def plan_bursts(rng: random.Random, alone: set[int]) -> list[int]:
    """Burst sizes for one chat's messages; the messages in `alone` are a burst of their own.

    The fake agent's -once directives fire once per distinct text, and a coalesced turn's text
    depends on what else was queued when it was dispatched and when it is retried. Alone, a
    faulty message is always the whole turn, so each directive strikes exactly once.
    """
    sizes = []
    start = 0
    while start < PER_CHAT:
        size = min(PER_CHAT - start, rng.randint(1, MAX_BURST))
        inside = sorted(i for i in alone if start <= i < start + size)
        if inside:
            size = max(1, inside[0] - start)  # up to the faulty one, or just it
        sizes.append(size)
        start += size
    return sizes


def soak_config(tmp: Path, telegram: FakeTelegram, slack: FakeSlack, chats: list[Chat]) -> Path:
    config = base_config(tmp, turn_timeout=3, max_in_flight=MAX_IN_FLIGHT)
    config["log"] = {"level": "INFO"}
    config.update(SHORT_BUSY_TIMEOUT)
    config["telegram"] = {
        "token": telegram.token,
        "base_url": telegram.base_url,
        "base_file_url": telegram.base_file_url,
        "allowed_users": [int(c.address) for c in chats if c.platform == "telegram"],
        "rate_limiter": False,
    }
    config["slack"] = {
        "bot_token": slack.bot_token,
        "app_token": slack.app_token,
        "base_url": slack.api_url,
        "allowed_users": [c.address for c in chats if c.platform == "slack"],
    }
    return write_config(tmp, config)


async def converse(
    chat: Chat,
    bursts: list[int],
    faults: dict[tuple[int, int], str],
    send: Callable[[Chat, str], Awaitable[None]],
    replies: Replies,
) -> None:
    """One user: a burst of messages, then wait until all of them are answered, and again."""
    for size in bursts:
        for _ in range(size):
            await send(chat, chat.text(chat.sent, faults.get((chat.number, chat.sent))))
            chat.sent += 1
        await replies.wait(
            lambda: len(chat.answered) >= chat.sent,
            BURST_TIMEOUT,
            f"c{chat.number:02d}'s first {chat.sent} messages to be answered",
        )


async def platform_errors(
    telegram: FakeTelegram, slack: FakeSlack, replies: Replies, injected: dict[str, int]
) -> None:
    """Every FIVE_XX_EVERY answers, a round of 5xx on both platforms."""
    total = (TELEGRAM_CHATS + SLACK_CHATS) * PER_CHAT
    for milestone in range(FIVE_XX_EVERY // 2, total, FIVE_XX_EVERY):
        await replies.wait(replies.reached(milestone), 3600, f"{milestone} answers")
        telegram.fail_next("sendMessage", 502)
        telegram.fail_next("getUpdates", 500)
        # slack-sdk retries a 5xx twice itself; six in a row let some reply exhaust that and
        # reach the outbox's own retries, whichever chats' sends they hit.
        slack.fail_next("chat.postMessage", 503, times=6)
        injected["telegram"] += 2
        injected["slack"] += 6


def check_order(chat: Chat, retried: set[int] | frozenset[int] = frozenset()) -> list[str]:
    """Problems with this chat's answers: missing, unknown or out-of-order message numbers.

    `retried`: messages Slack delivered again because their first delivery was never
    acknowledged (it went to a daemon that was killed first). Slack retries only after its
    acknowledgement timeout, so newer messages of the chat may reach the restarted daemon,
    and be answered, first. The bridge puts a retried message ahead of newer ones still
    queued, but cannot un-answer what already went out: such a message must still be
    answered, only its place in the order is not checked.
    """
    problems = []
    first_seen: list[int] = []
    seen: set[int] = set()
    for reply in chat.replies:
        for number in reply.numbers:
            if number not in seen:
                seen.add(number)
                first_seen.append(number)
    missing = sorted(set(range(PER_CHAT)) - seen)
    if missing:
        problems.append(f"c{chat.number:02d} never answered: {missing}")
    extra = sorted(seen - set(range(PER_CHAT)))
    if extra:
        problems.append(f"c{chat.number:02d} answered messages never sent: {extra}")
    in_order = [n for n in first_seen if n not in retried]
    if in_order != sorted(in_order):
        problems.append(f"c{chat.number:02d} answered out of order: {first_seen}")
    return problems


def retried_messages(slack: FakeSlack) -> dict[int, set[int]]:
    """Chat number -> message numbers the fake Slack delivered more than once."""
    retried: dict[int, set[int]] = {}
    for delivery in slack.redeliveries:
        payload = delivery.envelope.get("payload")
        event = payload.get("event") if isinstance(payload, dict) else None
        text = str(event.get("text", "")) if isinstance(event, dict) else ""
        match = re.match(r"c(\d+) m(\d+)", text)
        if match:
            retried.setdefault(int(match[1]), set()).add(int(match[2]))
    return retried


def check_duplicates(chat: Chat, kills: list[float]) -> tuple[int, int, list[str]]:
    """(replies sent twice, message numbers answered twice, problems) for one chat.

    The only duplicate a SIGKILL may cause: the outbox delivers one reply per chat at a time
    and marks it sent once the platform accepted it; a kill between the two leaves it pending
    and the next run sends it again, before anything newer for that chat. So a duplicate must
    repeat, verbatim, the reply just before it, with a kill between the two; that is at most
    one per chat per kill. A reply mixing answered and new messages would be a turn run again
    after its answer was stored, which the store's atomic settle rules out.
    """
    repeats = 0
    problems = []
    seen: set[int] = set()
    answered_twice: set[int] = set()
    previous: Posted | None = None
    for reply in chat.replies:
        again = [n for n in reply.numbers if n in seen]
        answered_twice.update(again)
        if again:
            verbatim = previous is not None and previous.text == reply.text
            # The killed daemon's last post may reach the fake's books a moment after the
            # kill; the next daemon needs far longer than KILL_GRACE to post anything.
            across_kill = previous is not None and any(
                previous.at <= kill + KILL_GRACE and reply.at > kill for kill in kills
            )
            if verbatim and across_kill:
                repeats += 1
            else:
                problems.append(
                    f"c{chat.number:02d}: {again} answered again in {reply.text[:120]!r}"
                    + ("" if verbatim else ", which does not repeat the reply before it")
                    + ("" if across_kill else ", with no SIGKILL between the two")
                )
        seen.update(reply.numbers)
        previous = reply
    if repeats > len(kills):
        problems.append(
            f"c{chat.number:02d}: {repeats} replies sent twice, more than one per "
            f"SIGKILL ({len(kills)})"
        )
    return repeats, len(answered_twice), problems


async def outage_reported(daemon: Daemon, fault: str) -> None:
    """Keep a storage fault until the daemon reports a new outage, then HOLD seconds more."""
    def reports() -> int:
        return sum(INTAKE_OUTAGE in line or ANSWER_KEPT in line for line in daemon.log_lines)

    before = reports()
    await daemon.wait_until(lambda: reports() > before,
                            OUTAGE_TIMEOUT, f"the daemon reporting the {fault}")
    await asyncio.sleep(HOLD)  # the fault's duration past its first failed write


def reap_orphaned_agents(journal: AgentJournal, state: Path) -> int:
    """Kill fake agents a SIGKILLed daemon left behind; returns how many there were.

    The agent leads its own process group and outlives a daemon killed with SIGKILL until it
    reads EOF on stdin, which a hung (#hang-once) fake agent never does.
    """
    reaped = 0
    for start in journal.starts():
        pid = int(start["pid"])
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"fake_picobot.py" in cmdline and str(state).encode() in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                reaped += 1
    return reaped


def keep_for_inspection(tmp_path: Path, state: Path, daemons: list[Daemon], chats: list[Chat],
                        kills: list[float]) -> None:
    """What a failed run leaves for looking into it, kept with pytest's temporary directories:
    each daemon's log, every reply each chat saw in the order the fakes recorded them (with
    when the soak read them and the kill times, on the same clock), and a copy of the
    database (state_dir is a tmpfs, unmounted at the end): which message and reply rows a
    chat got, in which order, and what became of them."""
    for n, daemon in enumerate(daemons):
        (tmp_path / f"daemon-{n}.log").write_text(daemon.log + "\n", encoding="utf-8")
    lines = [f"kills at {', '.join(f'{k:.3f}' for k in kills)}"]
    lines += [f"c{chat.number:02d} {posted.at:.3f} {list(posted.numbers)} {posted.text!r}"
              for chat in chats for posted in chat.replies]
    (tmp_path / "replies.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    copy = tmp_path / "state-copy"
    copy.mkdir(exist_ok=True)
    # With its -wal (a killed daemon's last commits); never in the way of the run's own error.
    with contextlib.suppress(OSError):
        for database in state.glob("picobridge.db*"):
            shutil.copy2(database, copy / database.name)


def explain_order(tmp_path: Path, chat: Chat, kills: list[float],
                  clock_offset: float) -> list[str]:
    """At which stage a chat's order broke (tests/reliability/soak_stages.py), also kept in
    the run's order.txt."""
    delivered = first_appearances([reply.numbers for reply in chat.replies])
    lines = stage_report(tmp_path / "state-copy" / "picobridge.db",
                         f"{chat.platform}:{chat.channel}", delivered, kills, clock_offset)
    with (tmp_path / "order.txt").open("a", encoding="utf-8") as kept:
        kept.write("\n".join(lines) + "\n")
    return lines


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_soak_two_platforms_crashes_hangs_429s_and_sigkills(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    started_at = time.monotonic()
    with small_filesystem(tmp_path / "state", STATE_DISK) as state:
        await _soak(tmp_path, state, rng, started_at)


async def _soak(tmp_path: Path, state: Path, rng: random.Random, started_at: float) -> None:
    clock_offset = time.time() - time.monotonic()  # the store's clock to the soak's
    async with FakeTelegram() as telegram, FakeSlack() as slack:
        chats = make_chats(slack)
        total = len(chats) * PER_CHAT
        faults = plan_faults(rng, chats)
        bursts = {
            chat.number: plan_bursts(rng, {i for c, i in faults if c == chat.number})
            for chat in chats
        }
        config = soak_config(tmp_path, telegram, slack, chats)
        replies = Replies(telegram, slack, chats)
        injected = {"telegram": 0, "slack": 0}
        journal = AgentJournal(tmp_path / "agent")

        async def send(chat: Chat, text: str) -> None:
            if chat.platform == "telegram":
                telegram.user_message(int(chat.address), int(chat.address), text)
            else:
                await slack.send_event(slack.dm_message(text, user=chat.address))

        telegram.set_flood(FLOOD_EVERY, retry_after=1)
        slack.set_flood(FLOOD_EVERY, retry_after=1, methods=("chat.postMessage",))

        daemons = [await Daemon(config).start()]
        background: list[asyncio.Task[Any]] = []
        users: list[asyncio.Task[None]] = []
        kill_times: list[float] = []
        try:
            await daemons[0].wait_for_log(r"connected to Telegram as @", timeout=30)
            await slack.wait_for_socket(timeout=30)
            background = [
                asyncio.create_task(replies.follow()),
                asyncio.create_task(platform_errors(telegram, slack, replies, injected)),
            ]
            users = [
                asyncio.create_task(converse(chat, bursts[chat.number], faults, send, replies))
                for chat in chats
            ]
            kill_points: list[int] = []
            schedule = sorted([*((f, "kill") for f in KILL_AT), (LOCK_AT, "lock"),
                               (FULL_AT, "full")])
            for fraction, fault in schedule:
                target = int(total * fraction)
                await replies.wait(replies.reached(target), 240,
                                   f"{target} answers before the {fault}")
                if fault == "lock":
                    async with write_lock(state / "picobridge.db"):
                        await outage_reported(daemons[-1], fault)
                    continue
                if fault == "full":
                    filler = state / "filler"
                    await asyncio.to_thread(fill, filler)
                    await outage_reported(daemons[-1], fault)
                    filler.unlink()
                    continue
                await daemons[-1].kill()
                replies.catch_up()
                kill_times.append(time.monotonic())
                kill_points.append(replies.answered)
                daemons.append(await Daemon(config).start())
            await asyncio.gather(*users)
            # A clean stop at the end: nothing of what follows may still be in flight.
            assert await daemons[-1].stop() == 0, "\n".join(daemons[-1].log_lines[-40:])
            # And the store agrees: no message of any chat still waits for the agent.
            code, out, err = await run_cli("sessions", "list", "--config", str(config))
            assert code == 0, err
            waiting = [line for line in out.splitlines() if not line.endswith("\t0 waiting")]
            assert len(out.splitlines()) == len(chats) and not waiting, out
        finally:
            for task in [*users, *background]:
                task.cancel()
            await asyncio.gather(*users, *background, return_exceptions=True)
            for daemon in daemons:
                if daemon.returncode is None:
                    await daemon.kill()
            orphans = reap_orphaned_agents(journal, tmp_path / "agent")
            keep_for_inspection(tmp_path, state, daemons, chats, kill_times)

        slack_429 = sum(1 for call in slack.calls if call.status == 429)
    wall = time.monotonic() - started_at

    problems: list[str] = []
    repeats = answered_twice = 0
    retried = retried_messages(slack)
    for chat in chats:
        order = check_order(chat, retried.get(chat.number, frozenset()))
        if order:
            order += explain_order(tmp_path, chat, kill_times, clock_offset)
        problems += order
        chat_repeats, chat_twice, chat_problems = check_duplicates(chat, kill_times)
        repeats += chat_repeats
        answered_twice += chat_twice
        problems += chat_problems
    logs = [line for daemon in daemons for line in daemon.log_lines]
    telegram_429 = sum(TELEGRAM_429_LOG in line for line in logs)
    outbox_retries = {
        platform: sum(f"to {platform}:" in line and "not delivered" in line for line in logs)
        for platform in ("telegram", "slack")
    }
    given_up = [line for line in logs if "giving up chat=" in line]
    turns_lost = sum("turn lost chat=" in line for line in logs)
    agent_restarts = len(journal.starts()) - len(daemons)
    crashes = sum(e.get("reason") == "crash directive" for e in journal.entries())
    hangs = sum(e.get("event") == "hang" for e in journal.entries())
    reply_count = sum(len(chat.replies) for chat in chats)

    print(
        f"\nsoak: {total} messages in {len(chats)} chats ({TELEGRAM_CHATS} Telegram, "
        f"{SLACK_CHATS} Slack), {reply_count} replies ({total / reply_count:.2f} messages "
        f"per reply), {len(journal.messages())} turns sent to the agent"
    )
    print(
        f"soak: faults: {crashes} agent crashes, {hangs} hangs -> {agent_restarts} agent "
        f"restarts, {turns_lost} turns lost and retried; SIGKILLs after {kill_points} answers "
        f"({orphans} hung agents orphaned by them)"
    )
    print(
        f"soak: 429s: {telegram_429} Telegram (seen by the bridge), {slack_429} Slack "
        f"(answered by the fake); 5xx scripted: {injected['telegram']} Telegram, "
        f"{injected['slack']} Slack; replies retried by the outbox: "
        f"{outbox_retries['telegram']} Telegram, {outbox_retries['slack']} Slack"
    )
    print(
        f"soak: duplicates: {repeats} replies sent twice, {answered_twice} messages answered "
        f"twice (bound: {len(KILL_AT)} kills x {len(chats)} chats = "
        f"{len(KILL_AT) * len(chats)} replies, at most {len(KILL_AT)} per chat)"
    )
    print(f"soak: Slack retried {sum(len(r) for r in retried.values())} messages whose "
          "acknowledgement a kill lost (their place in the order is not checked)")
    outages = sum(INTAKE_OUTAGE in line for line in logs)
    kept = sum(ANSWER_KEPT in line for line in logs)
    print(f"soak: storage: write lock, then full disk, each until reported + {HOLD:g}s -> "
          f"{outages} outage lines, {kept} answers kept in memory until stored")
    print(f"soak: wall time {wall:.1f}s")

    assert not replies.foreign, replies.foreign[:10]
    assert not replies.unknown, replies.unknown[:10]
    assert not given_up, given_up[:10]
    assert not replies.untagged, replies.untagged[:10]
    assert not problems, "\n".join(problems[:30])
    # Each daemon's kill can repeat at most the one reply per chat that was being delivered.
    assert repeats <= len(KILL_AT) * len(chats)
    # Each directive struck once (a crash just before a SIGKILL may cost no restart of its own).
    assert (crashes, hangs) == (CRASHES, HANGS)
    assert telegram_429 > 0 and slack_429 > 0
    assert outages + kept >= 2, "each storage fault is reported"


# -- the race the soak found --------------------------------------------------------------------


class GatedStore(Store):
    """A store whose add_reply / mark_dispatched(_soon) wait at a gate while one is set."""

    reply_gate: asyncio.Event | None = None
    dispatch_gate: asyncio.Event | None = None
    dispatch_entered: asyncio.Event | None = None

    async def add_reply(self, *args: Any, **kwargs: Any) -> StoredReply:
        if self.reply_gate is not None:
            await self.reply_gate.wait()
        return await super().add_reply(*args, **kwargs)

    async def mark_dispatched(self, ids: Sequence[int]) -> None:
        if self.dispatch_gate is not None and self.dispatch_entered is not None:
            self.dispatch_entered.set()
            await self.dispatch_gate.wait()
        await super().mark_dispatched(ids)

    def mark_dispatched_soon(self, ids: Sequence[int]) -> asyncio.Future[None]:
        # The router queues its dispatch records without waiting for them: a gated one is
        # written once the gate opens, as mark_dispatched is.
        if self.dispatch_gate is None:
            return super().mark_dispatched_soon(ids)
        return asyncio.ensure_future(self.mark_dispatched(ids))


async def test_a_session_never_has_two_turns_when_a_dispatch_waits_for_the_store(
    tmp_path: Path,
) -> None:
    """Minimal reproduction of what the soak caught (a reply settling the wrong messages).

    m1 is dispatched while m0's answer is still being stored. If the router took m1 off the
    lane's queue but claimed the lane only after `mark_dispatched` returned, m0's turn ending
    in between saw an idle lane and forgot it; m2 then built a new lane and started a second
    turn of the same session, which took m1's answer (and m1 stayed `dispatched`).
    """
    store = await GatedStore.open(tmp_path / "race.db")
    assert isinstance(store, GatedStore)
    adapter = Recorder()
    outbox = Outbox(store, {"test": adapter})
    agent = ScriptedAgent(max_in_flight=3)
    router = Router(store, outbox, {"test": adapter}, agent, turn_timeout=60, max_attempts=3,
                    coalesce=True)
    await router.start()

    async def submit(chat: str, n: int) -> None:
        stored = await store.record_inbound(
            InboundMessage(
                chat=ChatRef("test", chat),
                sender_id="u",
                text=f"m{n}",
                platform_message_id=f"{chat}-{n}",
            )
        )
        assert stored is not None
        router.enqueue(stored)

    try:
        await submit("c", 0)
        agent.ready = True
        await router.worker_ready(agent)
        first = await agent.next()
        store.reply_gate = asyncio.Event()
        answering = asyncio.create_task(
            router.agent_event(agent, AgentReply.of(first.session, "answer m0")))
        held = store.dispatch_gate = asyncio.Event()
        store.dispatch_entered = asyncio.Event()
        await submit("c", 1)
        await store.dispatch_entered.wait()  # m1's dispatch waits for the database
        store.dispatch_gate = None
        store.reply_gate.set()  # m0's answer is stored and its turn wound up meanwhile
        await answering
        held.set()
        second = await agent.next()
        assert second.text == "m1"
        await submit("c", 2)  # must wait for m1's answer: one turn per session
        await submit("other", 0)
        assert (await agent.next()).text == "m0", "a second turn of the session started"
        await router.agent_event(agent, AgentReply.of(second.session, "answer m1"))
        third = await agent.next()
        assert third.text == "m2"
        await router.agent_event(agent, AgentReply.of(third.session, "answer m2"))
        await adapter.wait_sent(3)
        assert [(r.text, r.kind, r.answers) for c, r in adapter.sent if c == "c"] == [
            ("answer m0", ReplyKind.ANSWER, ("c-0",)),
            ("answer m1", ReplyKind.ANSWER, ("c-1",)),
            ("answer m2", ReplyKind.ANSWER, ("c-2",)),
        ]
    finally:
        await router.stop(0)
        await outbox.stop(0)
        await store.close()
