"""Which Telegram messages are for the bot, and what the agent gets from them."""

from __future__ import annotations

from typing import Any

from telegram import Message

from picobridge.adapters.telegram.normalise import (
    BotIdentity,
    addressed,
    chat_ref,
    media_of,
    message_text,
    platform_id,
    sender,
    strip_mention,
)
from picobridge.contract import ChatRef
from tests.fakes.telegram import FakeTelegram

COMMANDS = ("new", "status", "stop", "help", "start")
GROUP = -100555
FORUM = -100666


def setup() -> tuple[FakeTelegram, BotIdentity]:
    fake = FakeTelegram()
    return fake, BotIdentity(fake.bot_user["id"], fake.bot_user["username"])


def message(fake: FakeTelegram, *args: Any, **kwargs: Any) -> Message:
    update = fake.user_message(*args, enqueue=False, **kwargs)
    parsed = Message.de_json(update["message"], None)
    assert parsed is not None
    return parsed


def bot_message(fake: FakeTelegram, chat_id: int, thread: int | None = None) -> dict[str, Any]:
    """A message the bot sent in the chat, to reply to."""
    sent: dict[str, Any] = {"message_id": 900, "from": dict(fake.bot_user),
                            "chat": {"id": chat_id, "type": "supergroup"}, "date": 0,
                            "text": "earlier answer"}
    if thread is not None:
        sent.update(message_thread_id=thread, is_topic_message=True)
    return sent


def test_private_messages_are_always_for_the_bot() -> None:
    fake, bot = setup()
    msg = message(fake, 42, 42, "hi")
    assert addressed(msg, bot, COMMANDS)
    assert chat_ref(msg) == ChatRef("telegram", "42")
    assert platform_id(msg) == f"42:{msg.message_id}"
    assert message_text([msg], bot) == "hi"


def test_group_messages_need_a_mention_a_reply_or_our_command() -> None:
    fake, bot = setup()
    name = bot.username
    for text, expected in [
        ("nothing for the bot", False),
        (f"hey @{name.upper()} look", True),
        (f"/status@{name}", True),
        ("/status", True),  # Telegram leaves out @bot when the group has one bot
        ("/status@some_other_bot", False),
        ("/weather", False),  # not one of ours
        (f"mail me at x@{name}.com", False),
    ]:
        msg = message(fake, GROUP, 7, text)
        assert addressed(msg, bot, COMMANDS) is expected, text
    reply = message(fake, GROUP, 7, "about that", reply_to_message=bot_message(fake, GROUP))
    assert addressed(reply, bot, COMMANDS)
    other = message(fake, GROUP, 8, "first")
    reply_to_human = message(fake, GROUP, 7, "to a human", reply_to_message=other.message_id)
    assert not addressed(reply_to_human, bot, COMMANDS)


def test_text_mention_of_the_bot_counts() -> None:
    fake, bot = setup()
    entity = {"type": "text_mention", "offset": 0, "length": 3,
              "user": {"id": bot.id, "is_bot": True, "first_name": "Bot"}}
    msg = message(fake, GROUP, 7, "Bot, help", entities=[entity])
    assert addressed(msg, bot, COMMANDS)


def test_group_text_loses_the_mention_and_gains_the_speaker() -> None:
    fake, bot = setup()
    msg = message(fake, GROUP, 7, f"@{bot.username}  what  is\n    up?", first_name="Alice",
                  last_name="Liddell")
    assert message_text([msg], bot) == "Alice Liddell: what  is\n    up?"
    command = message(fake, GROUP, 7, f"/new@{bot.username}", first_name="Alice")
    assert message_text([command], bot) == "/new"
    assert strip_mention(f"ask @{bot.username}, please", bot.username) == "ask, please"
    assert strip_mention(f"hey @{bot.username} look", bot.username) == "hey look"
    assert strip_mention(f"@{bot.username}2 is another bot", bot.username).startswith("@")


def test_forum_topics_are_their_own_chats_but_group_replies_are_not() -> None:
    fake, bot = setup()
    topic = message(fake, FORUM, 7, f"@{bot.username} hi", message_thread_id=31,
                    is_topic_message=True)
    assert chat_ref(topic) == ChatRef("telegram", str(FORUM), "31")
    # In a plain group a reply carries message_thread_id too; it is still the group's chat.
    plain = message(fake, GROUP, 7, f"@{bot.username} hi", message_thread_id=12)
    assert chat_ref(plain) == ChatRef("telegram", str(GROUP))


def test_topic_creation_message_from_the_bot_is_not_a_reply_to_it() -> None:
    fake, bot = setup()
    created = bot_message(fake, FORUM, thread=31)
    created["forum_topic_created"] = {"name": "Topic", "icon_color": 0}
    msg = message(fake, FORUM, 7, "just talking in the topic", message_thread_id=31,
                  is_topic_message=True, reply_to_message=created)
    assert not addressed(msg, bot, COMMANDS)


def test_bots_channels_and_anonymous_admins_are_not_senders() -> None:
    fake, _ = setup()
    msg = message(fake, GROUP, 7, "x")
    assert sender(msg) is not None
    data = fake.user_message(GROUP, 7, "x", enqueue=False)["message"]
    data["from"]["is_bot"] = True
    assert sender(Message.de_json(data, None)) is None
    data["from"]["is_bot"] = False
    data["sender_chat"] = {"id": GROUP, "type": "supergroup", "title": "G"}
    assert sender(Message.de_json(data, None)) is None


def test_media_largest_photo_and_animation_once() -> None:
    fake, _ = setup()
    photo = fake.add_file(b"p" * 500, None, "image/jpeg", kind="photo", width=1280, height=960)
    msg = message(fake, 42, 42, photo=photo, caption="look")
    (ref,) = media_of(msg)
    assert ref.file_id == photo.file_id and ref.kind == "photo"
    assert ref.name.endswith(".jpg") and ref.mime == "image/jpeg"
    gif = fake.add_file(b"g" * 50, "fun.mp4", "video/mp4", kind="animation")
    (anim,) = media_of(message(fake, 42, 42, animation=gif))
    assert anim.kind == "animation" and anim.name == "fun.mp4"
    voice = fake.add_file(b"v", None, "audio/ogg", kind="voice")
    (ogg,) = media_of(message(fake, 42, 42, voice=voice))
    assert ogg.name.startswith("voice-") and ogg.name.endswith(".ogg")


def test_album_text_joins_captions() -> None:
    fake, bot = setup()
    first = message(fake, 42, 42, caption="one", media_group_id="g")
    second = message(fake, 42, 42, media_group_id="g")
    third = message(fake, 42, 42, caption="three", media_group_id="g")
    assert message_text([first, second, third], bot) == "one\n\nthree"
