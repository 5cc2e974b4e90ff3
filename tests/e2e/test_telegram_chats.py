"""Telegram end to end: `picobridge run` against the fake Bot API and the fake agent. Private
chats, groups, forum topics, strangers, bridge commands and edits."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.telegram_support import (
    OTHER_USER,
    STRANGER,
    USER,
    assert_no_token,
    replies,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, run_cli

GROUP = -100777
FORUM = -100888


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


async def test_group_answers_only_mentions_and_replies(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        name = fake.bot_user["username"]
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            fake.user_message(GROUP, USER, "just chatting, not for the bot", first_name="Alice")
            fake.user_message(GROUP, USER, f"@{name} first question", first_name="Alice")
            mention = await reply_containing(fake, GROUP, "first question")
            # The mention goes, the speaker's name comes (the group shares one session).
            assert mention.text == "echo: Alice: first question"
            fake.user_message(GROUP, OTHER_USER, "a reply to the bot",
                              reply_to_message=mention.message_id, first_name="Bob")
            await reply_containing(fake, GROUP, "echo: Bob: a reply to the bot")
            fake.user_message(GROUP, USER, "/status@other_bot", first_name="Alice")
            fake.user_message(GROUP, USER, f"/status@{name}", first_name="Alice")
            await reply_containing(fake, GROUP, "Agent:")
        journal = AgentJournal(tmp_path / "agent")
        contents = [m["content"] for m in journal.messages()]
        assert contents == ["Alice: first question", "Bob: a reply to the bot"]
        assert not replies(fake, GROUP, "just chatting")
        assert len(replies(fake, GROUP, "Agent:")) == 1


async def test_forum_topics_are_separate_sessions(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        name = fake.bot_user["username"]
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            fake.user_message(FORUM, USER, f"@{name} in topic one", message_thread_id=11,
                              is_topic_message=True)
            fake.user_message(FORUM, USER, f"@{name} in topic two", message_thread_id=22,
                              is_topic_message=True)
            one = await reply_containing(fake, FORUM, "in topic one")
            two = await reply_containing(fake, FORUM, "in topic two")
            assert (one.message_thread_id, two.message_thread_id) == (11, 22)
            assert one.reply_to_message_id is not None
            fake.user_message(FORUM, USER, f"@{name} what did I just say", message_thread_id=22,
                              is_topic_message=True)
            recall = await reply_containing(fake, FORUM, "You said")
            assert recall.message_thread_id == 22
            assert "in topic two" in (recall.text or "")
            assert "topic one" not in (recall.text or "")
        sessions = {m["session"] for m in AgentJournal(tmp_path / "agent").messages()}
        assert len(sessions) == 2
        assert all(s.startswith(f"telegram.{FORUM}.") for s in sessions)


async def test_unknown_user_is_told_once_and_granted_without_restart(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(STRANGER, STRANGER, "let me in")
            denial = await reply_containing(fake, STRANGER, f"picobridge access allow "
                                                            f"telegram:{STRANGER}")
            assert str(STRANGER) in (denial.text or "")
            fake.user_message(STRANGER, STRANGER, "please?")
            second = fake.user_message(STRANGER, STRANGER, "anyone?")
            await fake.wait_until_confirmed(second["update_id"])
            assert len(fake.sent_messages(STRANGER)) == 1
            assert AgentJournal(tmp_path / "agent").messages() == []

            code, out, _ = await run_cli("access", "allow", f"telegram:{STRANGER}",
                                         "--config", str(config))
            assert code == 0, out
            fake.user_message(STRANGER, STRANGER, "now?")
            await reply_containing(fake, STRANGER, "echo: now?")
        assert [m["content"] for m in AgentJournal(tmp_path / "agent").messages()] == ["now?"]


async def test_new_starts_a_fresh_session(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "remember me")
            await reply_containing(fake, USER, "echo: remember me")
            fake.user_message(USER, USER, "/new")
            await reply_containing(fake, USER, "Started a new conversation")
            fake.user_message(USER, USER, "what did I just say")
            forgot = await reply_containing(fake, USER, "have not said anything")
            assert forgot.text == "You have not said anything yet."
            fake.user_message(USER, USER, "/start")
            hello = await reply_containing(fake, USER, "Hello!")
            assert "/new" in (hello.text or "")
        sessions = [m["session"] for m in AgentJournal(tmp_path / "agent").messages()]
        assert len(sessions) == 2 and sessions[0] != sessions[1]


async def test_edit_updates_a_queued_message_only(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "busy #slow=2")
            journal = AgentJournal(tmp_path / "agent")
            await journal.wait_until(lambda j: len(j.messages()) == 1, what="first turn")
            queued = fake.user_message(USER, USER, "typo hre")
            fake.edited_message(USER, queued["message"]["message_id"], "typo here")
            await daemon.wait_for_log(r"updated by an edit")
            await reply_containing(fake, USER, "echo: typo here")
            # An edit of an answered message changes nothing.
            fake.edited_message(USER, queued["message"]["message_id"], "too late")
            fake.user_message(USER, USER, "done")
            await reply_containing(fake, USER, "echo: done")
        contents = [m["content"] for m in journal.messages()]
        assert contents == ["busy #slow=2", "typo here", "done"]


async def test_deny_takes_effect_for_a_message_already_queued(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            # One worker, one turn at a time: OTHER_USER's held turn keeps USER's message in
            # the queue while the operator denies USER; released once the deny has been acted on.
            fake.user_message(OTHER_USER, OTHER_USER, "think #hold=deny")
            journal = AgentJournal(tmp_path / "agent")
            await journal.wait_until(lambda j: bool(j.messages()), what="the slow turn")
            queued = fake.user_message(USER, USER, "should never be read")
            await daemon.wait_for_log(rf"received .* id={USER}:{queued['message']['message_id']}")
            before = len(fake.sent_messages(USER))
            code, out, err = await run_cli("access", "deny", f"telegram:{USER}",
                                           "--config", str(config))
            assert code == 0, out + err
            assert "1 queued message(s) of theirs will not reach the agent" in out
            await daemon.wait_for_log(rf"access revoked for telegram:{USER}")
            assert not replies(fake, OTHER_USER, "echo: think")  # the turn is still held
            release = tmp_path / "agent" / "release"
            release.mkdir()
            (release / "deny").touch()
            await reply_containing(fake, OTHER_USER, "echo: think", timeout=30)
            # Round robin: had USER's message stayed queued, it would go before this one.
            fake.user_message(OTHER_USER, OTHER_USER, "and then")
            await reply_containing(fake, OTHER_USER, "echo: and then")
            assert len(fake.sent_messages(USER)) == before  # told nothing more
        contents = [m["content"] for m in journal.messages()]
        assert "should never be read" not in contents and "and then" in contents
        code, out, _ = await run_cli("sessions", "list", "--config", str(config))
        assert code == 0 and f"telegram:{USER}" in out
