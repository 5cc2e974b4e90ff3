"""The configuration model: a TOML file, overridden by PICOBRIDGE_* environment variables,
with secrets optionally read from systemd credentials ($CREDENTIALS_DIRECTORY).

Unknown keys are errors (a misspelled key silently ignored is a bot that silently misbehaves),
and errors never echo values, because values may be tokens."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Collection, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field, ValidationError, create_model, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from picobridge.config.agents import check_agents, named_agents
from picobridge.config.credentials import (
    ConfigError,
    CredentialsSource,
    WithBotCredentials,
    credential_files,
)
from picobridge.config.environment import ENV_PREFIX, env_source, not_json, unknown_env
from picobridge.config.mentions import named_platforms
from picobridge.config.sections import (
    VOICE_CREDENTIALS,
    AgentSettings,
    AttachmentSettings,
    BridgeSettings,
    HttpSettings,
    LimitsSettings,
    LogSettings,
    RouteSettings,
    StoreSettings,
    VoiceSettings,
)
from picobridge.config.shapes import shape_problems

if TYPE_CHECKING:
    from picobridge.contract import Platform

__all__ = ["ENV_PREFIX", "ConfigError", "Settings", "credential_files", "load_settings"]

DEFAULT_CONFIG_PATH = Path("/etc/picobridge/config.toml")
SYSTEM_STATE_DIR = Path("/var/lib/picobridge")

# The tables of the config file `load_settings` is reading, for the file's source. A context
# variable rather than a subclass per load: each subclass was a second validator of the whole
# model, built again at every load.
_TOML_DATA: ContextVar[dict[str, Any] | None] = ContextVar("picobridge_toml_data", default=None)


class _ConfigFile(InitSettingsSource):
    """The config file's tables as `load_settings` read them, lowest of the sources: what
    pydantic-settings' TomlConfigSettingsSource gives, without reading the file a second time
    (nor finding it changed since it was checked)."""


# A section's default: its model validated from nothing by the settings model's own validator
# (a factory calling the section's class would build that class's validator too).
def section_default() -> Any:
    return Field(default={}, validate_default=True)


class CoreSettings(BaseSettings):
    """The core sections; `settings_model` adds a section per registered platform."""

    # Every registered platform, and those of them the configuration names (config/mentions.py),
    # which have a section in the model; the others' sections are their defaults.
    _platforms: ClassVar[Mapping[str, Platform]] = {}
    _named: ClassVar[Mapping[str, Platform]] = {}

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        case_sensitive=False,
        # Only the model with the platforms' sections is ever validated with: built once, on
        # its first use, not this base (nor that model before it is used).
        defer_build=True,
    )

    # The model's default; the command line resolves an unset state_dir with
    # `default_state_dir` (a user's own folder for users who cannot write this one).
    state_dir: Path = SYSTEM_STATE_DIR
    agent: AgentSettings = section_default()
    # Further named agents, `[agents.NAME]`; `[agent]` is the agent named "default".
    agents: dict[str, AgentSettings] = Field(default={})
    routes: list[RouteSettings] = Field(default=[])
    bridge: BridgeSettings = section_default()
    attachments: AttachmentSettings = section_default()
    voice: VoiceSettings = section_default()
    store: StoreSettings = section_default()
    http: HttpSettings = section_default()
    limits: LimitsSettings = section_default()
    log: LogSettings = section_default()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Highest priority first: explicit values, environment, systemd credentials, the file;
        # further bots' credential files keep that order within each bot's entry.
        platforms = cls._named
        return (
            init_settings,
            WithBotCredentials(settings_cls, env_settings, platforms, files_win=False),
            CredentialsSource(settings_cls, credential_files(platforms) | VOICE_CREDENTIALS),
            WithBotCredentials(settings_cls,
                               _ConfigFile(settings_cls, _TOML_DATA.get() or {}),
                               platforms, files_win=True),
        )

    @model_validator(mode="after")
    def _listener_for_webhooks(self) -> CoreSettings:
        if self.http.listen is None:
            for name, platform in self._named.items():
                for bot in platform.bots(self.section(name)).values():
                    reason = platform.needs_listener(bot)
                    if reason:
                        raise ValueError(f"{reason} needs http.listen")
        return self

    @model_validator(mode="after")
    def _agents_named(self) -> CoreSettings:
        check_agents(self)
        return self

    def named_agents(self) -> dict[str, AgentSettings]:
        """Every agent by name (config/agents.py)."""
        return named_agents(self)

    @model_validator(mode="after")
    def _platform_shapes(self) -> CoreSettings:
        problems = shape_problems(self._named, self.section)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def section(self, platform: str) -> Any:
        """A platform's own section (`[telegram]`), as that platform's model: its defaults
        when the configuration does not name the platform."""
        if platform in self._named:
            return getattr(self, platform)
        return default_section(self._platforms[platform])

    @property
    def platforms(self) -> Mapping[str, Platform]:
        """Every registered platform."""
        return self._platforms

    @property
    def named_platforms(self) -> Mapping[str, Platform]:
        """The platforms the configuration names; the others are off, allow nobody and have
        no secrets."""
        return self._named

    @property
    def db_path(self) -> Path:
        return self.state_dir / "picobridge.db"

    @property
    def media_dir(self) -> Path:
        return self.state_dir / "media"

    def secrets(self) -> list[str]:
        """Every secret value configured, for the log redaction filter."""
        return [*(secret for name, platform in self._named.items()
                  for bot in platform.bots(self.section(name)).values()
                  for secret in platform.secrets(bot)), *self.voice.secrets()]


if TYPE_CHECKING:
    # For type checkers the core model; at run time, the model with the platforms' sections.
    Settings = CoreSettings


_models: dict[tuple[tuple[str, str, bool], ...], type[CoreSettings]] = {}
_defaults: dict[type[Any], Any] = {}


def default_section(platform: Platform) -> Any:
    """A platform's section with nothing set, made once (its model is built then)."""
    model = platform.section
    if model not in _defaults:
        _defaults[model] = model()
    return _defaults[model]


def registered(platforms: Mapping[str, Platform] | None = None) -> Mapping[str, Platform]:
    """The platforms given, by default the registered ones (adapters/registry.py)."""
    if platforms is not None:
        return platforms
    from picobridge.adapters.registry import platforms as every

    return every()


def settings_model(platforms: Mapping[str, Platform] | None = None,
                   named: Collection[str] | None = None) -> type[CoreSettings]:
    """The settings model: the core sections plus a section for each platform `named` (by
    default all), of `platforms` (by default the registered ones), built once per set."""
    platforms = registered(platforms)
    named = platforms.keys() if named is None else named
    key = tuple((name, f"{type(p).__module__}.{type(p).__qualname__}", name in named)
                for name, p in platforms.items())
    model = _models.get(key)
    if model is None:
        sections = {name: p for name, p in platforms.items() if name in named}
        fields: dict[str, Any] = {name: (p.section, section_default())
                                  for name, p in sections.items()}
        model = create_model("Settings", __base__=CoreSettings, **fields)
        model._platforms = dict(platforms)
        model._named = sections
        _models[key] = model
    return model


def __getattr__(name: str) -> Any:
    # `Settings` is the model with every registered platform, built on first use: importing
    # this module must not import the platforms (they import their config sections from here).
    if name == "Settings":
        return settings_model()
    raise AttributeError(name)


def default_config_path(environ: Mapping[str, str]) -> Path | None:
    if environ.get("PICOBRIDGE_CONFIG"):
        return Path(environ["PICOBRIDGE_CONFIG"])
    return DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None


def user_state_dir(environ: Mapping[str, str]) -> Path:
    """$XDG_STATE_HOME/picobridge, else ~/.local/state/picobridge (XDG base directories)."""
    xdg = environ.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "picobridge"
    home = environ.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".local" / "state" / "picobridge"


def default_state_dir(environ: Mapping[str, str] | None = None, euid: int | None = None) -> Path:
    """Where state lives when no state_dir is configured: /var/lib/picobridge once it exists
    (the service's, made by its install or systemd's StateDirectory=), for root and for whoever
    may write it (the service's own user); else the user's own state folder. So trying
    picobridge needs no root and touches nothing of a service, and trying it as root does not
    make the service's folder with files the service's user cannot write."""
    environ = os.environ if environ is None else environ
    euid = os.geteuid() if euid is None else euid
    if SYSTEM_STATE_DIR.is_dir() and (
            euid == 0 or os.access(SYSTEM_STATE_DIR, os.W_OK | os.X_OK)):
        return SYSTEM_STATE_DIR
    return user_state_dir(environ)


def with_default_state_dir(settings: Settings,
                           environ: Mapping[str, str] | None = None) -> Settings:
    """The settings with an unset state_dir resolved by `default_state_dir`."""
    if "state_dir" in settings.model_fields_set:
        return settings
    return settings.model_copy(update={"state_dir": default_state_dir(environ)})


def _unknown_keys(data: Mapping[str, Any], model: type[BaseModel], prefix: str = "") -> list[str]:
    problems = []
    fields = model.model_fields
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in fields:
            from difflib import get_close_matches  # only to word a mistake

            hint = get_close_matches(key, list(fields), n=1)
            problems.append(f"unknown key '{dotted}'" + (f" (did you mean '{prefix}{hint[0]}'?)"
                                                          if hint else ""))
            continue
        annotation = fields[key].annotation
        if isinstance(value, dict) and isinstance(annotation, type) and issubclass(
            annotation, BaseModel
        ):
            problems.extend(_unknown_keys(value, annotation, f"{dotted}."))
    return problems


def _describe(error: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "config"
    if error["type"] == "extra_forbidden":
        return f"unknown key '{where}'"
    # `msg` carries no input value; pydantic's str(ValidationError) would, and it may be a token.
    message = str(error["msg"]).removeprefix("Value error, ")
    source = env_source(error["loc"], environ or {})
    where = f"{where} ({source})" if source else where
    return f"{where}: {message}" if where != "config" else message


def _read_config(path: Path | None, explicit: bool) -> tuple[dict[str, Any], ConfigError | None]:
    """The file's tables, or why it cannot be read (said after the environment's problems)."""
    if path is None:
        return {}, None
    if not path.exists() or path.is_dir():
        return {}, ConfigError(f"config file {path} does not exist"
                               + ("" if explicit else " (from PICOBRIDGE_CONFIG)"))
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh), None
    except tomllib.TOMLDecodeError as exc:
        return {}, ConfigError(f"config file {path} is not valid TOML: {exc}")
    except UnicodeDecodeError as exc:
        return {}, ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start})")
    except OSError as exc:
        return {}, ConfigError(f"cannot read config file {path}: {exc.strerror}")


def load_settings(path: Path | None, environ: Mapping[str, str] | None = None,
                  platforms: Mapping[str, Platform] | None = None) -> Settings:
    """Load and validate the configuration; raise ConfigError with an operator-friendly text."""
    environ = os.environ if environ is None else environ
    explicit = path is not None
    path = path if explicit else default_config_path(environ)
    where = f" in {path}" if path else ""
    raw, unreadable = _read_config(path, explicit)
    every = registered(platforms)
    model = settings_model(every, named_platforms(raw, environ, every))
    # A problem found with the model of the platforms named is one with every platform's
    # too; said with every platform's, whose names the hints ("did you mean") come from.
    if unknown_env(environ, model):
        raise ConfigError("; ".join(unknown_env(environ, settings_model(every))))
    if unreadable is not None:
        raise unreadable
    if _unknown_keys(raw, model):
        raise ConfigError("; ".join(_unknown_keys(raw, settings_model(every))) + where)

    reading = _TOML_DATA.set(raw)
    try:
        return model()
    except SettingsError as exc:
        # A PICOBRIDGE_* variable holding a list or table that is not JSON. Name the variable,
        # never the value (it may be a token).
        bad = not_json(environ, model)
        if bad:
            which = ", ".join(bad) + (" is" if len(bad) == 1 else " are")
        else:
            field = re.search(r'field "(\w+)"', str(exc))
            which = (f"a {ENV_PREFIX}{field.group(1).upper()}__* variable is" if field
                     else f"a {ENV_PREFIX}* variable is")
        raise ConfigError(f"invalid configuration: {which} not valid JSON (lists and tables "
                          f"are JSON, e.g. {ENV_PREFIX}AGENT__COMMAND="
                          "'[\"picobot\",\"agent\",\"--json\"]')") from None
    except ValidationError as exc:
        details = "; ".join(_describe(e, environ) for e in exc.errors())
        raise ConfigError(f"invalid configuration{where} (or PICOBRIDGE_* environment): "
                          f"{details}") from None
    finally:
        _TOML_DATA.reset(reading)
