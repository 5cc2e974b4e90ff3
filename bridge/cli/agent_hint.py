"""What to tell an operator whose agent command is not installed."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Sequence

_WHERE = {
    "picobot": (
        "picobot is installed from its own project, not from PyPI: `pip install picobot` "
        "brings an unrelated program of the same name; install picobot as its instructions "
        "say and put its full path in agent.command"),
    "prime-agent": (
        "prime-agent's RPC mode is the pi coding agent's: `npm install -g "
        "@mariozechner/pi-coding-agent`, then agent.command = [\"pi\", \"--mode\", \"rpc\"]"),
    "pi": ("pi is the npm package @mariozechner/pi-coding-agent (`npm install -g "
           "@mariozechner/pi-coding-agent`)"),
}
TRY_ECHO = ("to see the bridge work without it, use the built-in test agent: "
            "`picobridge chat --echo` (or `run --echo`)")


def installed(command: Sequence[str]) -> bool:
    program = command[0] if command else ""
    if os.sep in program:
        return os.path.isfile(program)
    return shutil.which(program) is not None


def missing_agent(command: Sequence[str]) -> str | None:
    """A hint naming where the agent comes from and `--echo`, or None when it is installed."""
    if installed(command):
        return None
    split = _one_string(command)
    if split is not None:
        words = (f"agent.command is a list with one word per item, not one command line: "
                 f"write {json.dumps(split)}")
        more = missing_agent(split)
        return words + (f"; {more}" if more else "")
    where = _WHERE.get(os.path.basename(command[0]) if command else "")
    return "; ".join(part for part in (where, TRY_ECHO) if part)


def _one_string(command: Sequence[str]) -> list[str] | None:
    """The words of a command line given as a single item (`["picobot agent --json"]`)."""
    if len(command) != 1:
        return None
    try:
        words = shlex.split(command[0])
    except ValueError:
        return None
    return words if len(words) > 1 else None
