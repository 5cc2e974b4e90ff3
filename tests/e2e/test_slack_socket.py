"""Slack in Socket Mode, end to end: `picobridge run` as a subprocess, FakeSlack as Slack (Web
API, Socket Mode websocket, file host) and the fake agent.

One daemon serves the whole module (start-up is most of an e2e test's cost); every test talks
in its own DM or channel so the tests do not see each other's messages.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.slack_support import assert_no_secrets, reply_to, secrets_of, slack_config, texts
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.harness import AgentJournal, Daemon, run_cli

# One worker runs the whole module (xdist would start the module's daemon again in each).
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_slack_socket")]

ALICE, BOB, CAROL, DAVE, ERIN = "U0ALICE", "U0BOB", "U0CAROL", "U0DAVE", "U0ERIN"
STRANGER = "U0STRANGER"


@dataclass
class Env:
    fake: FakeSlack
    daemon: Daemon
    config: Path
    journal: AgentJournal

    def contents(self) -> list[str]:
        return [str(m.get("content")) for m in self.journal.messages()]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("slack-socket")
    async with FakeSlack() as fake:
        config = slack_config(tmp, fake,
                              allowed_users=[DEFAULT_USER, ALICE, BOB, CAROL, DAVE, ERIN])
        daemon = Daemon(config)
        async with daemon:
            await fake.wait_for_socket()
            yield Env(fake, daemon, config, AgentJournal(tmp / "agent"))
        assert_no_secrets(daemon, fake)


async def test_dm_round_trip_renders_markdown_and_swaps_reactions(env: Env) -> None:
    fake = env.fake
    # Slow enough for the received reaction to show before the answer.
    event = fake.dm_message("hello **bold** and [a link](https://example.com/x) #slow=0.6")
    envelope = await fake.send_event(event)
    reply = await reply_to(fake, event["channel"], "echo: hello")
    assert reply.text == "echo: hello *bold* and <https://example.com/x|a link> #slow=0.6"
    assert reply.thread_ts is None  # a plain DM is answered in the DM, not in a thread
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"])
                        == ["white_check_mark"])
    history = [(r.action, r.name) for r in fake.reaction_log if r.ts == event["ts"]]
    assert history == [("add", "eyes"), ("remove", "eyes"), ("add", "white_check_mark")]
    assert envelope["envelope_id"] in fake.acked_envelope_ids
    assert fake.ack_timeouts == []


async def test_mention_gets_threaded_reply_and_follow_up_needs_no_mention(env: Env) -> None:
    fake = env.fake
    channel = "C0TEAM"
    env_message, env_mention = await fake.send_mention("first question", channel=channel,
                                                       user=ALICE)
    ts = env_mention["payload"]["event"]["ts"]
    await reply_to(fake, channel, "echo: first question", thread_ts=ts)

    follow_up = fake.channel_message("second, without mention", channel=channel, user=ALICE,
                                     thread_ts=ts)
    await fake.send_event(follow_up)
    await reply_to(fake, channel, "echo: second, without mention", thread_ts=ts)

    # Slack's double event (message + app_mention, same ts) reached the agent once.
    for envelope in (env_message, env_mention):
        await fake.wait_for_ack(envelope["envelope_id"])
    assert env.contents().count("first question") == 1
    assert [t for t in texts(fake.posted_messages(channel)) if "first question" in t] == [
        "echo: first question"]
    # Both turns ran in the thread's one session.
    sessions = {m["session"] for m in env.journal.messages()
                if m["content"] in ("first question", "second, without mention")}
    assert len(sessions) == 1
    assert next(iter(sessions)).startswith(f"slack.{channel}.{ts}.")


async def test_first_mention_in_a_running_thread_brings_the_thread_along(env: Env) -> None:
    fake = env.fake
    channel = "C0PLAN"
    # A thread the bot is not part of: neither message reaches the agent on its own.
    top = fake.channel_message("Shall we move the release to Friday?", channel=channel,
                               user=ALICE)
    await fake.wait_for_ack((await fake.send_event(top))["envelope_id"])
    reply = fake.channel_message("Only if QA signs off <@U0NOBODY>", channel=channel, user=BOB,
                                 thread_ts=top["ts"])
    await fake.wait_for_ack((await fake.send_event(reply))["envelope_id"])
    # Then someone asks the bot in that thread.
    await fake.send_mention("what do you think?", channel=channel, user=CAROL,
                            thread_ts=top["ts"])
    await reply_to(fake, channel, "what do you think?", thread_ts=top["ts"])
    [content] = [c for c in env.contents() if "what do you think?" in c]
    assert content == (
        "Earlier in this Slack thread (before I was mentioned):\n"
        f"<@{ALICE}>: Shall we move the release to Friday?\n"
        f"<@{BOB}>: Only if QA signs off @U0NOBODY\n"
        "\nThe message for you:\nwhat do you think?")
    # Once the bot is part of the thread it hears every message there: no context again.
    later = fake.channel_message("and Monday?", channel=channel, user=ALICE,
                                 thread_ts=top["ts"])
    await fake.send_event(later)
    await reply_to(fake, channel, "echo: and Monday?", thread_ts=top["ts"])
    assert "and Monday?" in env.contents()


async def test_channel_chatter_without_mention_is_not_read(env: Env) -> None:
    fake = env.fake
    top = fake.channel_message("just talking here", channel="C0TEAM", user=ALICE)
    stranger_thread = fake.channel_message("a thread the bot never joined", channel="C0TEAM",
                                           user=ALICE, thread_ts=fake.next_ts())
    for event in (top, stranger_thread):
        envelope = await fake.send_event(event)
        await fake.wait_for_ack(envelope["envelope_id"])
    # A later message in a DM gets answered, so the daemon has processed the earlier ones.
    await fake.send_event(fake.dm_message("sync after chatter", user=ALICE))
    await reply_to(fake, fake.dm_channel(ALICE), "echo: sync after chatter")
    contents = env.contents()
    assert "just talking here" not in contents
    assert "a thread the bot never joined" not in contents
    assert "channel message without mention" in env.daemon.log


async def test_redelivered_event_is_answered_once(env: Env) -> None:
    fake = env.fake
    event = fake.dm_message("only once please", user=BOB)
    envelope = await fake.send_event(event)
    await reply_to(fake, fake.dm_channel(BOB), "echo: only once please")
    again = await fake.redeliver(envelope["payload"]["event_id"])
    await fake.wait_for_ack(again["envelope_id"])
    await fake.send_event(fake.dm_message("after the redelivery", user=BOB))
    await reply_to(fake, fake.dm_channel(BOB), "echo: after the redelivery")
    assert texts(fake.posted_messages(fake.dm_channel(BOB))).count(
        "echo: only once please") == 1
    assert env.contents().count("only once please") == 1
    # A quick answer gets the done reaction without the received one flickering first.
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"])
                        == ["white_check_mark"])
    assert [r.name for r in fake.reaction_log if r.ts == event["ts"]] == ["white_check_mark"]


async def test_unknown_user_learns_id_and_operator_command(env: Env) -> None:
    fake = env.fake
    await fake.send_event(fake.dm_message("let me in", user=STRANGER))
    notices = await fake.wait_for(
        lambda: [e for e in fake.ephemeral_messages if e.user == STRANGER])
    assert STRANGER in notices[0].text
    assert f"picobridge access allow slack:{STRANGER}" in notices[0].text
    assert notices[0].channel == fake.dm_channel(STRANGER)
    assert "let me in" not in env.contents()

    code, _, err = await run_cli("access", "allow", f"slack:{STRANGER}", "--config",
                                 str(env.config))
    assert code == 0, err
    await fake.send_event(fake.dm_message("and now?", user=STRANGER))
    await reply_to(fake, fake.dm_channel(STRANGER), "echo: and now?")
    assert "let me in" not in env.contents()


async def test_files_inline_and_saved(env: Env) -> None:
    fake = env.fake
    note = fake.add_file(b"line one\nline two\n", "notes.txt", "text/plain", user=CAROL)
    await fake.send_event(fake.file_share_message([note], "read this", user=CAROL))
    reply = await reply_to(fake, fake.dm_channel(CAROL), "read this")
    assert "[Attachment: notes.txt]" in reply.text and "line two" in reply.text

    picture = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    png = fake.add_file(picture, "photo.png", "image/png", user=CAROL)
    await fake.send_event(fake.file_share_message([png], "look", user=CAROL))
    await reply_to(fake, fake.dm_channel(CAROL), "look")
    record = next(m for m in env.journal.messages() if m["content"] == "look")
    described = record["attachments"][0]["content"]
    match = re.search(r"saved to (\S+)", described)
    assert match is not None, described
    assert await asyncio.to_thread(Path(match.group(1)).read_bytes) == picture
    assert "image/png" in described
    assert all(d.authorized for d in fake.downloads)


async def test_long_reply_as_file_and_medium_reply_in_ordered_parts(env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(DAVE)
    await fake.send_event(fake.dm_message("#huge=9000", user=DAVE))
    await fake.wait_for(lambda: "".join(texts(fake.posted_messages(dm))).endswith(":END"))
    parts = texts(fake.posted_messages(dm))
    assert len(parts) == 3
    assert "".join(parts) == "HUGE:" + "x" * (9000 - 9) + ":END"

    await fake.send_event(fake.dm_message("#huge=30000", user=DAVE))
    upload = await fake.wait_for(
        lambda: next((u for u in fake.uploaded_files if u.completed and u.channel == dm), None))
    assert upload.content == ("HUGE:" + "x" * (30000 - 9) + ":END").encode()
    assert upload.initial_comment and "file" in upload.initial_comment
    assert len(fake.posted_messages(dm)) == 4  # the three parts, then the file share


async def test_text_and_slash_commands(env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(ERIN)
    await fake.send_event(fake.dm_message("!new", user=ERIN))
    await reply_to(fake, dm, "Started a new conversation")

    envelope = await fake.send_slash_command("/picobridge", "status", user=ERIN)
    # What matters here is where the answer goes (the DM), not the worker's state, which
    # another test's turn on this module's shared daemon can leave other than ready.
    status = await reply_to(fake, dm, "Agent: ")
    assert any(f"Agent: {state}" in status.text
               for state in ("starting", "ready", "restarting")), status.text
    ack = await fake.wait_for_ack(envelope["envelope_id"])
    assert not (ack.payload or {}).get("text")  # answered in the DM, not as an ack text

    envelope = await fake.send_slash_command("/picobridge", "new", user=ERIN,
                                             channel="C0TEAM")
    ack = await fake.wait_for_ack(envelope["envelope_id"])
    assert ack.payload is not None and "!new" in ack.payload["text"]
    assert "!new" not in env.contents() and "/new" not in env.contents()


async def test_bots_edits_and_deletions_are_ignored_but_a_late_file_share_is_taken(
        env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(DEFAULT_USER)
    original = fake.dm_message("typo here")
    ignored = [
        fake.bot_message("from another bot", channel=dm),
        fake.bot_message("my own words", channel=dm, own=True),
        fake.message_changed(original, "typo fixed"),
        fake.message_deleted(original),
    ]
    for event in ignored:
        envelope = await fake.send_event(event)
        await fake.wait_for_ack(envelope["envelope_id"])

    file = fake.add_file(b"late file body", "late.txt")
    placeholder = fake.dm_message("with a file")
    changed = fake.message_changed(placeholder, "with a file")
    changed["message"].update(subtype="file_share", files=[file])
    await fake.send_event(changed)
    reply = await reply_to(fake, dm, "late file body")
    assert "[Attachment: late.txt]" in reply.text
    contents = "\n".join(env.contents())
    for text in ("from another bot", "my own words", "typo"):
        assert text not in contents


async def test_rate_limit_storm_keeps_order_and_posts_each_part_once(env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(DAVE)
    before = len(fake.posted_messages(dm))
    fake.set_flood(2, retry_after=0)
    # More 429s in a row than slack-sdk retries: the outbox has to honour Retry-After too.
    fake.fail_next("chat.postMessage", 429, retry_after=1, times=3)
    try:
        await fake.send_event(fake.dm_message("first #slow=0.5 #huge=9000", user=DAVE))
        await fake.send_event(fake.dm_message("second", user=DAVE))
        await reply_to(fake, dm, "echo: second", timeout=30)
    finally:
        fake.set_flood(0)
    posted = texts(fake.posted_messages(dm))[before:]
    assert len(posted) == 4
    assert "".join(posted[:3]) == "HUGE:" + "x" * (9000 - 9) + ":END"
    assert posted[3] == "echo: second"
    limited = [c for c in fake.calls_to("chat.postMessage") if c.status == 429]
    assert len(limited) >= 4


async def test_no_secret_in_any_log_line(env: Env) -> None:
    assert env.daemon.log_lines
    assert_no_secrets(env.daemon, env.fake)
    # The check above only means something if the secrets were there to leak.
    assert all(secret in env.config.read_text() for secret in secrets_of(env.fake)[:2])
