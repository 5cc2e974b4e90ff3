"""A Slack conversation's messages reach the bridge in the order they were written, end to end:
`picobridge run` against FakeSlack over a real Socket Mode websocket.

What could put them out of order (each test fails on the code before the fix):
- a storage outage: a message refused behind one the adapter holds for the database was not
  held itself, so it waited for Slack's redelivery; a newer message arriving after the
  database came back went first, and an outage outlasting Slack's retries lost it;
- a slash command: it asked Slack for the user's DM (conversations.open) before it took its
  place, so a message sent right after `/picobridge new` reached the old session first.
  Taking its place, its ack waited for its DM's earlier messages: behind a file downloading
  for longer than Slack's 3 s, the user saw an error (Slack's) although the command then ran.
And a burst of one conversation's messages, back to back with other conversations' and partly
queued before the daemon connected, is stored and answered in writing order: slack-sdk runs
each envelope's listeners in a task of its own, so this holds only while nothing on the way
from that task to the adapter's per-conversation queue waits (bolt's authorisation would, on
auth.test, were it not primed with the adapter's own answer).

The two slash command tests share one daemon (each in its own user's DM); the storage outage
tests and the burst partly queued before the daemon connected start their own.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.slack_support import all_acked, assert_no_secrets, reply_to, slack_config
from tests.fakes.server import DOWNLOAD
from tests.fakes.slack import FakeSlack
from tests.harness import SHORT_BUSY_TIMEOUT, AgentJournal, Daemon, settle
from tests.storage_faults import write_lock

pytestmark = pytest.mark.asyncio(loop_scope="module")
# The tests on the shared daemon run on one worker (xdist would start it again in each).
SHARED = pytest.mark.xdist_group("test_slack_order_shared")

ALICE, BOB, CAROL = "U0ALICE", "U0BOB", "U0CAROL"
USERS = [ALICE, BOB, CAROL]
OUTAGE = r"cannot store \("
REFUSED = "not acknowledged: the database cannot store it yet"


def stored(db: Path) -> list[tuple[str, str, str]]:
    """(chat, text, session) of every stored message, in the order intake stored them."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return list(conn.execute("SELECT chat_key, text, session_id FROM inbound ORDER BY id"))


def asked(journal: AgentJournal) -> str:
    """Everything the agent was sent, in order (queued messages go as one turn)."""
    return "\n".join(str(m.get("content")) for m in journal.messages())


def assert_in_order_once(texts: list[str], seen: str) -> None:
    for text in texts:
        assert seen.count(text) == 1, (text, seen)
    positions = [seen.index(text) for text in texts]
    assert positions == sorted(positions), seen


async def answered_first(fake: FakeSlack, text: str, user: str = ALICE) -> str:
    """Once Slack's socket is up, `user` says `text` and is answered; their DM's channel."""
    await fake.wait_for_socket()
    first = fake.dm_message(text, user=user)
    await fake.send_event(first)
    await reply_to(fake, first["channel"], f"echo: {text}")
    return str(first["channel"])


def texts_stored(tmp_path: Path, channel: str) -> list[str]:
    """The texts the daemon stored for the DM `channel`, in the order it took them."""
    return [text for chat, text, _ in stored(tmp_path / "state" / "picobridge.db")
            if chat == f"slack:{channel}"]


def sessions_asked(tmp_path: Path) -> dict[str, str]:
    """Each message's content as the agent got it, and the session it got it in."""
    return {str(m.get("content")): m["session"]
            for m in AgentJournal(tmp_path / "agent").messages()}


async def refused_so_far(fake: FakeSlack, daemon: Daemon, events: list[dict[str, Any]]) -> None:
    """Until every delivery of `events` made so far was refused (each one logs a line)."""
    def done() -> bool:
        deliveries = sum(len(fake.envelopes_for(e["event_id"])) for e in events)
        return sum(REFUSED in line for line in daemon.log_lines) >= deliveries
    await daemon.wait_until(done, timeout=30)


async def send(fake: FakeSlack, event: dict[str, Any]) -> dict[str, Any]:
    """Deliver `event`; returns it with the event id Slack gave it."""
    envelope = await fake.send_event(event)
    return {**event, "event_id": envelope["payload"]["event_id"]}


@contextlib.asynccontextmanager
async def locked_after_an_answer(fake: FakeSlack, daemon: Daemon, db: Path
                                 ) -> AsyncIterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Alice is answered once, then sends two messages while the database is locked (the
    first seen refused before the second is sent); yields them, still locked."""
    await answered_first(fake, "before the lock")
    async with write_lock(db):
        one = await send(fake, fake.dm_message("one, while locked", user=ALICE))
        await daemon.wait_for_log(OUTAGE, timeout=30)
        two = await send(fake, fake.dm_message("two, while locked", user=ALICE))
        yield one, two


async def a_third_comes_after(fake: FakeSlack, tmp_path: Path, one: dict[str, Any],
                              two: dict[str, Any]) -> None:
    """Alice's third message, sent once the lock is gone, is answered; all three were stored
    and reached the agent in writing order, each once."""
    three = fake.dm_message("three, after the lock", user=ALICE)
    await fake.send_event(three)
    await reply_to(fake, three["channel"], three["text"], timeout=60)
    await reply_to(fake, two["channel"], two["text"], timeout=60)
    texts = [one["text"], two["text"], three["text"]]
    assert [t for t in texts_stored(tmp_path, three["channel"]) if t in texts] == texts
    assert_in_order_once(texts, asked(AgentJournal(tmp_path / "agent")))


async def test_a_message_refused_behind_a_held_one_outlives_slacks_retries(
        tmp_path: Path) -> None:
    async with FakeSlack(ack_timeout=1.0) as fake:  # three retries, a second apart
        config = slack_config(tmp_path, fake, allowed_users=USERS, sections=SHORT_BUSY_TIMEOUT)
        async with Daemon(config) as daemon:
            db = tmp_path / "state" / "picobridge.db"
            async with locked_after_an_answer(fake, daemon, db) as (one, two):
                # Slack gives up on the second: every attempt refused, the last one too.
                await fake.wait_for(lambda: len(fake.envelopes_for(two["event_id"]))
                                    == 1 + fake.max_retries, "Slack's last retry", timeout=60)
                last = fake.envelopes_for(two["event_id"])[-1].envelope_id
                await fake.wait_for(lambda: last in fake.ack_timeouts, "its timeout", 30)
                # ... and the daemon has turned each of them down (they queue up behind
                # each other, each waiting out the busy timeout).
                await refused_so_far(fake, daemon, [one, two])
                assert not {d.envelope_id for d in fake.envelopes_for(two["event_id"])} \
                    & set(fake.acked_envelope_ids)
            await a_third_comes_after(fake, tmp_path, one, two)
        assert_no_secrets(daemon, fake)


async def test_a_message_refused_behind_a_held_one_is_not_overtaken(tmp_path: Path) -> None:
    async with FakeSlack() as fake:  # Slack's own 3 s: its retry comes after the next message
        config = slack_config(tmp_path, fake, allowed_users=USERS, sections=SHORT_BUSY_TIMEOUT)
        async with Daemon(config) as daemon:
            db = tmp_path / "state" / "picobridge.db"
            async with locked_after_an_answer(fake, daemon, db) as (one, two):
                await refused_so_far(fake, daemon, [one, two])
            await a_third_comes_after(fake, tmp_path, one, two)
        assert_no_secrets(daemon, fake)


@dataclass
class Env:
    fake: FakeSlack
    daemon: Daemon
    tmp: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("slack-order")
    async with FakeSlack() as fake:
        daemon = Daemon(slack_config(tmp, fake, allowed_users=USERS))
        async with daemon:
            await fake.wait_for_socket()
            yield Env(fake, daemon, tmp)
        assert_no_secrets(daemon, fake)
        assert "Traceback" not in daemon.log


@pytest_asyncio.fixture(loop_scope="module")
async def shared(env: Env) -> AsyncIterator[Env]:
    """The module's daemon once it has finished what the tests before gave it, with no fault
    a test scripted on the fake left for the next."""
    await settle(env.tmp / "state" / "picobridge.db", lambda: all_acked(env.fake))
    yield env
    env.fake.release()
    env.fake.clear_faults()


@SHARED
async def test_a_message_right_after_a_slash_command_comes_after_it(shared: Env) -> None:
    fake, tmp = shared.fake, shared.tmp
    channel = await answered_first(fake, "before any /new", user=BOB)
    rounds = 5
    for n in range(rounds):  # each pair back to back, as a quick typist sends them
        await fake.send_slash_command("/picobridge", "new", user=BOB)
        await fake.send_event(fake.dm_message(f"fresh start {n}", user=BOB))
    for n in range(rounds):
        await reply_to(fake, channel, f"fresh start {n}")
    # Intake took them as sent: each message right after its command...
    assert texts_stored(tmp, channel) == ["before any /new"] + [
        line for n in range(rounds) for line in ("/new", f"fresh start {n}")]
    # ... so each went to the agent in the session that command started.
    sessions = sessions_asked(tmp)
    fresh = [sessions[f"fresh start {n}"] for n in range(rounds)]
    assert len({sessions["before any /new"], *fresh}) == rounds + 1, sessions


@SHARED
async def test_a_slash_command_behind_a_downloading_file_is_acknowledged_at_once(
        shared: Env) -> None:
    fake, tmp = shared.fake, shared.tmp
    channel = await answered_first(fake, "before the file", user=CAROL)
    downloads, responses = len(fake.downloads), len(fake.command_responses)
    fake.stall_next(DOWNLOAD)
    file = fake.add_file(b"a large file\n", name="large.txt")
    await fake.send_event(fake.file_share_message([file], "with a file", user=CAROL))
    await fake.wait_for(lambda: DOWNLOAD in fake.stalled, "the download held", 30)
    command = await fake.send_slash_command("/picobridge", "new", user=CAROL)
    await fake.wait_for_ack(command["envelope_id"], timeout=30)
    # Acknowledged while the message before it is still downloading its file...
    assert fake.stalled == [DOWNLOAD] and len(fake.downloads) == downloads
    fake.release(DOWNLOAD)
    after = fake.dm_message("after the command", user=CAROL)
    await fake.send_event(after)
    await reply_to(fake, channel, "after the command", timeout=60)
    # ... and still taken in its place: the message with the file before it (in the
    # old session), the message after it in the new one.
    assert texts_stored(tmp, channel) == [
        "before the file", "with a file", "/new", "after the command"]
    sessions = sessions_asked(tmp)
    with_file = next(s for text, s in sessions.items() if "with a file" in text)
    assert with_file == sessions["before the file"] != sessions["after the command"]
    # Nothing more to say: the ack was all.
    assert len(fake.command_responses) == responses


async def test_bursts_of_several_conversations_are_taken_in_writing_order(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        config = slack_config(tmp_path, fake, allowed_users=USERS)
        per_user, before_start = 40, 15

        async def burst(numbers: range) -> None:
            for n in numbers:  # interleaved, back to back, some with a file
                for user in USERS:
                    text = f"{user} says {n:02d}"
                    if n % 9 == 4:
                        shared = fake.add_file(b"a small file\n", name=f"note{n}.txt")
                        event = fake.file_share_message([shared], text, user=user)
                    else:
                        event = fake.dm_message(text, user=user)
                    await fake.send_event(event)

        # Queued while the daemon is not connected: Slack sends them all at once on connect.
        await burst(range(before_start))
        async with Daemon(config) as daemon:
            await fake.wait_for(lambda: len(fake.deliveries) >= before_start * len(USERS),
                                "the queued events sent", timeout=30)
            await burst(range(before_start, per_user))
            for user in USERS:
                await reply_to(fake, fake.dm_channel(user), f"{user} says {per_user - 1:02d}",
                               timeout=60)
            rows = stored(tmp_path / "state" / "picobridge.db")
            seen = asked(AgentJournal(tmp_path / "agent"))
            for user in USERS:
                texts = [f"{user} says {n:02d}" for n in range(per_user)]
                assert [t for _, t, _ in rows if t.startswith(user)] == texts
                assert_in_order_once(texts, seen)
            # Bolt used the identity the adapter primed it with: had it asked auth.test
            # itself, every event of the burst would have waited for its own answer, and
            # they come back in any order (seen with the priming taken out).
            assert len(fake.calls_to("auth.test")) == 1
        assert_no_secrets(daemon, fake)
