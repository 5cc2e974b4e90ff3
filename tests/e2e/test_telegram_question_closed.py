"""A question closed other than by its own buttons, on Telegram, end to end: `picobridge run`
with the fake prime-rpc agent (tests/fakes/fake_prime_agent.py, `#ui=...` asks) and FakeTelegram.
A typed answer, the bridge's dialog timeout and the daemon stopping each take the question's
keyboard away and put the outcome under its text, also when the question closed before it
was even delivered; an edit Telegram refuses leaves the buttons (they then only say
"closed") and holds nothing up; after a crash a button of the old run says "closed".

Every test runs its own daemon: the dialog timeout and the stops are per daemon.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.prime_rpc_support import (
    CLOSED_LINE,
    CLOSED_NOTE,
    EXPIRED_LINE,
    fake_agent_settings,
    journal,
    ui_answered,
)
from tests.e2e.telegram_support import (
    USER,
    assert_no_token,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.harness import Daemon


def config(tmp: Path, fake: FakeTelegram, **bridge: Any) -> Path:
    return telegram_config(tmp, fake, agent=fake_agent_settings(tmp),
                           sections={"bridge": bridge} if bridge else None)


async def shows(fake: FakeTelegram, question: SentMessage, line: str, original: str) -> None:
    """The question ends with `line`, its text and formatting kept, and has no keyboard."""
    await fake.wait_for(lambda: question.reply_markup is None
                        and (question.text or "").endswith(line),
                        f"the question showing {line!r} without buttons")
    assert question.text == f"{original}\n\n{line}"
    assert any(e["type"] == "bold" for e in question.entities)
    assert question.buttons == []


async def asked(fake: FakeTelegram, text: str, title: str) -> tuple[SentMessage, str]:
    fake.user_message(USER, USER, text)
    question = await reply_containing(fake, USER, title)
    assert question.reply_markup is not None
    assert question.text is not None
    return question, question.text


async def test_a_typed_answer_takes_the_buttons_away_and_shows_it(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            question, original = await asked(fake, "#ui=confirm deploy", "Allow?")
            assert [[b["text"] for b in row] for row in question.buttons] == [
                ["Yes", "No"], ["Cancel"]]
            fake.user_message(USER, USER, "yes")
            await reply_containing(fake, USER, ui_answered("confirm", {"confirmed": True}))
            await shows(fake, question, "✓ Answer: yes", original)
            assert [t for t in fake.texts(USER) if t == "✓ Answer sent: yes"]
        assert_no_token(daemon, fake.token)
        assert "Traceback" not in daemon.log


async def test_the_dialog_timeout_takes_the_buttons_away(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(config(tmp_path, fake, dialog_timeout=1)) as daemon:
            await started(daemon, fake)
            question, original = await asked(fake, "#ui=select one", "Pick one")
            await reply_containing(fake, USER, ui_answered("select", {"cancelled": True}))
            await shows(fake, question, EXPIRED_LINE, original)
        assert "Traceback" not in daemon.log


async def test_a_question_that_expired_before_delivery_arrives_closed(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(config(tmp_path, fake, dialog_timeout=1)) as daemon:
            await started(daemon, fake)
            # The question's first send hits flood control for longer than the question lives:
            # it closes while the outbox still waits to send it.
            fake.fail_next("sendMessage", 429, retry_after=3)
            fake.user_message(USER, USER, "#ui=confirm late")
            question = await reply_containing(fake, USER, "Allow?")
            first = fake.calls_to("sendMessage")[0]
            assert first.status == 429 and "Allow?" in str(first.params.get("text"))
            # It may show the outcome already: its text as sent is then the first edit's.
            original = question.edits[0] if question.edits else question.text
            assert original is not None and EXPIRED_LINE not in original
            await shows(fake, question, EXPIRED_LINE, original)
            await reply_containing(fake, USER, ui_answered("confirm", {"cancelled": True}))
        assert "Traceback" not in daemon.log


async def test_a_refused_edit_leaves_buttons_that_only_say_closed(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            question, original = await asked(fake, "#ui=confirm secret-plan", "Allow?")
            fake.fail_next("editMessageText", 400, error="Bad Request: message to edit not found")
            fake.user_message(USER, USER, "no")
            await reply_containing(fake, USER, ui_answered("confirm", {"confirmed": False}))
            line = await daemon.wait_for_log(r"closed question \d+ keeps its buttons")
            assert "secret-plan" not in line and "Allow?" not in line
            assert question.text == original and question.reply_markup is not None
            # The chat goes on, and the stale button counts no more.
            update = fake.press_button(USER, question.message_id, USER, text="Yes")
            note = await fake.wait_for_callback_answer(update["callback_query"]["id"])
            assert note.get("text") == CLOSED_NOTE
            fake.user_message(USER, USER, "still there?")
            await reply_containing(fake, USER, "you said: still there?")
        assert "Traceback" not in daemon.log


async def test_stop_while_a_question_waits_ends_the_turn_once(tmp_path: Path) -> None:
    """The agent does not end a turn that waits on a question when asked to abort: after
    agent.abort_grace it is restarted. The question closes, and the message is not sent to
    the agent again (the person asked to stop it)."""
    async with FakeTelegram() as fake:
        config_path = telegram_config(tmp_path, fake,
                                      agent=fake_agent_settings(tmp_path, abort_grace=1))
        async with Daemon(config_path) as daemon:
            await started(daemon, fake)
            question, original = await asked(fake, "#ui=confirm stop-me", "Allow?")
            fake.user_message(USER, USER, "/stop")
            await reply_containing(fake, USER, "Stopping the reply being worked on")
            await reply_containing(fake, USER, "stopped: the agent was restarted")
            await shows(fake, question, CLOSED_LINE, original)
            fake.user_message(USER, USER, "and now?")
            await reply_containing(fake, USER, "you said: and now?")
            assert [p for p in journal(tmp_path).prompts() if "stop-me" in p] == [
                "#ui=confirm stop-me"]
            assert len(journal(tmp_path).starts()) == 2
        assert "Traceback" not in daemon.log


async def test_stopping_the_daemon_closes_open_questions(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        daemon = Daemon(config(tmp_path, fake))
        async with daemon:
            await started(daemon, fake)
            question, original = await asked(fake, "#ui=confirm before-stop", "Allow?")
            assert await daemon.stop() == 0
        # The daemon is gone; the question it left says so and has no buttons to press.
        await shows(fake, question, CLOSED_LINE, original)
        assert "Traceback" not in daemon.log


async def test_after_a_crash_an_old_button_says_closed(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        path = config(tmp_path, fake)
        async with Daemon(path) as daemon:
            await started(daemon, fake)
            question, original = await asked(fake, "#ui=confirm crash", "Allow?")
            await daemon.kill()
        async with Daemon(path) as again:
            await started(again, fake)
            # Nothing could take the old buttons away; they count no more.
            update = fake.press_button(USER, question.message_id, USER, text="Yes")
            note = await fake.wait_for_callback_answer(update["callback_query"]["id"])
            assert note.get("text") == CLOSED_NOTE
            assert question.text == original and question.reply_markup is not None
        assert "Traceback" not in again.log
