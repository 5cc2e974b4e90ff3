"""A question closed other than by its own buttons, on Telegram, end to end: `picobridge run`
with the fake prime-rpc agent (tests/fakes/fake_prime_agent.py, `#ui=...` asks) and FakeTelegram.
A typed answer, the bridge's dialog timeout and the daemon stopping each take the question's
keyboard away and put the outcome under its text, also when the question closed before it
was even delivered; an edit Telegram refuses leaves the buttons (they then only say
"closed") and holds nothing up; after a crash a button of the old run says "closed".

One daemon serves the tests that do not stop it, another (with a one-second dialog timeout)
the two about the timeout; every test talks in its own chat. The tests stopping or killing
the daemon run their own, after the shared ones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

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
    SharedDaemon,
    reply_containing,
    shared_daemon,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.harness import Daemon

# One worker runs the whole module, in order, so each shared daemon is started once.
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_telegram_question_closed")]

# Each test's own person (their private chat has their id).
TYPED, REFUSED, STOPPED, EXPIRED, LATE = 6101, 6102, 6103, 6104, 6105
POOL = 4


def config(tmp: Path, fake: FakeTelegram, *, agent: dict[str, Any] | None = None,
           **bridge: Any) -> Path:
    agent = agent or {}
    return telegram_config(tmp, fake, agent=fake_agent_settings(tmp, **agent),
                           allowed_users=[USER, TYPED, REFUSED, STOPPED, EXPIRED, LATE],
                           sections={"bridge": bridge} if bridge else None)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedDaemon]:
    # abort_grace only counts for a /stop the agent does not obey: only the /stop test has
    # one. A pool, so that a question a failed test left open holds up no other test's chat.
    tmp = tmp_path_factory.mktemp("telegram-question-closed")
    async with FakeTelegram() as fake, shared_daemon(
            tmp, fake, config(tmp, fake, agent={"abort_grace": 1, "pool_size": POOL})) as shared:
        # All started, so that the /stop test counts only the restart it causes.
        await shared.daemon.wait_until(
            lambda: sum("agent ready pid=" in line for line in shared.daemon.log_lines) >= POOL,
            what=f"the pool's {POOL} workers ready")
        yield shared


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_timeout_daemon(
        tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedDaemon]:
    tmp = tmp_path_factory.mktemp("telegram-question-timeout")
    async with FakeTelegram() as fake, shared_daemon(
            tmp, fake, config(tmp, fake, agent={"pool_size": 2}, dialog_timeout=1)) as shared:
        yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def env(module_daemon: SharedDaemon) -> AsyncIterator[SharedDaemon]:
    async with module_daemon.test() as shared:
        yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def timeout_env(module_timeout_daemon: SharedDaemon) -> AsyncIterator[SharedDaemon]:
    async with module_timeout_daemon.test() as shared:
        yield shared


async def shows(fake: FakeTelegram, question: SentMessage, line: str, original: str) -> None:
    """The question ends with `line`, its text and formatting kept, and has no keyboard."""
    await fake.wait_for(lambda: question.reply_markup is None
                        and (question.text or "").endswith(line),
                        f"the question showing {line!r} without buttons")
    assert question.text == f"{original}\n\n{line}"
    assert any(e["type"] == "bold" for e in question.entities)
    assert question.buttons == []


async def asked(fake: FakeTelegram, text: str, title: str,
                user: int = USER) -> tuple[SentMessage, str]:
    fake.user_message(user, user, text)
    question = await reply_containing(fake, user, title)
    assert question.reply_markup is not None
    assert question.text is not None
    return question, question.text


async def test_a_typed_answer_takes_the_buttons_away_and_shows_it(env: SharedDaemon) -> None:
    fake = env.fake
    question, original = await asked(fake, "#ui=confirm deploy", "Allow?", TYPED)
    assert [[b["text"] for b in row] for row in question.buttons] == [
        ["Yes", "No"], ["Cancel"]]
    fake.user_message(TYPED, TYPED, "yes")
    await reply_containing(fake, TYPED, ui_answered("confirm", {"confirmed": True}))
    await shows(fake, question, "✓ Answer: yes", original)
    assert [t for t in fake.texts(TYPED) if t == "✓ Answer sent: yes"]
    assert "Traceback" not in env.log


async def test_the_dialog_timeout_takes_the_buttons_away(timeout_env: SharedDaemon) -> None:
    fake = timeout_env.fake
    question, original = await asked(fake, "#ui=select one", "Pick one", EXPIRED)
    await reply_containing(fake, EXPIRED, ui_answered("select", {"cancelled": True}))
    await shows(fake, question, EXPIRED_LINE, original)
    assert "Traceback" not in timeout_env.log


async def test_a_question_that_expired_before_delivery_arrives_closed(
        timeout_env: SharedDaemon) -> None:
    fake = timeout_env.fake
    # The question's first send hits flood control for longer than the question lives:
    # it closes while the outbox still waits to send it.
    fake.fail_next("sendMessage", 429, retry_after=3)
    fake.user_message(LATE, LATE, "#ui=confirm late")
    question = await reply_containing(fake, LATE, "Allow?")
    first = next(c for c in fake.calls_to("sendMessage") if c.params.get("chat_id") == LATE)
    assert first.status == 429 and "Allow?" in str(first.params.get("text"))
    # It may show the outcome already: its text as sent is then the first edit's.
    original = question.edits[0] if question.edits else question.text
    assert original is not None and EXPIRED_LINE not in original
    await shows(fake, question, EXPIRED_LINE, original)
    await reply_containing(fake, LATE, ui_answered("confirm", {"cancelled": True}))
    assert "Traceback" not in timeout_env.log


async def test_a_refused_edit_leaves_buttons_that_only_say_closed(env: SharedDaemon) -> None:
    fake = env.fake
    question, original = await asked(fake, "#ui=confirm secret-plan", "Allow?", REFUSED)
    fake.fail_next("editMessageText", 400, error="Bad Request: message to edit not found")
    fake.user_message(REFUSED, REFUSED, "no")
    await reply_containing(fake, REFUSED, ui_answered("confirm", {"confirmed": False}))
    line = await env.wait_for_log(r"closed question \d+ keeps its buttons")
    assert "secret-plan" not in line and "Allow?" not in line
    assert question.text == original and question.reply_markup is not None
    # The chat goes on, and the stale button counts no more.
    update = fake.press_button(REFUSED, question.message_id, REFUSED, text="Yes")
    note = await fake.wait_for_callback_answer(update["callback_query"]["id"])
    assert note.get("text") == CLOSED_NOTE
    fake.user_message(REFUSED, REFUSED, "still there?")
    await reply_containing(fake, REFUSED, "you said: still there?")
    assert "Traceback" not in env.log


async def test_stop_while_a_question_waits_ends_the_turn_once(env: SharedDaemon) -> None:
    """The agent does not end a turn that waits on a question when asked to abort: after
    agent.abort_grace it is restarted. The question closes, and the message is not sent to
    the agent again (the person asked to stop it)."""
    fake, agent = env.fake, journal(env.tmp)
    starts_before = len(agent.starts())
    question, original = await asked(fake, "#ui=confirm stop-me", "Allow?", STOPPED)
    fake.user_message(STOPPED, STOPPED, "/stop")
    await reply_containing(fake, STOPPED, "Stopping the reply being worked on")
    await reply_containing(fake, STOPPED, "stopped: the agent was restarted")
    await shows(fake, question, CLOSED_LINE, original)
    fake.user_message(STOPPED, STOPPED, "and now?")
    await reply_containing(fake, STOPPED, "you said: and now?")
    assert [p for p in agent.prompts() if "stop-me" in p] == ["#ui=confirm stop-me"]
    # Another worker of the pool may have answered: wait for the restarted one.
    await env.wait_for_log(r"agent ready pid=")
    assert len(agent.starts()) == starts_before + 1  # restarted once
    assert "Traceback" not in env.log


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
