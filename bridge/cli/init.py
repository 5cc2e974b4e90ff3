"""`picobridge init [PATH]`: write the shipped example config (every key commented, with its
default; nothing enabled) for this user only, and say what to do next."""

from __future__ import annotations

import os
import shlex
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from picobridge import exit_codes
from picobridge.cli.errors import CliError
from picobridge.config.settings import DEFAULT_CONFIG_PATH, default_config_path

if TYPE_CHECKING:
    from picobridge.cli.invocation import Invocation

USER_CONFIG = Path("picobridge.toml")


def example_config() -> bytes:
    return (resources.files("picobridge.config") / "example.toml").read_bytes()


def default_path() -> Path:
    """$PICOBRIDGE_CONFIG, else /etc/picobridge/config.toml for root, else ./picobridge.toml."""
    if os.environ.get("PICOBRIDGE_CONFIG"):
        return Path(os.environ["PICOBRIDGE_CONFIG"])
    return DEFAULT_CONFIG_PATH if os.geteuid() == 0 else USER_CONFIG


def write_config(path: Path, *, force: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if force else os.O_EXCL)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise CliError(f"{path} exists; keep it, or overwrite it with `picobridge init --force "
                       f"{shlex.quote(str(path))}`", exit_codes.FAILURE) from None
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}", exit_codes.FAILURE
                       ) from None
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), 0o600)  # an overwritten file keeps no wider mode
        out.write(example_config())


def next_steps(path: Path) -> str:
    found = default_config_path(os.environ) or DEFAULT_CONFIG_PATH
    option = "" if path.resolve() == found.resolve() else f" --config {shlex.quote(str(path))}"
    steps = [
        f"wrote {path} (mode 0600: only you can read it; every key is commented out, so "
        "nothing is enabled yet)",
        "next:",
        "  1. see the bridge work with the built-in echo agent (no tokens, no agent needed):",
        f"       picobridge chat{option} --echo",
        "  2. install your agent and set agent.command (default: picobot agent --json), then:",
        f"       picobridge chat{option}",
        "  3. enable a platform: telegram.token (docs/telegram.md) or slack.bot_token and "
        "slack.app_token (docs/slack.md), allow yourself (allowed_users, or "
        "`picobridge access allow`), then:",
        f"       picobridge check{option}",
        f"       picobridge run{option}",
    ]
    if os.geteuid() == 0:
        steps.append(f"  for the systemd service (user picobridge): chgrp picobridge {path} && "
                     f"chmod 0640 {path}; see docs/operations.md")
    return "\n".join(steps)


def run(path: Path | None, *, force: bool) -> int:
    target = path if path is not None else default_path()
    write_config(target, force=force)
    print(next_steps(target))
    return exit_codes.OK


def init_command(invocation: Invocation) -> int:
    args = invocation.args
    return run(args.path or args.config, force=args.force)
