"""The fake Telegram Bot API, driven by the real python-telegram-bot.

These tests pin the fake to what PTB actually sends and expects, so the end-to-end tests that use
the fake exercise the same code paths (and the same exceptions) as production.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
from collections.abc import AsyncIterator

import pytest
import telegram
from aiohttp import ClientSession, ClientTimeout, web
from telegram import BotCommand, MessageEntity, ReplyParameters
from telegram.error import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TimedOut,
)
from telegram.ext import Application, CommandHandler, ContextTypes, MessageHandler, filters

from picobridge.adapters.telegram.render import render_telegram
from tests.fakes.server import DOWNLOAD
from tests.fakes.telegram import FakeTelegram

# PTB 22 warns (even inside RetryAfter.__init__) that durations will become timedeltas.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

CHAT = 42
GROUP = -1001234567890


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def make_bot(fake: FakeTelegram, token: str | None = None) -> telegram.Bot:
    return telegram.Bot(
        token or fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url
    )


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[telegram.Bot]:
    async with make_bot(fake) as client:
        yield client


def seconds(value: int | float | dtm.timedelta) -> float:
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


def retry_seconds(exc: RetryAfter) -> float:
    return seconds(exc.retry_after)


# ---- basics -----------------------------------------------------------------------------------


async def test_get_me(fake: FakeTelegram, bot: telegram.Bot) -> None:
    me = await bot.get_me()
    assert me.is_bot
    assert me.username == "picobridge_test_bot"
    assert me.id == int(fake.token.split(":")[0])
    assert [c.method for c in fake.calls].count("getMe") >= 1


async def test_wrong_token_is_invalid_token(fake: FakeTelegram) -> None:
    with pytest.raises(InvalidToken):
        async with make_bot(fake, "999:wrong"):  # initialising calls getMe
            pass
    assert fake.calls == []


async def test_raw_envelopes_json_body_and_get(fake: FakeTelegram) -> None:
    async with ClientSession() as http:
        async with http.post(f"{fake.url}/bot1:nope/getMe") as resp:
            assert resp.status == 401
            assert await resp.json() == {
                "ok": False,
                "error_code": 401,
                "description": "Unauthorized",
            }
        async with http.post(f"{fake.base_url}{fake.token}/noSuchMethod") as resp:
            assert resp.status == 404
        # JSON bodies keep their types; GET query strings are decoded like form values.
        body = {
            "chat_id": CHAT,
            "text": "json",
            "entities": [{"type": "bold", "offset": 0, "length": 4}],
        }
        async with http.post(f"{fake.base_url}{fake.token}/sendMessage", json=body) as resp:
            data = await resp.json()
            assert data["ok"] is True
            assert data["result"]["entities"] == body["entities"]
        async with http.get(
            f"{fake.base_url}{fake.token}/sendmessage", params={"chat_id": "42", "text": "get"}
        ) as resp:
            assert (await resp.json())["result"]["text"] == "get"
        fake.fail_next("sendMessage", 429, retry_after=7)
        async with http.post(f"{fake.base_url}{fake.token}/sendMessage", json=body) as resp:
            assert resp.status == 429
            assert await resp.json() == {
                "ok": False,
                "error_code": 429,
                "description": "Too Many Requests: retry after 7",
                "parameters": {"retry_after": 7},
            }
    assert [m.text for m in fake.sent_messages(CHAT)] == ["json", "get"]
    assert fake.calls[-1].method == "sendMessage"  # method names are case-insensitive


# ---- sending text -----------------------------------------------------------------------------


async def test_send_message_is_recorded(fake: FakeTelegram, bot: telegram.Bot) -> None:
    update = fake.user_message(CHAT, CHAT, "question")
    asked = update["message"]["message_id"]
    sent = await bot.send_message(
        CHAT, "answer", reply_parameters=ReplyParameters(message_id=asked)
    )
    assert sent.text == "answer"
    assert sent.message_id == asked + 1  # ids are per chat, shared with the user's messages
    assert sent.reply_to_message is not None
    assert sent.reply_to_message.text == "question"
    [record] = fake.sent_messages(CHAT)
    assert (record.text, record.reply_to_message_id, record.kind) == ("answer", asked, "text")
    assert fake.texts() == ["answer"]
    assert fake.message(CHAT, sent.message_id) is not None

    topic = await bot.send_message(GROUP, "in topic", message_thread_id=7)
    assert topic.message_id == 1
    assert fake.sent_messages(GROUP)[0].message_thread_id == 7


async def test_reply_to_unknown_message(bot: telegram.Bot, fake: FakeTelegram) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message to be replied not found"):
        await bot.send_message(CHAT, "x", reply_parameters=ReplyParameters(message_id=999))
    await bot.send_message(
        CHAT,
        "x",
        reply_parameters=ReplyParameters(message_id=999, allow_sending_without_reply=True),
    )
    assert fake.sent_messages(CHAT)[0].reply_to_message_id is None


async def test_text_length_counts_utf16(bot: telegram.Bot, fake: FakeTelegram) -> None:
    await bot.send_message(CHAT, "😀" * 2048)  # 4096 UTF-16 code units: the limit
    await bot.send_message(CHAT, "a" * 4096 + "\n\n  ")  # surrounding whitespace is trimmed
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(CHAT, "😀" * 2048 + "a")
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(CHAT, "x" * 4097)
    # Entities do not count towards the limit.
    bold = MessageEntity(MessageEntity.BOLD, offset=0, length=4096)
    await bot.send_message(CHAT, "y" * 4096, entities=[bold])
    assert len(fake.sent_messages(CHAT)) == 3


async def test_empty_text(bot: telegram.Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(CHAT, "  \n ")


async def test_parse_mode_is_refused_loudly(bot: telegram.Bot, fake: FakeTelegram) -> None:
    # picobridge sends entities, never markup; the fake does not parse markup, and says so
    # without the words the product's "formatting refused" fallback looks for.
    for mode in ("HTML", "MarkdownV2"):
        with pytest.raises(BadRequest, match="markup mode") as info:
            await bot.send_message(CHAT, "<b>x</b>", parse_mode=mode)
        assert "entit" not in info.value.message.lower()
        assert "parse" not in info.value.message.lower()
    assert fake.sent_messages(CHAT) == []


async def test_renderer_output_is_accepted(bot: telegram.Bot) -> None:
    markdown = (
        "# Title\n\n**bold** and _it_ `code` v1.2! (x) [link](https://ex.com/a_b) 😀\n\n"
        "> quoted\n\n- item\n\n```python\nprint('a`b')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    for chunk in render_telegram(markdown):
        sent = await bot.send_message(CHAT, chunk.text, entities=chunk.entities)
        assert "**" not in (sent.text or "")
        assert len(sent.entities) == len(chunk.entities)


async def test_explicit_entities(bot: telegram.Bot) -> None:
    sent = await bot.send_message(
        CHAT, "😀 hi", entities=[MessageEntity(MessageEntity.BOLD, offset=3, length=2)]
    )
    assert sent.entities[0].offset == 3
    bad = [
        MessageEntity(MessageEntity.BOLD, offset=3, length=3),  # past the end in UTF-16
        MessageEntity(MessageEntity.BOLD, offset=1, length=2),  # splits the surrogate pair
        MessageEntity("no_such_type", offset=0, length=1),
        MessageEntity(MessageEntity.TEXT_LINK, offset=0, length=2, url="javascript:alert(1)"),
    ]
    for entity in bad:
        with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
            await bot.send_message(CHAT, "😀 hi", entities=[entity])


async def test_caption_limit(bot: telegram.Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message caption is too long"):
        await bot.send_document(CHAT, b"x", filename="a.txt", caption="c" * 1025)


# ---- edits, deletes, actions ------------------------------------------------------------------


async def test_edit_message_text(bot: telegram.Bot, fake: FakeTelegram) -> None:
    sent = await bot.send_message(CHAT, "hi")
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("hi", chat_id=CHAT, message_id=sent.message_id)
    bold = MessageEntity(MessageEntity.BOLD, offset=0, length=5)
    edited = await bot.edit_message_text(
        "hello", chat_id=CHAT, message_id=sent.message_id, entities=[bold]
    )
    assert isinstance(edited, telegram.Message)
    assert edited.text == "hello" and edited.entities == (bold,)
    assert edited.edit_date is not None
    [record] = fake.sent_messages(CHAT)
    assert (record.text, record.edits) == ("hello", ["hi"])
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_text("x", chat_id=CHAT, message_id=999)
    user = fake.user_message(CHAT, CHAT, "mine")["message"]["message_id"]
    with pytest.raises(BadRequest, match=r"(?i)message can't be edited"):
        await bot.edit_message_text("x", chat_id=CHAT, message_id=user)


async def test_delete_message(bot: telegram.Bot, fake: FakeTelegram) -> None:
    sent = await bot.send_message(CHAT, "temporary")
    assert await bot.delete_message(CHAT, sent.message_id)
    assert fake.sent_messages(CHAT) == []
    assert fake.sent_messages(CHAT, include_deleted=True)[0].deleted
    with pytest.raises(BadRequest, match=r"(?i)message to delete not found"):
        await bot.delete_message(CHAT, sent.message_id)


async def test_chat_action(bot: telegram.Bot, fake: FakeTelegram) -> None:
    assert await bot.send_chat_action(CHAT, "typing", message_thread_id=3)
    assert [(a.chat_id, a.action, a.message_thread_id) for a in fake.chat_actions] == [
        (CHAT, "typing", 3)
    ]
    with pytest.raises(BadRequest, match=r"(?i)wrong parameter action"):
        await bot.send_chat_action(CHAT, "dancing")


async def test_blocked_chat(bot: telegram.Bot, fake: FakeTelegram) -> None:
    fake.block_chat(CHAT)
    with pytest.raises(Forbidden, match=r"(?i)blocked"):
        await bot.send_message(CHAT, "hi")
    fake.unblock_chat(CHAT)
    await bot.send_message(CHAT, "hi")


# ---- long polling -----------------------------------------------------------------------------


async def test_long_poll_waits_and_wakes(bot: telegram.Bot, fake: FakeTelegram) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await fake.wait_for_poll()
    assert not poll.done()  # the poll stays parked while there is nothing to deliver
    fake.user_message(CHAT, CHAT, "/start now", username="alice")
    # Woken by the update: a poll that ran out its 10 s would bring nothing.
    [update] = await poll
    assert update.message is not None
    assert update.message.text == "/start now"
    assert update.message.from_user is not None
    assert update.message.from_user.username == "alice"
    assert update.message.entities[0].type == MessageEntity.BOT_COMMAND
    assert update.effective_chat is not None and update.effective_chat.type == "private"


async def test_offset_confirms_and_timeout_returns_empty(
    bot: telegram.Bot, fake: FakeTelegram
) -> None:
    first = fake.user_message(CHAT, CHAT, "one")["update_id"]
    second = fake.user_message(CHAT, CHAT, "two")["update_id"]
    assert second == first + 1
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == [first, second]
    # Not confirmed yet: delivered again.
    assert [u.update_id for u in await bot.get_updates(timeout=0, limit=1)] == [first]
    assert [u.update_id for u in await bot.get_updates(offset=second, timeout=0)] == [second]
    assert fake.confirmed_offset == second
    await fake.wait_until_confirmed(first)
    # With nothing to deliver the long poll is held open, then ends empty at its timeout.
    parked = asyncio.create_task(fake.wait_for_poll())
    assert await bot.get_updates(offset=second + 1, timeout=1) == ()
    await parked
    assert fake.active_polls == 0 and fake.pending_updates == []


async def test_redeliver_and_allowed_updates(bot: telegram.Bot, fake: FakeTelegram) -> None:
    update_id = fake.user_message(CHAT, CHAT, "hello")["update_id"]
    fake.enqueue_update({"message_reaction": {"chat": {"id": CHAT, "type": "private"}}})
    updates = await bot.get_updates(timeout=0)
    assert [u.update_id for u in updates] == [update_id]  # reactions are opt-in
    assert await bot.get_updates(offset=update_id + 1, timeout=0) == ()
    await fake.redeliver(update_id)
    again = await bot.get_updates(offset=update_id + 1, timeout=0)
    assert [u.update_id for u in again] == [update_id]
    assert again[0].message is not None and again[0].message.text == "hello"

    fake.user_message(CHAT, CHAT, "ignored")
    assert await bot.get_updates(timeout=0, allowed_updates=["edited_message"]) == ()
    edit = fake.edited_message(CHAT, again[0].message.message_id, "hello!")
    [edited] = await bot.get_updates(timeout=0)
    assert edited.update_id == edit["update_id"]
    assert edited.edited_message is not None and edited.edited_message.text == "hello!"


async def test_concurrent_get_updates_conflict(fake: FakeTelegram) -> None:
    async with make_bot(fake) as first, make_bot(fake) as second:
        older = asyncio.create_task(first.get_updates(timeout=10))
        await fake.wait_for_poll()
        newer = asyncio.create_task(second.get_updates(timeout=10))
        with pytest.raises(Conflict, match=r"(?i)terminated by other getUpdates request"):
            await asyncio.wait_for(older, 3)
        fake.user_message(CHAT, CHAT, "x")
        assert len(await asyncio.wait_for(newer, 3)) == 1


async def test_webhook(bot: telegram.Bot, fake: FakeTelegram) -> None:
    received: list[tuple[str | None, dict[str, object]]] = []

    async def hook(request: web.Request) -> web.Response:
        received.append(
            (request.headers.get("X-Telegram-Bot-Api-Secret-Token"), await request.json())
        )
        return web.Response()

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        await bot.set_webhook(f"http://127.0.0.1:{port}/hook", secret_token="s3cret")
        assert fake.webhook is not None and fake.webhook["secret_token"] == "s3cret"
        with pytest.raises(Conflict, match=r"(?i)webhook is active"):
            await bot.get_updates(timeout=0)
        fake.user_message(CHAT, CHAT, "via hook")
        assert await fake.deliver_webhook() == 1
        assert received[0][0] == "s3cret"
        assert fake.pending_updates == []
        await bot.delete_webhook()
        assert await bot.get_updates(timeout=0) == ()
    finally:
        await runner.cleanup()


# ---- scripted faults --------------------------------------------------------------------------


async def test_retry_after(bot: telegram.Bot, fake: FakeTelegram) -> None:
    fake.fail_next("sendMessage", status=429, retry_after=2, times=2)
    for _ in range(2):
        with pytest.raises(RetryAfter) as info:
            await bot.send_message(CHAT, "x")
        assert retry_seconds(info.value) == 2
    await bot.send_message(CHAT, "x")
    assert len(fake.calls_to("sendMessage")) == 3


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_network_errors(
    bot: telegram.Bot, fake: FakeTelegram, status: int
) -> None:
    fake.fail_next("sendMessage", status=status)
    with pytest.raises(NetworkError) as info:
        await bot.send_message(CHAT, "x")
    assert not isinstance(info.value, BadRequest)
    fake.fail_next("getUpdates", status=502, body=b"<html><h1>502 Bad Gateway</h1></html>")
    with pytest.raises(NetworkError, match=r"(?i)Bad Gateway"):
        await bot.get_updates(timeout=0)


async def test_conflict_and_unauthorized_on_get_updates(
    bot: telegram.Bot, fake: FakeTelegram
) -> None:
    fake.fail_next("getUpdates", status=409)
    with pytest.raises(Conflict):
        await bot.get_updates(timeout=0)
    fake.fail_next("getUpdates", status=401)
    with pytest.raises(InvalidToken):
        await bot.get_updates(timeout=0)
    fake.revoke(fake.token)
    with pytest.raises(InvalidToken):
        await bot.send_message(CHAT, "x")


async def test_stall_and_disconnect(bot: telegram.Bot, fake: FakeTelegram) -> None:
    fake.stall_next("getUpdates")
    with pytest.raises(TimedOut):
        await bot.get_updates(timeout=0, read_timeout=0.3)
    fake.release()
    assert await bot.get_updates(timeout=0) == ()
    fake.disconnect_next("sendMessage")
    with pytest.raises(NetworkError):
        await bot.send_message(CHAT, "x")
    await bot.send_message(CHAT, "x")


async def test_abandoned_poll_and_server_restart(bot: telegram.Bot, fake: FakeTelegram) -> None:
    async with ClientSession() as http:
        with pytest.raises(TimeoutError):
            await http.post(
                f"{fake.base_url}{fake.token}/getUpdates",
                json={"timeout": 10},
                timeout=ClientTimeout(total=0.3),
            )
    await fake.wait_for(lambda: fake.active_polls == 0, timeout=3)
    # stop() and start() again on the same port: an outage the client must ride out.
    await fake.stop()
    with pytest.raises(NetworkError):
        await bot.send_message(CHAT, "during outage")
    await fake.start()
    await bot.send_message(CHAT, "after outage")
    assert fake.texts(CHAT) == ["after outage"]


async def test_flood_mode(bot: telegram.Bot, fake: FakeTelegram) -> None:
    fake.set_flood(every=2, retry_after=3)
    outcomes: list[str] = []
    for i in range(4):
        try:
            await bot.send_message(CHAT, f"m{i}")
            outcomes.append("ok")
        except RetryAfter as exc:
            outcomes.append(f"429/{retry_seconds(exc):g}")
    assert outcomes == ["ok", "429/3", "ok", "429/3"]
    fake.set_flood(0)
    await bot.send_message(CHAT, "calm")
    assert fake.texts(CHAT) == ["m0", "m2", "calm"]


async def test_wait_for_times_out_with_context(fake: FakeTelegram) -> None:
    with pytest.raises(TimeoutError, match=r"(?i)never"):
        await fake.wait_for(lambda: False, timeout=0.1, what="never")


# ---- files ------------------------------------------------------------------------------------


async def test_send_document_upload(bot: telegram.Bot, fake: FakeTelegram) -> None:
    payload = b"\x00binary\xffdata" * 100
    italic = MessageEntity(MessageEntity.ITALIC, offset=0, length=4)
    sent = await bot.send_document(
        CHAT, payload, filename="report.pdf", caption="here", caption_entities=[italic]
    )
    assert sent.document is not None
    assert (sent.document.file_name, sent.document.file_size) == ("report.pdf", len(payload))
    assert sent.caption == "here" and sent.caption_entities == (italic,)
    [record] = fake.sent_messages(CHAT)
    assert record.document is not None
    assert record.document.data == payload
    assert record.document.file_name == "report.pdf"
    assert record.caption == "here" and record.kind == "document"
    # The upload can be fetched back, and re-sent by file_id without a new upload.
    again = await bot.send_document(GROUP, sent.document.file_id)
    assert again.document is not None and again.document.file_id == sent.document.file_id
    with pytest.raises(BadRequest, match=r"(?i)wrong file identifier"):
        await bot.send_document(CHAT, "no-such-file-id")


async def test_get_file_and_download(bot: telegram.Bot, fake: FakeTelegram) -> None:
    data = b"%PDF-1.4 fake pdf"
    update = fake.user_document(CHAT, CHAT, data, "doc.pdf", "application/pdf", caption="see")
    [received] = await bot.get_updates(timeout=0)
    assert received.update_id == update["update_id"]
    assert received.message is not None and received.message.document is not None
    assert received.message.caption == "see"
    tg_file = await received.message.document.get_file()
    assert tg_file.file_size == len(data)
    assert bytes(await tg_file.download_as_bytearray()) == data
    assert tg_file.file_path is not None
    assert fake.downloads == [tg_file.file_path.rsplit(fake.token + "/", 1)[1]]

    fake.fail_next(DOWNLOAD, status=500)
    with pytest.raises(NetworkError):
        await tg_file.download_as_bytearray()

    big = fake.add_file(b"", "huge.bin", kind="document", file_size=30 * 1024 * 1024)
    with pytest.raises(BadRequest, match=r"(?i)file is too big"):
        await bot.get_file(big.file_id)


async def test_user_media_parses_in_ptb(bot: telegram.Bot, fake: FakeTelegram) -> None:
    fake.user_photo(CHAT, CHAT, b"jpeg", caption="pic", media_group_id="g1")
    fake.user_voice(CHAT, CHAT, b"ogg", duration=4)
    video = fake.add_file(b"mp4", "clip.mp4", "video/mp4", kind="video", duration=2)
    fake.user_message(CHAT, CHAT, video=video, caption="clip")
    anim = fake.add_file(b"gif", "a.mp4", "video/mp4", kind="animation")
    fake.user_message(CHAT, CHAT, animation=anim)
    bot_msg = await bot.send_message(GROUP, "I am the bot")
    fake.user_message(
        GROUP,
        7,
        "@picobridge_test_bot thanks",
        chat_type="supergroup",
        message_thread_id=11,
        is_topic_message=True,
        reply_to_message=bot_msg.message_id,
    )
    updates = await bot.get_updates(timeout=0)
    messages = [u.message for u in updates]
    assert all(m is not None for m in messages)
    photo, voice, vid, gif, group = messages
    assert photo is not None and photo.photo[-1].width == 1280 and photo.media_group_id == "g1"
    assert voice is not None and voice.voice is not None
    assert seconds(voice.voice.duration) == 4
    assert vid is not None and vid.video is not None and vid.caption == "clip"
    assert gif is not None and gif.animation is not None and gif.document is not None
    assert group is not None and group.is_topic_message and group.message_thread_id == 11
    assert group.chat.type == "supergroup" and group.chat.is_forum
    assert group.reply_to_message is not None
    assert group.reply_to_message.from_user is not None
    assert group.reply_to_message.from_user.is_bot
    assert group.entities[0].type == MessageEntity.MENTION
    photo_file = await bot.get_file(photo.photo[-1].file_id)
    assert bytes(await photo_file.download_as_bytearray()) == b"jpeg"


# ---- commands and the full PTB application ----------------------------------------------------


async def test_my_commands(bot: telegram.Bot, fake: FakeTelegram) -> None:
    commands = [BotCommand("new", "Start a new session"), BotCommand("help", "Help")]
    assert await bot.set_my_commands(commands)
    assert await bot.get_my_commands() == tuple(commands)
    private = telegram.BotCommandScopeAllPrivateChats()
    assert await bot.get_my_commands(scope=private) == ()
    with pytest.raises(BadRequest, match=r"(?i)BOT_COMMAND_INVALID"):
        await bot.set_my_commands([BotCommand("New!", "bad")])


async def test_application_polling_round_trip(fake: FakeTelegram) -> None:
    async def start(update: telegram.Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        await update.effective_message.reply_text("started", do_quote=True)

    async def echo(update: telegram.Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None and update.effective_message.text
        text = update.effective_message.text
        bold = MessageEntity(MessageEntity.BOLD, offset=0, length=len(text))
        await update.effective_message.reply_text(text, entities=[bold])

    app = (
        Application.builder()
        .token(fake.token)
        .base_url(fake.base_url)
        .base_file_url(fake.base_file_url)
        .build()
    )
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    async with app:
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=1)
        await app.start()
        fake.user_message(CHAT, CHAT, "/start")
        fake.user_message(CHAT, CHAT, "ping")
        sent = await fake.wait_for_messages(CHAT, 2, timeout=10)
        await app.updater.stop()
        await app.stop()
    assert [m.text for m in sent] == ["started", "ping"]
    assert sent[1].entities == [{"type": "bold", "offset": 0, "length": 4}]
    assert sent[0].reply_to_message_id is not None
    assert fake.pending_updates == []
    assert any(c.method == "deleteWebhook" for c in fake.calls)
