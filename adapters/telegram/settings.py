"""The `[telegram]` section of the configuration, and its further bots (`[[telegram.bots]]`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt, SecretStr, field_validator, model_validator

from picobridge.config.sections import BotEntry, Section, clean_secret

# What python-telegram-bot's httpx transport (with the socks extra) can use.
PROXY_SCHEMES = ("http", "https", "socks4", "socks5", "socks5h")


class TelegramBotSettings(Section):
    """One bot's keys: `[telegram]` (the bot named "default") and each `[[telegram.bots]]`."""

    enabled: bool | None = None
    token: SecretStr | None = None
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    allowed_users: list[int] = Field(default=[])
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_path: str = "/telegram/webhook"
    webhook_secret: SecretStr | None = None
    poll_timeout: PositiveInt = 30
    stall_timeout: PositiveFloat = 120.0
    stream: bool = False
    show_tools: bool = False
    max_chunks: PositiveInt = 4
    proxy_url: str | None = None
    rate_limiter: bool = True

    _no_placeholders = field_validator("token", "webhook_secret")(
        lambda v, info: clean_secret(v, f"telegram.{info.field_name}")
    )

    @field_validator("proxy_url")
    @classmethod
    def _known_proxy(cls, value: str | None) -> str | None:
        if value is not None and value.partition("://")[0].lower() not in PROXY_SCHEMES:
            raise ValueError(f"telegram.proxy_url must start with one of "
                             f"{', '.join(s + '://' for s in PROXY_SCHEMES)}")
        return value

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.token is not None

    @model_validator(mode="after")
    def _token_when_enabled(self) -> TelegramBotSettings:
        if self.enabled and self.token is None:
            raise ValueError("telegram.enabled is true but telegram.token is not set")
        if self.active and self.mode == "webhook" and not self.webhook_url:
            raise ValueError("telegram.mode = 'webhook' needs telegram.webhook_url")
        return self


class TelegramBot(BotEntry, TelegramBotSettings):
    """A further bot, `[[telegram.bots]]`: a name and every key of `[telegram]`."""

    @classmethod
    def default_paths(cls, name: str) -> dict[str, Any]:
        return {"webhook_path": f"/telegram/{name}/webhook"}


class TelegramSettings(TelegramBotSettings):
    bots: list[TelegramBot] = Field(default=[])
