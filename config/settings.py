"""The settings: what a configuration says, as plain Python the daemon holds without pydantic
(and a parent process can hand a child, pickled). `load_settings` reads and validates them
(config/loader.py, with pydantic-settings): a TOML file, overridden by PICOBRIDGE_*
environment variables, with secrets optionally read from systemd credentials
($CREDENTIALS_DIRECTORY)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from picobridge.config.agents import named_agents
from picobridge.config.environment import ENV_PREFIX
from picobridge.config.fields import Plain, plain
from picobridge.config.sections import (
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

if TYPE_CHECKING:
    from picobridge.contract import Platform

__all__ = ["ENV_PREFIX", "ConfigError", "Settings", "credential_files", "load_settings"]

DEFAULT_CONFIG_PATH = Path("/etc/picobridge/config.toml")
SYSTEM_STATE_DIR = Path("/var/lib/picobridge")


class ConfigError(Exception):
    """A configuration problem, phrased for the operator, never containing a secret value."""


def registered(platforms: Mapping[str, Platform] | None = None) -> Mapping[str, Platform]:
    """The platforms given, by default the registered ones (adapters/registry.py)."""
    if platforms is not None:
        return platforms
    from picobridge.adapters.registry import platforms as every

    return every()


@plain
class Settings(Plain):
    """The core's sections, the sections of the platforms the configuration names, and every
    registered platform (whose entries say what a section means)."""

    # The default; the command line resolves an unset state_dir with `default_state_dir` (a
    # user's own folder for users who cannot write this one).
    state_dir: Path = SYSTEM_STATE_DIR
    agent: AgentSettings = field(default_factory=AgentSettings)
    # Further named agents, `[agents.NAME]`; `[agent]` is the agent named "default".
    agents: dict[str, AgentSettings] = field(default_factory=dict)
    routes: list[RouteSettings] = field(default_factory=list)
    bridge: BridgeSettings = field(default_factory=BridgeSettings)
    attachments: AttachmentSettings = field(default_factory=AttachmentSettings)
    voice: VoiceSettings = field(default_factory=VoiceSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    log: LogSettings = field(default_factory=LogSettings)
    # The sections of the platforms the configuration names (config/mentions.py), by
    # platform, in the registry's order; the others' sections are their defaults.
    sections: Mapping[str, Any] = field(default_factory=dict)
    # Every registered platform. Not compared: the settings are what the sections say.
    platforms: Mapping[str, Platform] = field(default_factory=registered, compare=False,
                                              repr=False)
    # The top-level keys the configuration set (a file's table, a variable): `[agent]` given
    # or not, state_dir given or the default.
    configured: frozenset[str] = frozenset()

    def section(self, platform: str) -> Any:
        """A platform's own section (`[telegram]`), as that platform's class: its defaults
        when the configuration does not name the platform."""
        if platform in self.sections:
            return self.sections[platform]
        return default_section(self.platforms[platform])

    @property
    def named_platforms(self) -> Mapping[str, Platform]:
        """The platforms the configuration names; the others are off, allow nobody and have
        no secrets."""
        return {name: p for name, p in self.platforms.items() if name in self.sections}

    @property
    def db_path(self) -> Path:
        return self.state_dir / "picobridge.db"

    @property
    def media_dir(self) -> Path:
        return self.state_dir / "media"

    def named_agents(self) -> dict[str, AgentSettings]:
        """Every agent by name (config/agents.py)."""
        return named_agents(self)

    def secrets(self) -> list[str]:
        """Every secret value configured, for the log redaction filter."""
        return [*(secret for name, platform in self.named_platforms.items()
                  for bot in platform.bots(self.section(name)).values()
                  for secret in platform.secrets(bot)), *self.voice.secrets()]


_defaults: dict[type[Any], Any] = {}


def default_section(platform: Platform) -> Any:
    """A platform's section with nothing set, made once."""
    cls = platform.section
    if cls not in _defaults:
        _defaults[cls] = cls()
    return _defaults[cls]


def credential_files(platforms: Mapping[str, Platform]) -> dict[str, tuple[str, str]]:
    """systemd credential file name -> (section, key), e.g. `LoadCredential=telegram_token:..`."""
    return {filename: (name, key) for name, platform in platforms.items()
            for filename, key in platform.credentials.items()}


def load_settings(path: Path | None, environ: Mapping[str, str] | None = None,
                  platforms: Mapping[str, Platform] | None = None) -> Settings:
    """Load and validate the configuration; raise ConfigError with an operator-friendly text.
    (pydantic and pydantic-settings are imported now, by the loader.)"""
    from picobridge.config.loader import load

    return load(path, environ, platforms)


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
    if "state_dir" in settings.configured:
        return settings
    return replace(settings, state_dir=default_state_dir(environ))
