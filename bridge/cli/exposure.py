"""Who else may read or change what picobridge trusts: the config file (it may hold tokens, and
the agent.command in it is run) and the agent's program.

A config file every local user may read gives them its tokens: a warning. One every user may
write, or an agent program every user may replace, lets anyone run their own program as
picobridge's user: picobridge refuses to start.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Exposure:
    warnings: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)


def _mode(path: Path) -> int | None:
    try:
        return path.stat().st_mode
    except OSError:
        return None


def _program(command: Sequence[str]) -> Path | None:
    program = command[0] if command else ""
    found = program if os.sep in program else shutil.which(program)
    return Path(found) if found else None


def exposure(config: Path | None, secrets: Iterable[str],
             commands: Iterable[Sequence[str]]) -> Exposure:
    found = Exposure()
    mode = _mode(config) if config is not None else None
    if config is not None and mode is not None:
        shown = oct(stat.S_IMODE(mode))[2:].zfill(4)
        if mode & stat.S_IWOTH:
            found.refusals.append(
                f"config file {config} is writable by every user (mode {shown}): anyone could "
                f"change agent.command, which picobridge runs; `chmod o-w {config}`")
        elif mode & stat.S_IROTH and _holds_secret(config, secrets):
            found.warnings.append(
                f"config file {config} holds a token and every user may read it (mode "
                f"{shown}): `chmod o-r {config}` (root-owned, group of the service's user, "
                "0640), or keep the token in a credential instead")
    for command in commands:
        program = _program(command)
        program_mode = _mode(program) if program is not None else None
        if program_mode is not None and program_mode & stat.S_IWOTH:
            found.refusals.append(
                f"the agent's program {program} is writable by every user: anyone could "
                f"replace what picobridge runs; `chmod o-w {program}`")
    return found


def _holds_secret(config: Path, secrets: Iterable[str]) -> bool:
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(secret and secret in text for secret in secrets)
