"""Slack in HTTP mode (Events API), end to end: FakeSlack POSTs signed events and slash commands
to the daemon's own HTTP listener; replies go to FakeSlack's Web API as in Socket Mode.

One daemon serves the module; every test talks in its own DM or channel."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.slack_support import (
    SIGNING_SECRET,
    assert_no_secrets,
    http_port,
    reply_to,
    slack_config,
    texts,
)
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.harness import AgentJournal, Daemon

# One worker runs the whole module (xdist would start the module's daemon again in each).
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_slack_http")]

ALICE, BOB = "U0ALICE", "U0BOB"


@dataclass
class Env:
    fake: FakeSlack
    daemon: Daemon
    journal: AgentJournal
    url: str
    db: Path

    def contents(self) -> list[str]:
        return [str(m.get("content")) for m in self.journal.messages()]


def stored_texts(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return [row[0] for row in conn.execute("SELECT text FROM inbound")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("slack-http")
    async with FakeSlack() as fake:
        config = slack_config(tmp, fake, mode="http",
                              allowed_users=[DEFAULT_USER, ALICE, BOB])
        daemon = Daemon(config)
        async with daemon:
            port = await http_port(daemon)
            yield Env(fake, daemon, AgentJournal(tmp / "agent"),
                      f"http://127.0.0.1:{port}/slack/events", tmp / "state" / "picobridge.db")
        assert_no_secrets(daemon, fake)
    assert fake.socket_connects == 0  # HTTP mode never opens Socket Mode


async def test_url_verification_and_dm_round_trip(env: Env) -> None:
    fake = env.fake
    check = await fake.post_url_verification(env.url, SIGNING_SECRET)
    assert check.status == 200
    assert check.payload["challenge"] in check.body

    event = fake.dm_message("hello over http")
    delivery = await fake.post_event_http(env.url, event, SIGNING_SECRET)
    assert delivery.status == 200
    reply = await reply_to(fake, event["channel"], "echo: hello over http")
    assert reply.thread_ts is None


async def test_bad_signature_or_stale_timestamp_is_refused_and_not_stored(env: Env) -> None:
    fake = env.fake
    forged = await fake.post_event_http(env.url, fake.dm_message("forged message"),
                                        "not-the-signing-secret")
    stale = await fake.post_event_http(env.url, fake.dm_message("replayed message"),
                                       SIGNING_SECRET, timestamp=int(time.time()) - 6 * 60)
    assert (forged.status, stale.status) == (401, 401)
    # Just inside the five-minute window is still fine.
    recent = await fake.post_event_http(env.url, fake.dm_message("slightly delayed"),
                                        SIGNING_SECRET, timestamp=int(time.time()) - 4 * 60)
    assert recent.status == 200
    await reply_to(fake, fake.dm_channel(DEFAULT_USER), "echo: slightly delayed")
    assert "forged message" not in env.contents()
    assert "replayed message" not in env.contents()
    stored = await asyncio.to_thread(stored_texts, env.db)
    assert "slightly delayed" in stored
    assert "forged message" not in stored and "replayed message" not in stored
    assert not any("forged" in t or "replayed" in t for t in texts(fake.messages))
    assert "bad or stale Slack signature" in env.daemon.log


async def test_retried_and_double_events_are_answered_once(env: Env) -> None:
    fake = env.fake
    channel = "C0HTTP"
    message, mention = fake.mention_pair("question over http", channel=channel, user=ALICE)
    first = await fake.post_event_http(env.url, message, SIGNING_SECRET)
    second = await fake.post_event_http(env.url, mention, SIGNING_SECRET)
    retried = await fake.post_event_http(env.url, mention, SIGNING_SECRET,
                                         event_id=second.payload["event_id"], retry_num=1)
    assert (first.status, second.status, retried.status) == (200, 200, 200)
    await reply_to(fake, channel, "echo: question over http", thread_ts=mention["ts"])
    await fake.post_event_http(env.url, fake.dm_message("http sync", user=ALICE),
                               SIGNING_SECRET)
    await reply_to(fake, fake.dm_channel(ALICE), "echo: http sync")
    assert env.contents().count("question over http") == 1
    assert texts(fake.posted_messages(channel)).count("echo: question over http") == 1


async def test_slash_command_over_http(env: Env) -> None:
    fake = env.fake
    delivery = await fake.post_slash_command_http(env.url, "/picobridge", "help",
                                                  SIGNING_SECRET, user=BOB)
    assert delivery.status == 200
    await reply_to(fake, fake.dm_channel(BOB), "/new: start a fresh conversation")

    # bolt alone would take a form holding the word "payload" for an interaction, empty.
    worded = await fake.post_slash_command_http(env.url, "/picobridge", "new payload",
                                                SIGNING_SECRET, user=BOB)
    assert worded.status == 200
    await reply_to(fake, fake.dm_channel(BOB), "Started a new conversation")

    in_channel = await fake.post_slash_command_http(env.url, "/picobridge", "status",
                                                    SIGNING_SECRET, user=BOB,
                                                    channel="C0HTTP")
    assert in_channel.status == 200
    # Slack shows a plain-text response body to the user only.
    assert "!status" in in_channel.body
