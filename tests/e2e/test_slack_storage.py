"""Slack while the daemon's database cannot take writes, end to end: locked by another process
for longer than the daemon's busy timeout (Socket Mode and HTTP mode), and a full disk.

Nothing is acknowledged while nothing can be stored, so Slack sends it again; once writes
come back every message is answered exactly once, in order within its chat, and the outage
leaves no ERROR line per event from the Slack side (the bridge logs the outage once)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.e2e.slack_support import (
    SIGNING_SECRET,
    assert_no_secrets,
    http_port,
    reply_to,
    slack_config,
    texts,
)
from tests.fakes.slack import FakeSlack
from tests.harness import SHORT_BUSY_TIMEOUT, AgentJournal, Daemon
from tests.storage_faults import fill, small_filesystem, write_lock

ALICE, BOB, CAROL = "U0ALICE", "U0BOB", "U0CAROL"
USERS = [ALICE, BOB, CAROL]
OUTAGE = r"cannot store \("
RECOVERED = r"takes writes again"
SLACK_ERRORS = re.compile(r" ERROR (picobridge\.slack|slack_bolt|slack_sdk)")



def while_down(fake: FakeSlack) -> list[dict[str, Any]]:
    """The messages sent during the outage: one per user, and a second one from Alice that
    must not overtake her first."""
    return [fake.dm_message(f"sent while down {n}", user=user)
            for n, user in enumerate([*USERS, ALICE])]


Send = Callable[[dict[str, Any]], Awaitable[object]]


async def answered_once_each(fake: FakeSlack, journal: AgentJournal,
                             events: list[dict[str, Any]], send: Send) -> None:
    """Every event answered; then, after a later message in each chat is answered too (a
    duplicate would have come first), each exactly once, to Slack and to the agent. Messages
    of one chat that queued up behind a turn go to the agent as one turn (the bridge coalesces
    them), so each text is looked for inside the echoes, not as an echo of its own."""
    for event in events:
        await reply_to(fake, event["channel"], event["text"], timeout=60)
    for user in USERS:
        sync = fake.dm_message(f"after the outage {user}", user=user)
        await send(sync)
        await reply_to(fake, sync["channel"], f"echo: {sync['text']}", timeout=30)
    asked = "\n".join(str(m.get("content")) for m in journal.messages())
    for event in events:
        answers = "\n".join(texts(fake.posted_messages(event["channel"])))
        assert answers.count(event["text"]) == 1, event["text"]
        assert asked.count(event["text"]) == 1, event["text"]
    for user in USERS:  # each person's order kept (Alice writes twice while down)
        theirs = [asked.index(e["text"]) for e in events if e["user"] == user]
        assert theirs == sorted(theirs), user


async def until_refused(fake: FakeSlack, daemon: Daemon) -> list[dict[str, Any]]:
    """More messages, one at a time, until one cannot be stored. On a full disk SQLite still
    writes into the space its WAL file already holds, so the first few may fit; the test is
    about the ones that do not. Returns what it sent (nothing if the outage had begun)."""
    sent: list[dict[str, Any]] = []
    for n in range(400):
        if any(re.search(OUTAGE, line) for line in daemon.log_lines):
            return sent
        event = fake.dm_message(f"filling {n} " + "x" * 1000, user=CAROL)
        sent.append(event)
        await fake.send_event(event)
        stored = re.escape(f"id={event['channel']}:{event['ts']} ")
        await daemon.wait_for_log(rf"{OUTAGE}|received .*{stored}", timeout=30)
    raise AssertionError("the full disk never refused a message")


def assert_outage_logged_once(daemon: Daemon) -> None:
    assert len([line for line in daemon.log_lines if re.search(OUTAGE, line)]) == 1
    assert not [line for line in daemon.log_lines if SLACK_ERRORS.search(line)]


async def test_socket_mode_withholds_acks_while_the_database_is_locked(tmp_path: Path) -> None:
    async with FakeSlack() as fake:  # Slack's own 3 s ack timeout and three retries
        config = slack_config(tmp_path, fake, allowed_users=USERS, sections=SHORT_BUSY_TIMEOUT)
        async with Daemon(config) as daemon:
            await fake.wait_for_socket()
            first = fake.dm_message("before the lock", user=ALICE)
            await fake.send_event(first)
            await reply_to(fake, first["channel"], "echo: before the lock")
            events = while_down(fake)
            async with write_lock(tmp_path / "state" / "picobridge.db"):
                envelopes = [await fake.send_event(event) for event in events]
                ids = [envelope["payload"]["event_id"] for envelope in envelopes]
                # Held past the daemon's busy timeout, and until Slack sent each again.
                await daemon.wait_for_log(OUTAGE, timeout=30)
                await fake.wait_for(lambda: all(len(fake.envelopes_for(i)) >= 2 for i in ids),
                                    "a redelivery of every event", timeout=30)
                sent = {d.envelope_id for i in ids for d in fake.envelopes_for(i)}
                assert not sent & set(fake.acked_envelope_ids)
                assert not [m for m in fake.messages if "sent while down" in m.text]
            await answered_once_each(fake, AgentJournal(tmp_path / "agent"), events,
                                     fake.send_event)
            await fake.wait_for(lambda: all(
                {d.envelope_id for d in fake.envelopes_for(i)} & set(fake.acked_envelope_ids)
                for i in ids), "an acknowledgement of every event")
            await daemon.wait_for_log(RECOVERED)
        assert_outage_logged_once(daemon)
        assert_no_secrets(daemon, fake)


async def test_http_mode_answers_5xx_while_the_database_is_locked(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        config = slack_config(tmp_path, fake, mode="http", allowed_users=USERS,
                              sections=SHORT_BUSY_TIMEOUT)
        async with Daemon(config) as daemon:
            url = f"http://127.0.0.1:{await http_port(daemon)}/slack/events"

            async def post(event: dict[str, Any], event_id: str | None = None,
                           retry: int | None = None) -> int:
                return (await fake.post_event_http(url, event, SIGNING_SECRET,
                                                   event_id=event_id, retry_num=retry)).status

            first = fake.dm_message("before the lock", user=ALICE)
            assert await post(first) == 200
            await reply_to(fake, first["channel"], "echo: before the lock")
            events = while_down(fake)
            ids = [fake.next_id("Ev") for _ in events]
            async with write_lock(tmp_path / "state" / "picobridge.db"):
                # Two side by side, as Slack delivers events: each waits out the busy
                # timeout of the daemon's one database connection, so two keep this short.
                refused = await asyncio.gather(post(events[0], ids[0]), post(events[1], ids[1]))
                assert all(500 <= status < 600 for status in refused), refused
                assert not [m for m in fake.messages if "sent while down" in m.text]
            # The rest arrive after the release; Alice's second must not overtake her first.
            for event, event_id in zip(events[2:], ids[2:], strict=True):
                assert await post(event, event_id) == 200
            # Slack retries the refused events (same event id, X-Slack-Retry-Num).
            for event, event_id in zip(events[:2], ids[:2], strict=True):
                assert await post(event, event_id, retry=1) == 200
            await answered_once_each(fake, AgentJournal(tmp_path / "agent"), events, post)
            await daemon.wait_for_log(RECOVERED)
        assert_outage_logged_once(daemon)
        assert_no_secrets(daemon, fake)




async def test_full_disk_then_freed_every_message_answered_once(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "state", "16m") as state:
        async with FakeSlack(ack_timeout=1.0) as fake:
            async with Daemon(slack_config(tmp_path, fake, allowed_users=USERS)) as daemon:
                await fake.wait_for_socket()
                first = fake.dm_message("before the disk filled", user=ALICE)
                await fake.send_event(first)
                await reply_to(fake, first["channel"], "echo: before the disk filled")
                filler = state / "filler"
                events = while_down(fake)
                assert await asyncio.to_thread(fill, filler) > 0
                for event in events:
                    await fake.send_event(event)
                events += await until_refused(fake, daemon)
                # Slack never sends a command again: its user is told to retry instead.
                command = await fake.send_slash_command("/picobridge", "status", user=BOB)
                ack = await fake.wait_for_ack(command["envelope_id"], timeout=30)
                assert "try again" in str((ack.payload or {}).get("text"))
                filler.unlink()
                await answered_once_each(fake, AgentJournal(tmp_path / "agent"), events,
                                         fake.send_event)
                await daemon.wait_for_log(RECOVERED)
            assert not [line for line in daemon.log_lines if SLACK_ERRORS.search(line)]
            assert_no_secrets(daemon, fake)
