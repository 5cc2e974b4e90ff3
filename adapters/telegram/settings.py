"""The `[telegram]` section of the configuration."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, SecretStr, field_validator, model_validator

from picobridge.config.sections import Section, clean_secret

# What python-telegram-bot's httpx transport (with the socks extra) can use.
PROXY_SCHEMES = ("http", "https", "socks4", "socks5", "socks5h")


class TelegramSettings(Section):
    enabled: bool | None = None
    token: SecretStr | None = None
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    allowed_users: list[int] = Field(default_factory=list)
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
    def _token_when_enabled(self) -> TelegramSettings:
        if self.enabled and self.token is None:
            raise ValueError("telegram.enabled is true but telegram.token is not set")
        if self.active and self.mode == "webhook" and not self.webhook_url:
            raise ValueError("telegram.mode = 'webhook' needs telegram.webhook_url")
        return self
