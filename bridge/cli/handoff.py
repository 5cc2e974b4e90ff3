"""`picobridge run` in two steps, one process: the command line validates the configuration
(pydantic-settings), then re-executes the interpreter (os.execv: the same PID, so systemd's
Type=notify, Docker's PID 1 and whoever sends SIGTERM still see one process) as the daemon
proper, `python -c BOOT --from-fd N run ...` (BOOT: the import path, then this module's
`main`), which never loads pydantic.

The validated settings travel only through a pipe the new program inherits (pickled: our own
process to our own process), never through argv, the environment or a file; the daemon reads
them and closes the pipe before it starts anything. Stop signals are held (blocked) from the
start of `run` until the daemon proper can act on them: a SIGTERM in between is kept across the
exec and stops the daemon in order, once it has started (signals.HeldSignals)."""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import sys

# typing.TYPE_CHECKING without importing typing, as in cli/main.py: the daemon proper starts
# with this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, BinaryIO, NoReturn

    from picobridge.cli.signals import HeldSignals
    from picobridge.config.settings import Settings

__all__ = ["BOOT", "FD_FLAG", "HELD", "MODULE", "exec_daemon", "hold_signals", "main", "receive",
           "send"]

MODULE = "picobridge.cli.handoff"
FD_FLAG = "--from-fd"
# The daemon proper's program: the import path first (send's first pickle), then this module.
# Not `-m MODULE`: that looks for the module before anything is read, on a fresh interpreter's
# default path, which has no picobridge when a launcher put it on the path (a zipapp, shiv,
# pex, a script inserting its folder). Stdlib only until the path is set.
BOOT = ("import os, pickle, sys; pipe = os.fdopen(int(sys.argv[2]), 'rb'); "
        f"sys.path[:] = pickle.load(pipe); from {MODULE} import main; sys.exit(main(pipe=pipe))")
# Stop (and SIGHUP's log line) held across the exec; signals.Signals acts on them.
HELD = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
# The registries a launcher may have added to before calling the command line (a platform, an
# agent protocol: tests/e2e/test_new_platform.py): the daemon proper gets the same tables.
REGISTRIES = {"picobridge.adapters.registry": "PLATFORMS",
              "picobridge.agent.protocols": "PROTOCOLS"}


def hold_signals() -> None:
    """Block HELD: one that comes now stays pending, through the exec, until the daemon
    proper unblocks it with its handlers in place."""
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD)


def _registries() -> dict[str, Any]:
    return {module: getattr(sys.modules[module], name)
            for module, name in REGISTRIES.items() if module in sys.modules}


def send(fd: int, settings: Settings, announce: bool) -> None:
    """Write what the daemon proper needs into the pipe `fd` (all of it: nobody reads yet,
    so the pipe is made big enough first)."""
    # Three pickles, each read with what the one before set: the import path (plain strings),
    # the registries, then the settings (whose classes may come from where a launcher put
    # them, and name platforms a launcher registered).
    data = b"".join(pickle.dumps(part, pickle.HIGHEST_PROTOCOL)
                    for part in (sys.path, _registries(), (settings, announce)))
    # Asked, not assumed to be Linux's default 64 KB: a user beyond fs.pipe-user-pages-soft
    # gets pipes of a page or two, and a write beyond the capacity would wait for ever.
    import fcntl

    if len(data) > fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, len(data))
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def receive(pipe: BinaryIO) -> tuple[Settings, bool]:
    """Read the rest of what `send` wrote (BOOT read the import path), and close the pipe:
    the settings and whether to say that the state_dir was made. The registries are the
    sender's from now on."""
    with pipe:
        for module, table in pickle.load(pipe).items():
            setattr(importlib.import_module(module), REGISTRIES[module], table)
        settings, announce = pickle.load(pipe)
    return settings, announce


def _interpreter_flags() -> list[str]:
    """The interpreter's options as this process has them (-X importtime, -W, -O, -I...),
    plus -P: the daemon's imports come from where this process's came from (BOOT), never
    from the working directory that `-c` would put first."""
    import subprocess

    flags: list[str] = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    return flags if sys.flags.safe_path or "-I" in flags else [*flags, "-P"]


def exec_daemon(settings: Settings, words: Sequence[str], announce: bool) -> NoReturn:
    """Become the daemon proper: `words` are what was typed after `picobridge` (what `ps`
    shows after the module's name, and what the state_dir's messages repeat)."""
    import logging

    from picobridge import exit_codes
    from picobridge.cli.errors import CliError

    read, write = os.pipe()
    try:
        send(write, settings, announce)
    finally:
        os.close(write)
    os.set_inheritable(read, True)
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    argv = [sys.executable, *_interpreter_flags(), "-c", BOOT, FD_FLAG, str(read), *words]
    try:
        os.execv(sys.executable, argv)
    except OSError as exc:
        os.close(read)
        raise CliError(f"cannot start the daemon: {sys.executable}: {exc.strerror}",
                       exit_codes.FAILURE) from None


def main(argv: Sequence[str] | None = None, pipe: BinaryIO | None = None) -> int:
    """The daemon proper, from BOOT: the rest of the pipe to read, `--from-fd N` then the
    words typed (for messages only)."""
    from picobridge.cli.main import guarded
    from picobridge.cli.signals import HeldSignals

    words = list(sys.argv[1:] if argv is None else argv)
    if pipe is None or len(words) < 2 or words[0] != FD_FLAG:
        print(f"picobridge: {MODULE} is started by `picobridge run`, not by hand",
              file=sys.stderr)
        return 2
    held = HeldSignals(HELD)
    held.install()
    secrets: list[str] = []
    return guarded(lambda: _serve(pipe, words[2:], held, secrets), lambda: secrets, "run")


def _serve(pipe: BinaryIO, words: list[str], held: HeldSignals, secrets: list[str]) -> int:
    from picobridge.adapters.registry import library_loggers, secret_shapes
    from picobridge.cli.daemon import serve
    from picobridge.ops.logs import setup_logging

    settings, announce = receive(pipe)
    secrets[:] = settings.secrets()
    setup_logging(settings.log.level, secrets, library_loggers(), shapes=secret_shapes())
    return serve(settings, words, announce, held)


if __name__ == "__main__":
    sys.exit(main())
