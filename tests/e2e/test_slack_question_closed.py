"""A question closed other than by its own buttons, on Slack, end to end: `picobridge run` with
the fake prime-rpc agent (tests/fakes/fake_prime_agent.py, `#ui=...` asks) and FakeSlack in
Socket Mode. A typed answer and the bridge's dialog timeout take the question's buttons away
(chat.update with its blocks) and put the outcome under its text, as does the daemon
stopping; an update Slack refuses leaves the buttons (they then only say "closed") and holds
nothing up.

Every test runs its own daemon: the dialog timeout is per daemon.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.prime_rpc_support import (
    CLOSED_LINE,
    CLOSED_NOTE,
    EXPIRED_LINE,
    fake_agent_settings,
    ui_answered,
)
from tests.e2e.slack_support import assert_no_secrets, reply_to, slack_config
from tests.fakes.slack import DEFAULT_USER, FakeSlack, PostedMessage
from tests.harness import Daemon


def config(tmp: Path, fake: FakeSlack, **bridge: Any) -> Path:
    return slack_config(tmp, fake, agent=fake_agent_settings(tmp),
                        sections={"bridge": bridge} if bridge else None)


def types(message: PostedMessage) -> list[str]:
    return [b["type"] for b in message.blocks or ()]


async def asked(fake: FakeSlack, text: str, title: str) -> tuple[PostedMessage, str, str]:
    """The user's DM `text`; returns the question, its text and its DM channel."""
    event = fake.dm_message(text)
    await fake.send_event(event)
    question = await reply_to(fake, event["channel"], title)
    assert types(question) == ["section", "actions"]
    return question, question.text, event["channel"]


async def shows(fake: FakeSlack, question: PostedMessage, line: str, original: str) -> None:
    """The question ends with `line` (plain text, never mrkdwn), keeps its section and has no
    buttons left to click."""
    await fake.wait_for(lambda: question.text.endswith(line) and "actions" not in types(question),
                        f"the question showing {line!r} without buttons")
    assert question.text == f"{original}\n\n{line}"
    assert types(question) == ["section", "section"]
    assert question.blocks is not None
    assert question.blocks[-1]["text"] == {"type": "plain_text", "text": line, "emoji": True}
    with pytest.raises(LookupError):
        fake.block_actions_payload(question, text="Cancel")


async def test_a_typed_answer_takes_the_buttons_away_and_shows_it(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        async with Daemon(config(tmp_path, fake)) as daemon:
            await fake.wait_for_socket()
            question, original, dm = await asked(fake, "#ui=select colour", "Pick one")
            await fake.send_event(fake.dm_message("2"))
            await reply_to(fake, dm, ui_answered("select", {"value": "Block"}))
            await shows(fake, question, "✓ Answer: Block", original)
            await reply_to(fake, dm, "✓ Answer sent: Block")
        assert_no_secrets(daemon, fake)
        assert "Traceback" not in daemon.log


async def test_the_dialog_timeout_takes_the_buttons_away(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        async with Daemon(config(tmp_path, fake, dialog_timeout=1)) as daemon:
            await fake.wait_for_socket()
            question, original, dm = await asked(fake, "#ui=confirm deploy", "Allow?")
            await reply_to(fake, dm, ui_answered("confirm", {"cancelled": True}))
            await shows(fake, question, EXPIRED_LINE, original)
        assert "Traceback" not in daemon.log


async def test_a_refused_update_leaves_buttons_that_only_say_closed(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        async with Daemon(config(tmp_path, fake)) as daemon:
            await fake.wait_for_socket()
            question, original, dm = await asked(fake, "#ui=confirm secret-plan", "Allow?")
            fake.fail_next("chat.update", 200, error="message_not_found")
            await fake.send_event(fake.dm_message("no"))
            await reply_to(fake, dm, ui_answered("confirm", {"confirmed": False}))
            line = await daemon.wait_for_log(r"closed question \S+ keeps its buttons "
                                             r"\(message_not_found\)")
            assert "secret-plan" not in line and "Allow?" not in line
            assert question.text == original and "actions" in types(question)
            # The conversation goes on, and the stale button counts no more.
            await fake.click(question, "Yes")
            await fake.wait_for(lambda: any(e.user == DEFAULT_USER and e.text == CLOSED_NOTE
                                            for e in fake.ephemeral_messages),
                                "the person told the question is closed")
            await fake.send_event(fake.dm_message("still there?"))
            await reply_to(fake, dm, "you said: still there?")
        assert "Traceback" not in daemon.log


async def test_stopping_the_daemon_closes_open_questions(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        daemon = Daemon(config(tmp_path, fake))
        async with daemon:
            await fake.wait_for_socket()
            question, original, _ = await asked(fake, "#ui=confirm before-stop", "Allow?")
            assert await daemon.stop() == 0
        # The daemon is gone; the question it left says so and has no buttons to click.
        await shows(fake, question, CLOSED_LINE, original)
        assert "Traceback" not in daemon.log
