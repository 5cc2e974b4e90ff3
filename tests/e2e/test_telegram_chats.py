"""Telegram end to end: `picobridge run` against the fake Bot API and the fake agent. Private
chats, groups, forum topics, strangers, bridge commands and edits.

One daemon serves the module's tests, each in its own chats with its own people, except the
first, which restarts its own daemon.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.telegram_support import (
    USER,
    NewMessages,
    SharedDaemon,
    assert_no_token,
    replies,
    reply_containing,
    shared_daemon,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, run_cli

# One worker runs the whole module, in order, so the shared daemon is started once.
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_telegram_chats")]

GROUP = -100777
FORUM = -100888
# Each test's own people (a private chat has its person's id).
ALICE, BOB, TOPICS, FORGETFUL, EDITOR, HOLDER, DENIED = range(6201, 6208)
STRANGER = 6299  # allowed only by the test that grants them access


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedDaemon]:
    tmp = tmp_path_factory.mktemp("telegram-chats")
    async with FakeTelegram() as fake:
        config = telegram_config(tmp, fake, allowed_users=[
            ALICE, BOB, TOPICS, FORGETFUL, EDITOR, HOLDER, DENIED])
        async with shared_daemon(tmp, fake, config) as shared:
            yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def env(module_daemon: SharedDaemon) -> AsyncIterator[SharedDaemon]:
    async with module_daemon.test() as shared:
        yield shared


async def test_private_chat_round_trip(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            update = fake.user_message(USER, USER, "hello *there* #slow=1")
            reply = await reply_containing(fake, USER, "echo: hello")
            # Rendered, quoted, and the update confirmed only after it was stored.
            assert reply.text == "echo: hello there #slow=1"
            assert reply.entities == [{"type": "italic", "offset": 12, "length": 5}]
            assert "parse_mode" not in reply.params
            assert reply.reply_to_message_id == update["message"]["message_id"]
            await fake.wait_until_confirmed(update["update_id"])
            # Typing was shown while the turn ran, and stopped with the reply.
            typing = [a for a in fake.chat_actions if a.chat_id == USER and a.action == "typing"]
            assert typing
            # In the order the fake took the calls, not by their times.
            order = [c.method for c in fake.calls if c.method in ("sendChatAction", "sendMessage")]
            assert "sendChatAction" not in order[order.index("sendMessage"):]
            assert len(fake.calls_to("setMyCommands")) == 1
        assert daemon.returncode == 0
        assert_no_token(daemon, fake.token)
        journal = AgentJournal(tmp_path / "agent")
        assert [m["content"] for m in journal.messages()] == ["hello *there* #slow=1"]
        assert journal.messages()[0]["session"].startswith(f"telegram.{USER}")

        # A restart with the same commands does not call setMyCommands again.
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            await fake.wait_for_call("getMyCommands", count=2)
        assert len(fake.calls_to("setMyCommands")) == 1


async def test_group_answers_only_mentions_and_replies(env: SharedDaemon) -> None:
    fake, messages = env.fake, NewMessages(env)
    name = fake.bot_user["username"]
    fake.user_message(GROUP, ALICE, "just chatting, not for the bot", first_name="Alice")
    fake.user_message(GROUP, ALICE, f"@{name} first question", first_name="Alice")
    mention = await reply_containing(fake, GROUP, "first question")
    # The mention goes, the speaker's name comes (the group shares one session).
    assert mention.text == "echo: Alice: first question"
    fake.user_message(GROUP, BOB, "a reply to the bot",
                      reply_to_message=mention.message_id, first_name="Bob")
    await reply_containing(fake, GROUP, "echo: Bob: a reply to the bot")
    fake.user_message(GROUP, ALICE, "/status@other_bot", first_name="Alice")
    fake.user_message(GROUP, ALICE, f"/status@{name}", first_name="Alice")
    await reply_containing(fake, GROUP, "Agent:")
    contents = [m["content"] for m in messages()]
    assert contents == ["Alice: first question", "Bob: a reply to the bot"]
    assert not replies(fake, GROUP, "just chatting")
    assert len(replies(fake, GROUP, "Agent:")) == 1


async def test_forum_topics_are_separate_sessions(env: SharedDaemon) -> None:
    fake, messages = env.fake, NewMessages(env)
    name = fake.bot_user["username"]
    fake.user_message(FORUM, TOPICS, f"@{name} in topic one", message_thread_id=11,
                      is_topic_message=True)
    fake.user_message(FORUM, TOPICS, f"@{name} in topic two", message_thread_id=22,
                      is_topic_message=True)
    one = await reply_containing(fake, FORUM, "in topic one")
    two = await reply_containing(fake, FORUM, "in topic two")
    assert (one.message_thread_id, two.message_thread_id) == (11, 22)
    assert one.reply_to_message_id is not None
    fake.user_message(FORUM, TOPICS, f"@{name} what did I just say", message_thread_id=22,
                      is_topic_message=True)
    recall = await reply_containing(fake, FORUM, "You said")
    assert recall.message_thread_id == 22
    assert "in topic two" in (recall.text or "")
    assert "topic one" not in (recall.text or "")
    sessions = {m["session"] for m in messages()}
    assert len(sessions) == 2
    assert all(s.startswith(f"telegram.{FORUM}.") for s in sessions)


async def test_unknown_user_is_told_once_and_granted_without_restart(env: SharedDaemon) -> None:
    fake, messages = env.fake, NewMessages(env)
    fake.user_message(STRANGER, STRANGER, "let me in")
    denial = await reply_containing(fake, STRANGER, f"picobridge access allow "
                                                    f"telegram:{STRANGER}")
    assert str(STRANGER) in (denial.text or "")
    fake.user_message(STRANGER, STRANGER, "please?")
    second = fake.user_message(STRANGER, STRANGER, "anyone?")
    await fake.wait_until_confirmed(second["update_id"])
    assert len(fake.sent_messages(STRANGER)) == 1
    assert messages() == []

    code, out, _ = await run_cli("access", "allow", f"telegram:{STRANGER}",
                                 "--config", str(env.daemon.config_path))
    assert code == 0, out
    fake.user_message(STRANGER, STRANGER, "now?")
    await reply_containing(fake, STRANGER, "echo: now?")
    assert [m["content"] for m in messages()] == ["now?"]


async def test_new_starts_a_fresh_session(env: SharedDaemon) -> None:
    fake, messages = env.fake, NewMessages(env)
    fake.user_message(FORGETFUL, FORGETFUL, "remember me")
    await reply_containing(fake, FORGETFUL, "echo: remember me")
    fake.user_message(FORGETFUL, FORGETFUL, "/new")
    await reply_containing(fake, FORGETFUL, "Started a new conversation")
    fake.user_message(FORGETFUL, FORGETFUL, "what did I just say")
    forgot = await reply_containing(fake, FORGETFUL, "have not said anything")
    assert forgot.text == "You have not said anything yet."
    fake.user_message(FORGETFUL, FORGETFUL, "/start")
    hello = await reply_containing(fake, FORGETFUL, "Hello!")
    assert "/new" in (hello.text or "")
    sessions = [m["session"] for m in messages()]
    assert len(sessions) == 2 and sessions[0] != sessions[1]


async def test_edit_updates_a_queued_message_only(env: SharedDaemon) -> None:
    fake, messages = env.fake, NewMessages(env)
    fake.user_message(EDITOR, EDITOR, "busy #slow=2")
    await messages.journal.wait_until(lambda _: len(messages()) == 1, what="first turn")
    queued = fake.user_message(EDITOR, EDITOR, "typo hre")
    fake.edited_message(EDITOR, queued["message"]["message_id"], "typo here")
    await env.wait_for_log(r"updated by an edit")
    await reply_containing(fake, EDITOR, "echo: typo here")
    # An edit of an answered message changes nothing.
    fake.edited_message(EDITOR, queued["message"]["message_id"], "too late")
    fake.user_message(EDITOR, EDITOR, "done")
    await reply_containing(fake, EDITOR, "echo: done")
    contents = [m["content"] for m in messages()]
    assert contents == ["busy #slow=2", "typo here", "done"]


async def test_deny_takes_effect_for_a_message_already_queued(env: SharedDaemon) -> None:
    fake, messages, config = env.fake, NewMessages(env), env.daemon.config_path
    release = env.tmp / "agent" / "release"
    try:
        # One worker, one turn at a time: HOLDER's held turn keeps DENIED's message in the
        # queue while the operator denies DENIED; released once the deny has been acted on.
        fake.user_message(HOLDER, HOLDER, "think #hold=deny")
        await messages.journal.wait_until(lambda _: bool(messages()), what="the slow turn")
        queued = fake.user_message(DENIED, DENIED, "should never be read")
        await env.wait_for_log(rf"received .* id={DENIED}:{queued['message']['message_id']}")
        before = len(fake.sent_messages(DENIED))
        code, out, err = await run_cli("access", "deny", f"telegram:{DENIED}",
                                       "--config", str(config))
        assert code == 0, out + err
        assert "1 queued message(s) of theirs will not reach the agent" in out
        await env.wait_for_log(rf"access revoked for telegram:{DENIED}")
        assert not replies(fake, HOLDER, "echo: think")  # the turn is still held
    finally:
        # Released however the test ends: a turn held for ever would hold up the next tests.
        release.mkdir(exist_ok=True)
        (release / "deny").touch()
    await reply_containing(fake, HOLDER, "echo: think", timeout=30)
    # Round robin: had DENIED's message stayed queued, it would go before this one.
    fake.user_message(HOLDER, HOLDER, "and then")
    await reply_containing(fake, HOLDER, "echo: and then")
    assert len(fake.sent_messages(DENIED)) == before  # told nothing more
    contents = [m["content"] for m in messages()]
    assert "should never be read" not in contents and "and then" in contents
    code, out, _ = await run_cli("sessions", "list", "--config", str(config))
    assert code == 0 and f"telegram:{DENIED}" in out
