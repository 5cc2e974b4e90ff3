"""The settings' loader: pydantic-settings reads the sources (the TOML file, PICOBRIDGE_*
environment variables, systemd credentials) and validates them into the plain sections
(config/sections.py, each platform's settings module), which `load` hands back as a
`Settings` (config/settings.py).

Unknown keys are errors (a misspelled key silently ignored is a bot that silently misbehaves),
and errors never echo values, because values may be tokens."""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Collection, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from picobridge.config.agents import check_agents
from picobridge.config.credentials import CredentialsSource, WithBotCredentials
from picobridge.config.environment import ENV_PREFIX, env_source, not_json, unknown_env
from picobridge.config.fields import key_annotation, section_class, section_keys
from picobridge.config.mentions import named_platforms
from picobridge.config.sections import (
    VOICE_CREDENTIALS,
)
from picobridge.config.settings import (
    ConfigError,
    Settings,
    credential_files,
    default_config_path,
    registered,
)
from picobridge.config.shapes import shape_problems

if TYPE_CHECKING:
    from picobridge.contract import Platform

# The tables of the config file `load` is reading, for the file's source. A context variable
# rather than a subclass per load: each subclass was a second validator of the whole model,
# built again at every load.
_TOML_DATA: ContextVar[dict[str, Any] | None] = ContextVar("picobridge_toml_data", default=None)


class _ConfigFile(InitSettingsSource):
    """The config file's tables as `load` read them, lowest of the sources: what
    pydantic-settings' TomlConfigSettingsSource gives, without reading the file a second time
    (nor finding it changed since it was checked)."""


class _Environment(EnvSettingsSource):
    """pydantic-settings' environment source, finding the keys of dataclass sections too
    (PICOBRIDGE_TELEGRAM__ALLOWED_USERS is a list, read as JSON): it looks into models and
    pydantic dataclasses only."""

    def next_field(self, field: FieldInfo | Any | None, key: str,
                   case_sensitive: bool | None = None) -> FieldInfo | None:
        annotation = field.annotation if isinstance(field, FieldInfo) else field
        section = section_class(annotation)
        if section is None or not dataclasses.is_dataclass(section):
            return super().next_field(field, key, case_sensitive)
        name = key if case_sensitive else key.lower()
        if name not in section_keys(section):
            return None
        return FieldInfo.from_annotation(key_annotation(section, name))


# A section's default: its class validated from nothing by the settings model's own validator.
def section_default() -> Any:
    return Field(default={}, validate_default=True)


class CoreSettings(BaseSettings):
    """The sources of the settings; `settings_model` adds their keys: Settings' own (state_dir,
    the core sections) and a section per platform the configuration names."""

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
            WithBotCredentials(settings_cls, _Environment(settings_cls), platforms,
                               files_win=False),
            CredentialsSource(settings_cls, credential_files(platforms) | VOICE_CREDENTIALS),
            WithBotCredentials(settings_cls,
                               _ConfigFile(settings_cls, _TOML_DATA.get() or {}),
                               platforms, files_win=True),
        )

    def plain(self) -> Settings:
        """The settings these values are, checked as a whole (ValueError: what is wrong)."""
        given = type(self).model_fields
        settings = Settings(
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(Settings)
               if f.name in given},
            sections={name: getattr(self, name) for name in self._named},
            platforms=self._platforms, configured=frozenset(self.model_fields_set))
        _check(settings)
        return settings


def _check(settings: Settings) -> None:
    """What only the settings as a whole can say (what model validators said, in order)."""
    if settings.http.listen is None:
        for name, platform in settings.named_platforms.items():
            for bot in platform.bots(settings.section(name)).values():
                reason = platform.needs_listener(bot)
                if reason:
                    raise ValueError(f"{reason} needs http.listen")
    check_agents(settings)
    problems = shape_problems(settings.named_platforms, settings.section)
    if problems:
        raise ValueError("; ".join(problems))


# What Settings holds besides its keys.
_NOT_KEYS = frozenset({"sections", "platforms", "configured"})


def _core_fields() -> dict[str, Any]:
    """Settings' own keys as the model's fields, in its order: a section validated from
    nothing when not given, any other key its dataclass default (one list of them, Settings')."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(Settings):
        if f.name in _NOT_KEYS:
            continue
        annotation = key_annotation(Settings, f.name)
        if section_class(annotation) is not None:
            fields[f.name] = (annotation, section_default())
        elif callable(f.default_factory):
            fields[f.name] = (annotation, Field(default=f.default_factory()))
        else:
            fields[f.name] = (annotation, f.default)
    return fields


_models: dict[tuple[tuple[str, str, bool], ...], type[CoreSettings]] = {}


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
        fields: dict[str, Any] = {**_core_fields(),
                                  **{name: (p.section, section_default())
                                     for name, p in sections.items()}}
        model = create_model("Settings", __base__=CoreSettings, **fields)
        model._platforms = dict(platforms)
        model._named = sections
        _models[key] = model
    return model


def settings_of(platforms: Mapping[str, Platform] | None = None, **values: Any) -> Settings:
    """The settings these values give (raw tables, as a file's, validated as a file's are),
    under the environment's and credentials' as at a load; every platform has a section."""
    return settings_model(platforms)(**values).plain()


def _unknown_keys(data: Mapping[str, Any], model: type[Any], prefix: str = "") -> list[str]:
    problems = []
    keys = section_keys(model)
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in keys:
            from difflib import get_close_matches  # only to word a mistake

            hint = get_close_matches(key, list(keys), n=1)
            problems.append(f"unknown key '{dotted}'" + (f" (did you mean '{prefix}{hint[0]}'?)"
                                                          if hint else ""))
            continue
        section = section_class(key_annotation(model, key)) if isinstance(value, dict) else None
        if section is not None:
            problems.extend(_unknown_keys(value, section, f"{dotted}."))
    return problems


# An unknown key of a dataclass section, as pydantic says it (a model's is extra_forbidden).
_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")


def _describe(error: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "config"
    if error["type"] in _UNKNOWN:
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


def _not_json(exc: SettingsError, environ: Mapping[str, str],
              model: type[CoreSettings]) -> ConfigError:
    # A PICOBRIDGE_* variable holding a list or table that is not JSON. Name the variable,
    # never the value (it may be a token).
    bad = not_json(environ, model)
    if bad:
        which = ", ".join(bad) + (" is" if len(bad) == 1 else " are")
    else:
        field = re.search(r'field "(\w+)"', str(exc))
        which = (f"a {ENV_PREFIX}{field.group(1).upper()}__* variable is" if field
                 else f"a {ENV_PREFIX}* variable is")
    return ConfigError(f"invalid configuration: {which} not valid JSON (lists and tables "
                       f"are JSON, e.g. {ENV_PREFIX}AGENT__COMMAND="
                       "'[\"picobot\",\"agent\",\"--json\"]')")


def load(path: Path | None, environ: Mapping[str, str] | None = None,
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
        return model().plain()
    except SettingsError as exc:
        raise _not_json(exc, environ, model) from None
    except ValidationError as exc:
        details = "; ".join(_describe(e, environ) for e in exc.errors())
        raise ConfigError(f"invalid configuration{where} (or PICOBRIDGE_* environment): "
                          f"{details}") from None
    except ValueError as exc:
        raise ConfigError(f"invalid configuration{where} (or PICOBRIDGE_* environment): "
                          f"{exc}") from None
    finally:
        _TOML_DATA.reset(reading)
