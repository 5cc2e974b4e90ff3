"""The `picobridge` command line. Operator mistakes get one clear line and a distinct exit code
(bridge/exit_codes.py), never a traceback; anything unforeseen gets one line too, with the
way to see the traceback, and exit code INTERNAL.

Operators run `access`, `sessions`, `health` and `check` by hand, from scripts and health
probes, so each command imports only what it needs: this module and the parser import
nothing beyond the standard library's argparse, and a command's module is imported once the
command is known (COMMANDS). Only run, chat and check load the daemon's wiring, the agent
side and the enabled platforms' libraries. tests/e2e/test_cli_startup.py keeps it so."""

from __future__ import annotations

import importlib
import os
import sys

from picobridge import __version__, exit_codes
from picobridge.cli.errors import CliError

# typing.TYPE_CHECKING without importing typing, which is a good part of `--version`'s time;
# mypy and import-linter read the name alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from picobridge.cli.invocation import Invocation

__all__ = ["COMMANDS", "CliError", "guarded", "main"]

# Each command's "module:function"; the function takes the Invocation and returns the exit
# code. A new command: its parser in cli/parser.py, one line here, and a module whose
# top-level imports are only what that command uses (heavier ones inside the function).
COMMANDS: dict[str, str] = {
    "run": "picobridge.cli.daemon:run_command",
    "chat": "picobridge.cli.daemon:chat_command",
    "migrate": "picobridge.cli.daemon:migrate_command",
    "check": "picobridge.cli.check:check_command",
    "health": "picobridge.cli.health_client:health_command",
    "sessions": "picobridge.cli.admin:sessions_command",
    "access": "picobridge.cli.admin:access_command",
    "failed": "picobridge.cli.dead_letters:failed_command",
    "forget": "picobridge.cli.erasure:forget_command",
    "export": "picobridge.cli.erasure:export_command",
    "init": "picobridge.cli.init:init_command",
    "manifest": "picobridge.cli.manifest:manifest_command",
    "echo-agent": "picobridge.cli.echo_agent:echo_agent_command",
}


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words == ["--version"]:
        # What health probes and packaging scripts ask most: answered before argparse loads.
        print(f"picobridge {__version__}")
        return exit_codes.OK
    from picobridge.cli.invocation import Invocation
    from picobridge.cli.parser import build_parser

    invocation = Invocation(build_parser().parse_args(words), words)
    return guarded(lambda: command(invocation.args.command)(invocation),
                   lambda: invocation.secrets, invocation.args.command)


def guarded(call: Callable[[], int], secrets: Callable[[], list[str]], name: str) -> int:
    """`call()`'s exit code; an operator's mistake (CliError) one line and its code,
    anything unforeseen one line too (`secrets()` redacted from it). For the command `name`,
    here and in the daemon proper (cli/handoff.py)."""
    try:
        return call()
    except CliError as exc:
        print(f"picobridge: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED
    except BrokenPipeError:
        # `picobridge sessions list | head`: the reader left early, which is not an error.
        # Point stdout at /dev/null so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exit_codes.OK
    except Exception as exc:  # the last resort: one line, never a traceback on its own
        return _unexpected(exc, secrets(), name)


def command(name: str) -> Callable[[Invocation], int]:
    module, _, function = COMMANDS[name].partition(":")
    handler: Callable[[Invocation], int] = getattr(importlib.import_module(module), function)
    return handler


def _unexpected(exc: Exception, secrets: list[str], name: str) -> int:
    """One line on stderr. The traceback goes to the log with log.level DEBUG, and always for
    the daemon, whose log (the journal) is where an operator looks for it."""
    import logging

    from picobridge.ops.logs import RedactingFormatter, setup_logging

    log = logging.getLogger("picobridge.cli")
    from picobridge.adapters.registry import library_loggers, secret_shapes

    scrub = RedactingFormatter("%(message)s", secrets, journald=False, shapes=secret_shapes())
    debugging = (logging.getLogger().isEnabledFor(logging.DEBUG)
                 or os.environ.get("PICOBRIDGE_LOG__LEVEL", "").upper() == "DEBUG"
                 or name == "run")
    if debugging:
        if not logging.getLogger().handlers:
            setup_logging("DEBUG", secrets, library_loggers(), shapes=secret_shapes())
        log.critical("unexpected error", exc_info=exc)
    where = "above" if debugging else "in the log with PICOBRIDGE_LOG__LEVEL=DEBUG"
    print(f"picobridge: unexpected error: {exc.__class__.__name__}: "
          f"{scrub.redact(str(exc))} (a bug in picobridge; the traceback is {where})",
          file=sys.stderr)
    return exit_codes.INTERNAL
