"""Secrets from systemd credentials ($CREDENTIALS_DIRECTORY, `LoadCredential=`), as sources
of the settings' loader."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from picobridge.config.settings import ConfigError

if TYPE_CHECKING:
    from picobridge.contract import Platform


class CredentialsSource(PydanticBaseSettingsSource):
    """Secrets from systemd's LoadCredential= files, so tokens need not sit in the config."""

    def __init__(self, settings_cls: type[BaseSettings],
                 files: Mapping[str, tuple[str, str]]) -> None:
        super().__init__(settings_cls)
        self._files = files

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        directory = os.environ.get("CREDENTIALS_DIRECTORY")
        if not directory:
            return {}
        found: dict[str, dict[str, str]] = {}
        for filename, (section, key) in self._files.items():
            value = _read(Path(directory), filename)
            if value is not None:
                found.setdefault(section, {})[key] = value
        return found


def _read(directory: Path, filename: str) -> str | None:
    path = directory / filename
    try:
        return path.read_text(encoding="utf-8").strip() if path.is_file() else None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"cannot read credential {filename} in $CREDENTIALS_DIRECTORY: "
                          f"{reason}") from None


class WithBotCredentials(PydanticBaseSettingsSource):
    """Another source (the environment, the config file) with each further bot's secrets from
    its own credential files, `<file>_<bot>` (`telegram_token_work` for `[[telegram.bots]]`
    named "work"), merged into the entries that source gives. A list of bots is one value, so
    the source that gives it gives all of it (the environment's replaces the file's); within
    an entry the rule is the default bot's: the environment beats a credential file, which
    beats the config file."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource,
                 platforms: Mapping[str, Platform], *, files_win: bool) -> None:
        super().__init__(settings_cls)
        self._inner, self._platforms, self._files_win = inner, platforms, files_win
        # pydantic-settings keeps each source's values under this name
        self.__name__ = type(inner).__name__

    def _set_current_state(self, state: dict[str, Any]) -> None:
        super()._set_current_state(state)
        self._inner._set_current_state(state)

    def _set_settings_sources_data(self, states: dict[str, dict[str, Any]]) -> None:
        super()._set_settings_sources_data(states)
        self._inner._set_settings_sources_data(states)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        data = self._inner()
        directory = os.environ.get("CREDENTIALS_DIRECTORY")
        if not directory:
            return data
        for name, platform in self._platforms.items():
            section, key = data.get(name), platform.bots_key
            if key is None or not isinstance(section, dict) or not isinstance(
                    section.get(key), list):
                continue
            entries = [self._merged(entry, _bot_files(Path(directory), platform, entry["name"]))
                       if isinstance(entry, dict) and isinstance(entry.get("name"), str)
                       else entry for entry in section[key]]
            data = {**data, name: {**section, key: entries}}
        return data

    def _merged(self, entry: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
        return {**entry, **files} if self._files_win else {**files, **entry}


def _bot_files(directory: Path, platform: Platform, bot: str) -> dict[str, str]:
    found = {key: _read(directory, f"{filename}_{bot}")
             for filename, key in platform.credentials.items()}
    # An empty file is no credential (the unit's placeholder for a bot without that secret).
    return {key: value for key, value in found.items() if value}
