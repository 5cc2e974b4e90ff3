"""Which platforms a configuration names. The settings model has a section only for those: a
platform nothing names has its section's defaults, which nothing could have changed, and
building its model (and importing it) is the larger part of loading a configuration that
names one platform of four."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from picobridge.config.environment import ENV_PREFIX

if TYPE_CHECKING:
    from picobridge.contract import Platform


def named_platforms(raw: Mapping[str, Any], environ: Mapping[str, str],
                    platforms: Mapping[str, Platform]) -> set[str]:
    """The platforms with a section in the file (`raw`), a PICOBRIDGE_<NAME> variable or one
    under it, or a systemd credential file of theirs. Variables are looked for in `environ`
    and in the process's own environment, which is what the settings' sources read."""
    variables = {name.upper() for name in (*environ, *os.environ)}
    directory = os.environ.get("CREDENTIALS_DIRECTORY")
    found = set()
    for name, platform in platforms.items():
        prefix = f"{ENV_PREFIX}{name.upper()}"
        if (name in raw
                or any(v == prefix or v.startswith(f"{prefix}__") for v in variables)
                or (directory and any((Path(directory) / filename).is_file()
                                      for filename in platform.credentials))):
            found.add(name)
    return found
