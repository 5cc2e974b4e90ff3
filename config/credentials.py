"""Secrets from systemd credentials ($CREDENTIALS_DIRECTORY, `LoadCredential=`), and the
error every configuration problem is reported with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

if TYPE_CHECKING:
    from picobridge.contract import Platform


class ConfigError(Exception):
    """A configuration problem, phrased for the operator, never containing a secret value."""


def credential_files(platforms: Mapping[str, Platform]) -> dict[str, tuple[str, str]]:
    """systemd credential file name -> (section, key), e.g. `LoadCredential=telegram_token:..`."""
    return {filename: (name, key) for name, platform in platforms.items()
            for filename, key in platform.credentials.items()}


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
            path = Path(directory) / filename
            try:
                if path.is_file():
                    found.setdefault(section, {})[key] = path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
                raise ConfigError(f"cannot read credential {filename} in $CREDENTIALS_DIRECTORY: "
                                  f"{reason}") from None
        return found


