"""The `[telegram]` section of the configuration, and its further bots (`[[telegram.bots]]`)."""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any, Literal

from picobridge.config.fields import plain
from picobridge.config.sections import BotEntry, Section, cleaned
from picobridge.config.values import After, PositiveFloat, PositiveInt, Secret, empty_list

# What python-telegram-bot's httpx transport (with the socks extra) can use.
PROXY_SCHEMES = ("http", "https", "socks4", "socks5", "socks5h")


def _known_proxy(value: str | None) -> str | None:
    if value is not None and value.partition("://")[0].lower() not in PROXY_SCHEMES:
        raise ValueError(f"telegram.proxy_url must start with one of "
                         f"{', '.join(s + '://' for s in PROXY_SCHEMES)}")
    return value


@plain
class TelegramBotSettings(Section):
    """One bot's keys: `[telegram]` (the bot named "default") and each `[[telegram.bots]]`."""

    enabled: bool | None = None
    token: Annotated[Secret | None, cleaned("telegram.token")] = None
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    allowed_users: list[int] = field(default_factory=empty_list)
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_path: str = "/telegram/webhook"
    webhook_secret: Annotated[Secret | None, cleaned("telegram.webhook_secret")] = None
    poll_timeout: PositiveInt = 30
    stall_timeout: PositiveFloat = 120.0
    stream: bool = False
    show_tools: bool = False
    max_chunks: PositiveInt = 4
    proxy_url: Annotated[str | None, After(_known_proxy)] = None
    rate_limiter: bool = True

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.token is not None

    def __post_init__(self) -> None:
        if self.enabled and self.token is None:
            raise ValueError("telegram.enabled is true but telegram.token is not set")
        if self.active and self.mode == "webhook" and not self.webhook_url:
            raise ValueError("telegram.mode = 'webhook' needs telegram.webhook_url")


@plain
class TelegramBot(BotEntry, TelegramBotSettings):
    """A further bot, `[[telegram.bots]]`: a name and every key of `[telegram]`."""

    @classmethod
    def default_paths(cls, name: str) -> dict[str, Any]:
        return {"webhook_path": f"/telegram/{name}/webhook"}


@plain
class TelegramSettings(TelegramBotSettings):
    bots: list[TelegramBot] = field(default_factory=empty_list)
