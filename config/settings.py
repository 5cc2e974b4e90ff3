"""The configuration model: a TOML file, overridden by PICOBRIDGE_* environment variables,
with secrets optionally read from systemd credentials ($CREDENTIALS_DIRECTORY).

Unknown keys are errors (a misspelled key silently ignored is a bot that silently misbehaves),
and errors never echo values, because values may be tokens.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from picobridge.config.sections import (
    AgentSettings,
    AttachmentSettings,
    BridgeSettings,
    HttpSettings,
    LogSettings,
    _Section,
)

DEFAULT_CONFIG_PATH = Path("/etc/picobridge/config.toml")
ENV_PREFIX = "PICOBRIDGE_"

# systemd credential file name -> (section, key). `LoadCredential=telegram_token:/path`.
CREDENTIAL_FILES: dict[str, tuple[str, str]] = {
    "telegram_token": ("telegram", "token"),
    "telegram_webhook_secret": ("telegram", "webhook_secret"),
    "slack_bot_token": ("slack", "bot_token"),
    "slack_app_token": ("slack", "app_token"),
    "slack_signing_secret": ("slack", "signing_secret"),
}

# The shipped example config carries these markers in place of real secrets.
_PLACEHOLDER_MARKERS = ("REPLACE", "YOUR-", "YOUR_", "CHANGEME", "CHANGE-ME")


class ConfigError(Exception):
    """A configuration problem, phrased for the operator, never containing a secret value."""


def _reject_placeholder(value: SecretStr | None, info_name: str) -> SecretStr | None:
    """Strip a secret (a token pasted with a space or newline is still the token, from any
    source), refuse the shipped example's placeholders, and treat blank as unset."""
    if value is None:
        return None
    text = value.get_secret_value().strip()
    if any(marker in text.upper() for marker in _PLACEHOLDER_MARKERS):
        raise ValueError(f"{info_name} still holds the example placeholder; set the real value")
    return SecretStr(text) if text else None


class TelegramSettings(_Section):
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
        lambda v, info: _reject_placeholder(v, f"telegram.{info.field_name}")
    )

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


class SlackSettings(_Section):
    enabled: bool | None = None
    bot_token: SecretStr | None = None
    app_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    mode: Literal["socket", "http"] = "socket"
    base_url: str = "https://slack.com/api/"
    events_path: str = "/slack/events"
    allowed_users: list[str] = Field(default_factory=list)
    allowed_channels: list[str] = Field(default_factory=list)
    file_hosts: list[str] = Field(default_factory=lambda: ["files.slack.com"])
    allow_bots: bool = False
    slash_command: str = "/picobridge"
    command_prefix: str = "!"
    reaction_received: str = "eyes"
    reaction_done: str = "white_check_mark"
    reaction_failed: str = "x"
    stream: bool = False
    max_chunks: PositiveInt = 4

    _no_placeholders = field_validator("bot_token", "app_token", "signing_secret")(
        lambda v, info: _reject_placeholder(v, f"slack.{info.field_name}")
    )

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.bot_token is not None

    @model_validator(mode="after")
    def _tokens_when_enabled(self) -> SlackSettings:
        if not self.active:
            return self
        if self.bot_token is None:
            raise ValueError("slack is enabled but slack.bot_token is not set")
        if self.mode == "socket" and self.app_token is None:
            raise ValueError("slack.mode = 'socket' needs slack.app_token (xapp-...)")
        if self.mode == "http" and self.signing_secret is None:
            raise ValueError("slack.mode = 'http' needs slack.signing_secret")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        case_sensitive=False,
    )

    state_dir: Path = Path("/var/lib/picobridge")
    agent: AgentSettings = Field(default_factory=AgentSettings)
    bridge: BridgeSettings = Field(default_factory=BridgeSettings)
    attachments: AttachmentSettings = Field(default_factory=AttachmentSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    log: LogSettings = Field(default_factory=LogSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Highest priority first: explicit values, environment, systemd credentials, the file.
        return (
            init_settings,
            env_settings,
            CredentialsSource(settings_cls),
            TomlConfigSettingsSource(settings_cls),
        )

    @model_validator(mode="after")
    def _listener_for_webhooks(self) -> Settings:
        if self.http.listen is None:
            if self.slack.active and self.slack.mode == "http":
                raise ValueError("slack.mode = 'http' needs http.listen (the events endpoint)")
            if self.telegram.active and self.telegram.mode == "webhook":
                raise ValueError("telegram.mode = 'webhook' needs http.listen")
        return self

    @property
    def db_path(self) -> Path:
        return self.state_dir / "picobridge.db"

    @property
    def media_dir(self) -> Path:
        return self.state_dir / "media"

    def secrets(self) -> list[str]:
        """Every secret value configured, for the log redaction filter."""
        values = [
            self.telegram.token, self.telegram.webhook_secret, self.slack.bot_token,
            self.slack.app_token, self.slack.signing_secret,
        ]
        return [v.get_secret_value() for v in values if v is not None]


class CredentialsSource(PydanticBaseSettingsSource):
    """Secrets from systemd's LoadCredential= files, so tokens need not sit in the config."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        directory = os.environ.get("CREDENTIALS_DIRECTORY")
        if not directory:
            return {}
        found: dict[str, dict[str, str]] = {}
        for filename, (section, key) in CREDENTIAL_FILES.items():
            path = Path(directory) / filename
            if path.is_file():
                found.setdefault(section, {})[key] = path.read_text(encoding="utf-8").strip()
        return found


def default_config_path(environ: Mapping[str, str]) -> Path | None:
    if environ.get("PICOBRIDGE_CONFIG"):
        return Path(environ["PICOBRIDGE_CONFIG"])
    return DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None


def _unknown_keys(data: Mapping[str, Any], model: type[BaseModel], prefix: str = "") -> list[str]:
    problems = []
    fields = model.model_fields
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in fields:
            hint = difflib.get_close_matches(key, list(fields), n=1)
            problems.append(f"unknown key '{dotted}'" + (f" (did you mean '{prefix}{hint[0]}'?)"
                                                          if hint else ""))
            continue
        annotation = fields[key].annotation
        if isinstance(value, dict) and isinstance(annotation, type) and issubclass(
            annotation, BaseModel
        ):
            problems.extend(_unknown_keys(value, annotation, f"{dotted}."))
    return problems


def _describe(error: Mapping[str, Any]) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "config"
    if error["type"] == "extra_forbidden":
        return f"unknown key '{where}'"
    # `msg` carries no input value; pydantic's str(ValidationError) would, and it may be a token.
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where != "config" else message


def load_settings(path: Path | None, environ: Mapping[str, str] | None = None) -> Settings:
    """Load and validate the configuration; raise ConfigError with an operator-friendly text."""
    environ = os.environ if environ is None else environ
    explicit = path is not None
    path = path if explicit else default_config_path(environ)
    where = f" in {path}" if path else ""
    if path is not None:
        if not path.exists() or path.is_dir():
            raise ConfigError(f"config file {path} does not exist"
                              + ("" if explicit else " (from PICOBRIDGE_CONFIG)"))
        try:
            with path.open("rb") as fh:
                raw = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        problems = _unknown_keys(raw, Settings)
        if problems:
            raise ConfigError("; ".join(problems) + where)

    class _FromFile(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    try:
        return _FromFile()
    except ValidationError as exc:
        details = "; ".join(_describe(e) for e in exc.errors())
        raise ConfigError(f"invalid configuration{where} (or PICOBRIDGE_* environment): "
                          f"{details}") from None
