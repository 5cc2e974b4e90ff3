"""The agent's questions on Telegram, end to end: `picobridge run` with a prime-rpc agent that
asks (tests/e2e/dialog_agent.py), FakeTelegram as Telegram. Confirm and select questions come
with an inline keyboard; a click reaches the agent as its extension_ui_response, the question
then shows the answer and its buttons are gone; clicks that must not count (a stranger's, a
second one, one in another chat) do nothing but tell the person why; input questions are
answered by the next message (a confirm answered so loses its buttons too:
test_telegram_question_closed.py has the other ways a question closes).

One polling daemon serves the module; every test talks in its own chat.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.telegram_support import assert_no_token, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.harness import Daemon

# One worker runs the whole module, so one daemon serves it (xdist would start the module
# fixture again in each worker its tests were spread over).
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_telegram_buttons")]

AGENT = Path(__file__).with_name("dialog_agent.py")
ALLOWED = [5001, 5002, 5003, 5004, 5005, 5006, 5007, 5008]
STRANGER = 9999
GROUP = -1001000000001
FORUM = -1001000000002
CLOSED = "This question is closed."
NOT_ALLOWED = "Sorry, only people allowed to talk to the agent can answer its questions."


@dataclass
class Env:
    fake: FakeTelegram
    daemon: Daemon


def dialog_config(tmp: Path, fake: FakeTelegram, **telegram: Any) -> Path:
    agent = {"protocol": "prime-rpc", "command": [sys.executable, str(AGENT)],
             # Chats wait for their questions' answers side by side.
             "pool_size": 4, "ping_interval": 2, "ping_timeout": 5}
    return telegram_config(tmp, fake, agent=agent, allowed_users=ALLOWED, **telegram)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("telegram-buttons")
    async with FakeTelegram() as fake:
        daemon = Daemon(dialog_config(tmp, fake))
        async with daemon:
            await started(daemon, fake)
            yield Env(fake, daemon)
        assert_no_token(daemon, fake.token)
        assert "Traceback" not in daemon.log


def got(answer: dict[str, Any]) -> str:
    """The agent's reply once it got `answer` (dialog_agent.py)."""
    return "got: " + json.dumps(answer, sort_keys=True)


def labels(message: SentMessage) -> list[list[str]]:
    return [[button["text"] for button in row] for row in message.buttons]


async def pressed(fake: FakeTelegram, message: SentMessage, user: int, text: str) -> str:
    """Press a button of `message`; returns the note the bot answered the click with."""
    update = fake.press_button(message.chat_id, message.message_id, user, text=text)
    answer = await fake.wait_for_callback_answer(update["callback_query"]["id"])
    await fake.wait_until_confirmed(update["update_id"])
    return str(answer.get("text"))


async def shows_answer(fake: FakeTelegram, message: SentMessage, shown: str) -> None:
    await fake.wait_for(lambda: (message.text or "").endswith(f"\n\n✓ Answer: {shown}")
                        and message.reply_markup is None, f"the question showing {shown!r}")


async def test_a_confirm_answered_with_a_button_reaches_the_agent(env: Env) -> None:
    fake, chat = env.fake, ALLOWED[0]
    fake.user_message(chat, chat, "please confirm the deploy")
    question = await reply_containing(fake, chat, "Deploy now?")
    assert "callback_query" in fake.allowed_updates
    assert labels(question) == [["Yes", "No"], ["Cancel"]]
    datas = [b["callback_data"] for row in question.buttons for b in row]
    assert all(d.startswith("d:") and len(d.encode()) <= 64 for d in datas)
    assert len(set(datas)) == 3
    # The text still says how to answer by typing; the buttons are under it.
    assert question.text is not None and "Reply yes or no" in question.text
    original = question.text

    assert await pressed(fake, question, chat, "Yes") == "✓ Answer: yes"
    await reply_containing(fake, chat, got({"confirmed": True}))
    await shows_answer(fake, question, "yes")
    assert question.text == f"{original}\n\n✓ Answer: yes"
    # The formatting of the question survived the edit.
    assert any(e["type"] == "bold" for e in question.entities)


async def test_a_strangers_click_does_nothing_and_they_are_told(env: Env) -> None:
    fake, asker = env.fake, ALLOWED[1]
    fake.user_message(GROUP, asker, "@picobridge_test_bot confirm this", chat_type="supergroup")
    question = await reply_containing(fake, GROUP, "Deploy now?")

    assert await pressed(fake, question, STRANGER, "Yes") == NOT_ALLOWED
    assert question.reply_markup is not None  # still open for the people allowed

    # Someone allowed answers: the agent hears only that answer, not the stranger's yes.
    assert await pressed(fake, question, ALLOWED[2], "No") == "✓ Answer: no"
    await reply_containing(fake, GROUP, got({"confirmed": False}))
    await shows_answer(fake, question, "no")
    assert not [m for m in fake.texts(GROUP) if m.startswith("got:") and "true" in m]


async def test_a_second_click_on_an_answered_question_does_nothing(env: Env) -> None:
    fake, chat = env.fake, ALLOWED[2]
    fake.user_message(chat, chat, "confirm twice")
    question = await reply_containing(fake, chat, "Deploy now?")
    # Two clicks before the bot saw the first (a double tap): both reach the bot.
    first = fake.press_button(chat, question.message_id, chat, text="No")
    second = fake.press_button(chat, question.message_id, chat, text="Yes")
    answers = [await fake.wait_for_callback_answer(u["callback_query"]["id"])
               for u in (first, second)]
    assert [a.get("text") for a in answers] == ["✓ Answer: no", CLOSED]
    await shows_answer(fake, question, "no")
    # The agent got one answer: whatever it said to a second one would come before this.
    fake.user_message(chat, chat, "afterwards")
    await reply_containing(fake, chat, "you said: afterwards")
    assert [t for t in fake.texts(chat) if t.startswith("got:")] == [got({"confirmed": False})]


async def test_a_click_in_another_chat_does_nothing(env: Env) -> None:
    fake, asker, other = env.fake, ALLOWED[3], ALLOWED[4]
    fake.user_message(asker, asker, "confirm it")
    question = await reply_containing(fake, asker, "Deploy now?")
    fake.user_message(other, other, "hello")
    elsewhere = await reply_containing(fake, other, "you said: hello")
    yes = question.buttons[0][0]["callback_data"]
    # A click that names the question of another chat (Telegram only sends the data of a
    # button on the message clicked, so only a forged update could carry it).
    forged = fake.callback_query_update(other, elsewhere.message_id, other, yes)
    answer = await fake.wait_for_callback_answer(forged["callback_query"]["id"])
    assert answer.get("text") == CLOSED
    assert question.reply_markup is not None and elsewhere.edits == []

    assert await pressed(fake, question, asker, "Cancel") == "✓ Answer: cancelled"
    await reply_containing(fake, asker, got({"cancelled": True}))
    await shows_answer(fake, question, "cancelled")
    assert not [t for t in fake.texts(other) if t.startswith("got:")]


async def test_a_select_shows_one_button_per_option(env: Env) -> None:
    fake, chat = env.fake, ALLOWED[5]
    fake.user_message(chat, chat, "select a colour")
    question = await reply_containing(fake, chat, "Which colour?")
    assert labels(question) == [["red"], ["green"], ["blue"], ["Cancel"]]
    assert await pressed(fake, question, chat, "green") == "✓ Answer: green"
    await reply_containing(fake, chat, got({"value": "green"}))
    await shows_answer(fake, question, "green")
    # The keyboard is gone: nobody can press it any more.
    with pytest.raises(LookupError):
        fake.press_button(chat, question.message_id, chat, text="red")


async def test_a_question_in_a_forum_topic_is_answered_there(env: Env) -> None:
    fake, user = env.fake, ALLOWED[7]
    fake.user_message(FORUM, user, "@picobridge_test_bot confirm in the topic",
                      message_thread_id=11, is_topic_message=True)
    question = await reply_containing(fake, FORUM, "Deploy now?")
    assert question.message_thread_id == 11
    # The topic is the conversation: a click there answers the topic's question.
    assert await pressed(fake, question, user, "Yes") == "✓ Answer: yes"
    answer = await reply_containing(fake, FORUM, got({"confirmed": True}))
    assert answer.message_thread_id == 11
    await shows_answer(fake, question, "yes")


async def test_typed_answers_still_work(env: Env) -> None:
    fake, chat = env.fake, ALLOWED[6]
    fake.user_message(chat, chat, "input your name")
    question = await reply_containing(fake, chat, "Your name?")
    assert question.reply_markup is None  # input is answered by the next message
    fake.user_message(chat, chat, "Ada Lovelace")
    await reply_containing(fake, chat, "✓ Answer sent: Ada Lovelace")
    await reply_containing(fake, chat, got({"value": "Ada Lovelace"}))

    # A confirm answered by typing: it shows the answer as a click would, buttons gone.
    fake.user_message(chat, chat, "confirm by typing")
    confirm = await reply_containing(fake, chat, "Deploy now?")
    fake.user_message(chat, chat, "yes")
    await reply_containing(fake, chat, got({"confirmed": True}))
    await shows_answer(fake, confirm, "yes")
    fake.user_message(chat, chat, "and then")
    await reply_containing(fake, chat, "you said: and then")
    assert [t for t in fake.texts(chat) if t.startswith("got:")] == [
        got({"value": "Ada Lovelace"}), got({"confirmed": True})]


async def test_unreadable_callback_queries_are_skipped(env: Env) -> None:
    fake, chat = env.fake, ALLOWED[7]
    bad = [fake.enqueue_update({"callback_query": "not an object"}),
           fake.enqueue_update({"callback_query": {"id": 7, "from": {"id": chat},
                                                   "chat_instance": "1", "data": "d:x:y"}}),
           fake.enqueue_update({"callback_query": {"id": "8", "chat_instance": "1"}})]
    fake.user_message(chat, chat, "still here")
    await reply_containing(fake, chat, "you said: still here")
    await fake.wait_until_confirmed(bad[-1]["update_id"])
    for update in bad:
        assert f"update {update['update_id']} skipped" in env.daemon.log
    assert "d:x:y" not in env.daemon.log


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_click_through_the_webhook(tmp_path: Path) -> None:
    port, chat = _free_port(), ALLOWED[0]
    async with FakeTelegram() as fake:
        config = dialog_config(tmp_path, fake, mode="webhook",
                               webhook_url=f"http://127.0.0.1:{port}/telegram/webhook",
                               sections={"http": {"listen": f"127.0.0.1:{port}"}})
        async with Daemon(config) as daemon:
            await daemon.wait_for_log(r"http listening")
            await daemon.wait_for_log(r"webhook set")
            fake.user_message(chat, chat, "select something")
            assert await fake.deliver_webhook() == 1
            question = await reply_containing(fake, chat, "Which colour?")
            update = fake.press_button(chat, question.message_id, chat, text="blue")
            assert await fake.deliver_webhook() == 1  # answered 200 once handled
            answer = await fake.wait_for_callback_answer(update["callback_query"]["id"])
            assert answer.get("text") == "✓ Answer: blue"
            await reply_containing(fake, chat, got({"value": "blue"}))
            await shows_answer(fake, question, "blue")
        assert_no_token(daemon, fake.token)
