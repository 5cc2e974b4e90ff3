"""The aiohttp transport under python-telegram-bot, against the fake Bot API."""

from __future__ import annotations

import socket
import traceback
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import pytest
from telegram import Bot, InputFile, MessageEntity
from telegram.error import BadRequest, NetworkError, TimedOut

from picobridge.adapters.common.attachments import AttachmentPolicy
from picobridge.adapters.telegram.files import Fetcher
from picobridge.adapters.telegram.http import AiohttpRequest
from picobridge.adapters.telegram.normalise import MediaRef
from picobridge.adapters.telegram.storage import StorageWait
from picobridge.config.sections import AttachmentSettings
from tests.fakes.telegram import FakeTelegram


def transport(read: float = 5.0) -> AiohttpRequest:
    return AiohttpRequest(pool_size=4, read_timeout=read, write_timeout=5.0,
                          connect_timeout=5.0, pool_timeout=5.0)


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as f:
        yield f


def bot_for(fake: FakeTelegram, request: AiohttpRequest, token: str | None = None) -> Bot:
    return Bot(token or fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url,
               request=request, get_updates_request=request)


async def test_parameters_and_answers_travel_intact(fake: FakeTelegram) -> None:
    async with bot_for(fake, transport()) as bot:
        me = await bot.get_me()
        bold = MessageEntity(MessageEntity.BOLD, offset=2, length=9)
        sent = await bot.send_message(4242, "a & ünïcode ✓", entities=[bold])
    assert me.is_bot
    [message] = fake.sent_messages(4242)
    assert message.text == "a & ünïcode ✓"
    assert sent.message_id == message.message_id
    assert message.entities == [{"type": "bold", "offset": 2, "length": 9}]


async def test_files_go_up_as_multipart_and_come_down_as_bytes(fake: FakeTelegram) -> None:
    data = "# Notes\n\nline ✓\n".encode()
    async with bot_for(fake, transport()) as bot:
        await bot.send_document(4242, InputFile(data, filename="reply.md"), caption="the file")
        [message] = fake.sent_messages(4242)
        assert message.document is not None
        assert (message.document.data, message.document.file_name) == (data, "reply.md")
        assert message.caption == "the file"
        file = await bot.get_file(message.document.file_id)
        assert bytes(await file.download_as_bytearray()) == data


async def test_api_errors_are_ptb_errors(fake: FakeTelegram) -> None:
    async with bot_for(fake, transport()) as bot:
        with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
            await bot.send_message(4242, "")


async def test_a_stalled_answer_times_out(fake: FakeTelegram) -> None:
    fake.stall_next("getMe")
    request = transport(read=0.3)
    await request.initialize()
    try:
        with pytest.raises(TimedOut):
            await bot_for(fake, request).get_me()
    finally:
        fake.release()
        await request.shutdown()


async def test_an_unreachable_server_is_a_network_error_without_the_token() -> None:
    with socket.socket() as sock:
        # Bound but not listening: connections are refused, and while the socket is held no
        # other test (another xdist worker) can start listening on the port.
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        token = "5123456789:AAFakeTokenForTransportTests_x7Qv0Lk3Zp9"
        request = transport()
        bot = Bot(token, base_url=f"http://127.0.0.1:{port}/bot", request=request,
                  get_updates_request=request)
        with pytest.raises(NetworkError) as raised:
            await bot.get_me()
        await request.shutdown()
    assert "aiohttp.ClientConnectorError" in str(raised.value)
    assert token not in str(raised.value) and "AAFake" not in str(raised.value)


async def test_usable_without_initialize_and_closed_by_shutdown(fake: FakeTelegram) -> None:
    request = transport()
    bot = bot_for(fake, request)  # never initialized, as the adapter's chat-action bot
    await bot.send_chat_action(4242, "typing")
    assert [a.action for a in fake.chat_actions] == ["typing"]
    await request.shutdown()
    assert request._session is None


async def test_a_proxy_from_the_environment_is_used(fake: FakeTelegram,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # As with httpx: HTTPS_PROXY/HTTP_PROXY in the service's environment is honoured. The Bot
    # API host does not exist, so only the proxy (the fake, serving absolute-form requests)
    # can answer.
    monkeypatch.setenv("HTTP_PROXY", fake.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    request = transport()
    bot = Bot(fake.token, base_url="http://api.telegram.invalid/bot", request=request,
              get_updates_request=request)
    try:
        assert (await bot.get_me()).is_bot
    finally:
        await request.shutdown()


async def test_errors_keep_the_token_out_of_messages_and_tracebacks() -> None:
    token = "5123456789:AAFakeTokenForTransportTests_x7Qv0Lk3Zp9"
    request = transport()
    # aiohttp names the whole URL (token included) when it cannot use it.
    bot = Bot(token, base_url="http://127.0.0.1:99999/bot", request=request,
              get_updates_request=request)
    with pytest.raises(NetworkError) as raised:
        await bot.get_me()
    await request.shutdown()
    assert "InvalidUrlClientError" in str(raised.value)
    logged = "".join(traceback.format_exception(raised.value))
    assert "AAFake" not in logged and token not in logged


async def test_no_proxy_from_the_environment_is_honoured(fake: FakeTelegram,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    request = transport()
    try:
        assert (await bot_for(fake, request).get_me()).is_bot  # straight to the fake
    finally:
        await request.shutdown()


async def test_downloads_take_the_proxy_the_calls_take(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An https:// proxy named by HTTPS_PROXY carries the bot's calls (as it did under httpx),
    so it carries its downloads too; aiohttp's own trust_env would skip it and go direct."""
    proxy = "https://proxy.invalid:3129"
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    monkeypatch.setenv("https_proxy", proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    url = "https://files.invalid/file/bot123:secret/documents/file_1.txt"
    request = transport()
    await request.initialize()
    chosen = request._proxy(url)
    await request.shutdown()
    asked: list[object] = []

    def get(self: aiohttp.ClientSession, target: str, **kwargs: Any) -> NoReturn:
        asked.append(kwargs.get("proxy"))
        raise aiohttp.ClientConnectionError("not sent")

    monkeypatch.setattr(aiohttp.ClientSession, "get", get)
    policy = AttachmentPolicy(AttachmentSettings(), tmp_path / "media")
    fetcher = Fetcher(Bot("123:secret"), policy, StorageWait(hold=False), lambda text: text)
    ref = MediaRef("document", "file-1", 5, "file_1.txt", "text/plain")
    try:
        with pytest.raises(aiohttp.ClientConnectionError):
            await fetcher._stream(ref, url)
    finally:
        await fetcher.close()
    assert chosen == proxy
    assert asked == [proxy]
