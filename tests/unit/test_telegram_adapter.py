"""The adapter as the bridge and `picobridge check` see it: verify, proxy, lifecycle."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from picobridge.adapters.telegram import adapter as telegram_module
from picobridge.adapters.telegram.adapter import TelegramAdapter
from picobridge.config.loader import settings_of
from picobridge.config.settings import ConfigError, load_settings
from picobridge.contract import ChatRef, DeliveryError, OutgoingReply, ReplyKind
from tests.fakes.telegram import FakeTelegram
from tests.unit.telegram_memory import MemoryBridge


def adapter(tmp_path: Path, fake: FakeTelegram, **telegram: Any) -> TelegramAdapter:
    # A platform's section is a field only of the model built at run time (settings_model);
    # type checkers see the core model, hence the untyped keywords.
    sections: dict[str, Any] = {"telegram": {
        "token": fake.token, "base_url": fake.base_url, "base_file_url": fake.base_file_url,
        "rate_limiter": False, **telegram}}
    settings = settings_of(state_dir=tmp_path, **sections)
    built = settings.platforms["telegram"].adapter(settings)
    assert isinstance(built, TelegramAdapter)
    return built


def test_disabled_without_a_token(tmp_path: Path) -> None:
    settings = settings_of(state_dir=tmp_path)
    assert not settings.platforms["telegram"].active(settings.section("telegram"))


async def test_verify_names_the_bot_and_never_the_token(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        assert await adapter(tmp_path, fake).verify() == (
            "bot @picobridge_test_bot (Picobridge Test Bot), polling mode")
        fake.token = "1:revoked"
        with pytest.raises(RuntimeError) as refused:
            await adapter(tmp_path, fake, token="5123456789:AAFakeTokenForPicobridgeTests_x7Qv0"
                                                "Lk3Zp9").verify()
        assert "401" in str(refused.value) and "AAFake" not in str(refused.value)


async def test_requests_go_through_the_proxy(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        # The Bot API host does not exist: only the proxy (here the fake itself, which serves
        # absolute-form proxy requests by path) can answer.
        unreachable = adapter(tmp_path, fake, base_url="http://api.telegram.invalid/bot")
        with pytest.raises(RuntimeError, match="cannot reach Telegram"):
            await unreachable.verify()
        proxied = adapter(tmp_path, fake, base_url="http://api.telegram.invalid/bot",
                          proxy_url=fake.url)
        assert (await proxied.verify()).startswith("bot @picobridge_test_bot")


def test_a_proxy_of_an_unknown_kind_is_a_configuration_error(tmp_path: Path) -> None:
    # Refused when the config is read (exit 3), not when the adapter starts.
    config = tmp_path / "config.toml"
    config.write_text("[telegram]\ntoken = '1:x'\nproxy_url = 'ftp://127.0.0.1:9'\n")
    with pytest.raises(ConfigError, match=r"telegram\.proxy_url must start with one of http://"):
        load_settings(config)


async def test_revoked_token_at_start_is_fatal_and_replies_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telegram_module, "READY_WAIT", 0.2)
    async with FakeTelegram() as fake:
        fake.token = "1:revoked"
        bot = adapter(tmp_path, fake, token="5123456789:AAFakeTokenForPicobridgeTests_x7Qv0"
                                            "Lk3Zp9")
        bridge = MemoryBridge()
        await bot.start(bridge)
        await bridge.wait_for(lambda: bool(bridge.fatal_reasons), "the fatal report")
        assert "401" in bridge.fatal_reasons[0] and "AAFake" not in bridge.fatal_reasons[0]
        with pytest.raises(DeliveryError, match="not connected"):
            await bot.send_reply(ChatRef("telegram", "1"), OutgoingReply("x", ReplyKind.ANSWER))
        await bot.stop()
        await bot.stop()  # twice is fine
        assert not bot.connected()


async def test_old_media_are_deleted_on_start(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "media" / "telegram"
    folder.mkdir(parents=True)
    old, new = folder / "old.jpg", folder / "new.jpg"
    old.write_bytes(b"x")
    new.write_bytes(b"y")
    month_ago = time.time() - 31 * 86400
    os.utime(old, (month_ago, month_ago))
    removed = LogSeen("removed 1 media files older than")
    logging.getLogger("picobridge.attachments").addHandler(removed)
    caplog.set_level(logging.INFO, logger="picobridge.attachments")
    async with FakeTelegram() as fake:
        bot = adapter(tmp_path, fake)
        await bot.start(MemoryBridge())
        try:
            # Removal runs in a thread; its report comes back on the loop.
            await asyncio.wait_for(removed.seen.wait(), 30)
            assert not old.exists() and new.exists()
        finally:
            await bot.stop()
            logging.getLogger("picobridge.attachments").removeHandler(removed)


class LogSeen(logging.Handler):
    """Sets ``seen`` when a record containing ``needle`` is logged on the test's loop."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.INFO)
        self.needle = needle
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.seen.set()
