"""Slack deliveries that do not parse, end to end: envelopes and events that are not objects,
events without a channel or with fields of the wrong type, websocket frames that are not JSON,
HTTP bodies that are not JSON. Each is acknowledged (so Slack does not send it again), skipped,
logged without its content, and the daemon goes on answering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.slack_support import (
    SIGNING_SECRET,
    assert_no_secrets,
    http_port,
    reply_to,
    slack_config,
)
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.harness import AgentJournal, Daemon

# Stands for what a user wrote: it must reach neither the log nor the agent.
WORDS = "private-words-5e1f"


def broken_payloads(fake: FakeSlack) -> list[Any]:
    def callback(event: Any) -> dict[str, Any]:
        return {"type": "event_callback", "team_id": fake.team_id,
                "event_id": fake.next_id("Ev"), "event": event}

    channel, ts = fake.dm_channel(), fake.next_ts()
    message = {"type": "message", "channel": channel, "user": DEFAULT_USER, "ts": ts,
               "text": WORDS, "channel_type": "im"}
    return [
        WORDS,  # the payload is text
        [WORDS, 1],  # a list
        {"type": 7, "event": {"text": WORDS}},  # the payload type is a number
        callback(WORDS),  # the event is text
        callback({**message, "channel": None}),  # no channel
        callback({**message, "channel": 12345}),  # a channel that is a number
        callback({**message, "ts": 1.5}),  # a ts that is a number
        callback({**message, "files": 3}),  # files that are no list
        callback({**message, "text": {"words": WORDS}}),  # text that is an object
        callback({**message, "type": ["message"]}),  # an event type that is a list
    ]


def assert_content_kept_out(daemon: Daemon, journal: AgentJournal) -> None:
    assert not [line for line in daemon.log_lines if WORDS in line]
    assert not [m for m in journal.messages() if WORDS in json.dumps(m)]


async def test_socket_mode_acknowledges_and_skips_what_does_not_parse(tmp_path: Path) -> None:
    async with FakeSlack(ack_timeout=1.0) as fake:
        async with Daemon(slack_config(tmp_path, fake)) as daemon:
            await fake.wait_for_socket()
            envelopes = [await fake.send_payload(p) for p in broken_payloads(fake)]
            # A payload that is text, deliberately: not the JSON object the fake's type says.
            envelopes.append(await fake.send_envelope("slash_commands", WORDS))  # type: ignore[arg-type]
            assert await fake.send_raw_frame("{not json: " + WORDS) == 1
            assert await fake.send_raw_frame(json.dumps([WORDS, {"envelope_id": 1}])) == 1
            for envelope in envelopes:
                await fake.wait_for_ack(envelope["envelope_id"])
            # Still up, and still answering (after everything above was read).
            event = fake.dm_message("are you still there?")
            await fake.send_event(event)
            await reply_to(fake, event["channel"], "echo: are you still there?")
            assert daemon.returncode is None
            skipped = [line for line in daemon.log_lines if "was skipped" in line]
            assert len(skipped) == len(envelopes)
        assert fake.redeliveries == []  # each was acknowledged in time, none sent again
        assert fake.ack_timeouts == []
        assert_content_kept_out(daemon, AgentJournal(tmp_path / "agent"))
        assert_no_secrets(daemon, fake)


async def test_http_mode_answers_200_to_signed_bodies_that_do_not_parse(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        async with Daemon(slack_config(tmp_path, fake, mode="http")) as daemon:
            url = f"http://127.0.0.1:{await http_port(daemon)}/slack/events"
            bodies = [json.dumps(p).encode() for p in broken_payloads(fake)]
            bodies += [b"{not json: " + WORDS.encode(), b"\xff\xfe" + WORDS.encode()]
            for body in bodies:
                delivery = await fake.post_raw_http(url, body, SIGNING_SECRET)
                assert delivery.status == 200, delivery
            # Unsigned junk is still refused, not acknowledged.
            unsigned = await fake.post_raw_http(url, b"[" + WORDS.encode(), None)
            assert unsigned.status == 401
            answered = await fake.post_event_http(url, fake.dm_message("still answering?"),
                                                  SIGNING_SECRET)
            assert answered.status == 200
            await reply_to(fake, fake.dm_channel(), "echo: still answering?")
            skipped = [line for line in daemon.log_lines if "was skipped" in line]
            assert len(skipped) == len(bodies)
        assert_content_kept_out(daemon, AgentJournal(tmp_path / "agent"))
        assert_no_secrets(daemon, fake)
