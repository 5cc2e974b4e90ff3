"""The `picobridge` command line. Operator mistakes get one clear line and a distinct exit code
(bridge/exit_codes.py), never a traceback; anything unforeseen gets one line too, with the
way to see the traceback, and exit code INTERNAL."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from picobridge import exit_codes
from picobridge.cli import statedir
from picobridge.cli.common import CliError, no_platform, open_store
from picobridge.cli.instance import InstanceLock, InstanceLocked
from picobridge.cli.parser import build_parser
from picobridge.cli.wiring import StartupError
from picobridge.config.settings import (
    ConfigError,
    Settings,
    default_config_path,
    load_settings,
    with_default_state_dir,
)
from picobridge.ops.logs import RedactingFormatter, setup_logging

if TYPE_CHECKING:
    from picobridge.agent.agents import AgentSet
    from picobridge.store import Store

log = logging.getLogger("picobridge.cli")

__all__ = ["CliError", "main"]


@dataclass
class Invocation:
    """One run of the command line: what was typed and what it loaded."""

    args: argparse.Namespace
    argv: list[str]
    secrets: list[str] = field(default_factory=list)
    # The state_dir is the default (no config or variable set it): say so when creating it.
    default_state_dir: bool = False

    def settings(self) -> Settings:
        try:
            settings = load_settings(self.args.config)
        except ConfigError as exc:
            raise CliError(f"config error: {exc}", exit_codes.CONFIG) from None
        self.secrets = settings.secrets()
        self.default_state_dir = "state_dir" not in settings.model_fields_set
        settings = with_default_state_dir(settings)
        if getattr(self.args, "echo", False):
            from picobridge.cli.echo_agent import with_echo_agent

            settings = with_echo_agent(settings)
        level = settings.log.level
        setup_logging(level if self.args.command == "run" or level == "DEBUG" else "WARNING",
                      self.secrets)
        return settings


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(words)
    invocation = Invocation(args, words)
    try:
        return _dispatch(invocation)
    except (CliError, StartupError, statedir.StateDirError) as exc:
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
        return _unexpected(exc, invocation)


def _unexpected(exc: Exception, invocation: Invocation) -> int:
    """One line on stderr. The traceback goes to the log with log.level DEBUG, and always for
    the daemon, whose log (the journal) is where an operator looks for it."""
    secrets = invocation.secrets
    scrub = RedactingFormatter("%(message)s", secrets, journald=False)
    debugging = (logging.getLogger().isEnabledFor(logging.DEBUG)
                 or os.environ.get("PICOBRIDGE_LOG__LEVEL", "").upper() == "DEBUG"
                 or invocation.args.command == "run")
    if debugging:
        if not logging.getLogger().handlers:
            setup_logging("DEBUG", secrets)
        log.critical("unexpected error", exc_info=exc)
    where = "above" if debugging else "in the log with PICOBRIDGE_LOG__LEVEL=DEBUG"
    print(f"picobridge: unexpected error: {exc.__class__.__name__}: "
          f"{scrub.redact(str(exc))} (a bug in picobridge; the traceback is {where})",
          file=sys.stderr)
    return exit_codes.INTERNAL


def _dispatch(invocation: Invocation) -> int:
    args = invocation.args
    command = args.command
    if command == "echo-agent":
        from picobridge.cli import echo_agent

        return echo_agent.main()
    if command == "init":
        from picobridge.cli import init

        return init.run(args.path or args.config, force=args.force)
    if command == "check":
        from picobridge.cli.check import run_check

        return asyncio.run(run_check(invocation))
    settings = invocation.settings()
    if command == "health":
        from picobridge.cli.health_client import query_health

        return query_health(settings, args.url)
    if command in ("sessions", "access"):
        from picobridge.cli import admin

        handler = admin.sessions if command == "sessions" else admin.access
        return asyncio.run(handler(settings, args, invocation.argv))
    if command == "failed":
        from picobridge.cli.dead_letters import failed

        return asyncio.run(failed(settings, args, invocation.argv))
    runner = {"run": _run, "chat": _chat, "migrate": _migrate}[command]
    return asyncio.run(runner(settings, invocation))


@asynccontextmanager
async def _exclusive_store(settings: Settings, invocation: Invocation) -> AsyncIterator[Store]:
    """The store, with this process the only picobridge using the state directory."""
    statedir.prepare(settings.state_dir, invocation.argv, create=True,
                     announce=invocation.default_state_dir)
    lock = InstanceLock(settings.state_dir)
    try:
        lock.acquire(invocation.args.command)
    except InstanceLocked as exc:
        raise CliError(str(exc), exit_codes.DATABASE) from None
    except OSError as exc:
        raise statedir.problem(settings.state_dir, exc, invocation.argv) from None
    try:
        store = await open_store(settings)
        try:
            yield store
        finally:
            await store.close()
    finally:
        lock.release()


def _agent_commands(settings: Settings) -> list[list[str]]:
    return [command for agent in settings.named_agents().values()
            for command in ([w.command for w in agent.workers] or [agent.command])]


def _refuse_exposed(settings: Settings, invocation: Invocation) -> None:
    """Before anything starts: warn of a config file others may read, refuse one others may
    write (or an agent program others may replace)."""
    from picobridge.cli.exposure import exposure

    config = invocation.args.config or default_config_path(os.environ)
    found = exposure(config, invocation.secrets, _agent_commands(settings))
    for warning in found.warnings:
        log.warning("%s", warning)
    if found.refusals:
        raise CliError("refusing to start: " + "; ".join(found.refusals), exit_codes.CONFIG)


async def _run(settings: Settings, invocation: Invocation) -> int:
    from picobridge.adapters.registry import build_adapters
    from picobridge.cli import wiring as daemon
    from picobridge.cli.agent_hint import missing_agent

    _refuse_exposed(settings, invocation)
    adapters = build_adapters(settings)
    if not adapters:
        raise CliError(f"config error: {no_platform(settings)} (or try `picobridge chat "
                       "--echo`)", exit_codes.CONFIG)
    for command in _agent_commands(settings):
        hint = missing_agent(command)
        if hint:
            log.error("agent command not found: %r (agent.command); %s", command[0], hint)
    async with _exclusive_store(settings, invocation) as store:
        return await daemon.run(settings, store, adapters)


async def _chat(settings: Settings, invocation: Invocation) -> int:
    from picobridge.adapters.console.adapter import CONSOLE_CHAT, ConsoleAdapter
    from picobridge.cli import wiring as daemon

    _refuse_exposed(settings, invocation)
    console = ConsoleAdapter(sys.stdin.buffer, sys.stdout, sys.stderr,
                             interactive=sys.stdin.isatty())

    async def finished(assembled: daemon.Daemon) -> None:
        await _agent_up(assembled.pool, _agent_commands(settings))
        console.may_read.set()
        await console.input_done.wait()
        await daemon.wait_until_settled(assembled, CONSOLE_CHAT.key, console.reply_printed)

    async with _exclusive_store(settings, invocation) as store:
        return await daemon.run(settings, store, [console], finished=finished)


async def _agent_up(pool: AgentSet, commands: list[list[str]]) -> None:
    """Wait for some worker's first ready; give up when every worker failed a few starts in
    a row (or its command does not exist)."""
    from picobridge.cli.agent_hint import missing_agent

    while not pool.first_ready:
        hopeless = [w for w in pool.workers if w.start_failures >= 3
                    or (w.last_error or "").startswith("agent command")]
        if len(hopeless) == len(pool.workers):
            hint = next(filter(None, map(missing_agent, commands)), None)
            raise CliError(f"the agent cannot start: {hopeless[0].last_error}"
                           + (f"; {hint}" if hint else ""), exit_codes.AGENT)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.2):
                await pool.workers[0].first_ready.wait()


async def _migrate(settings: Settings, invocation: Invocation) -> int:
    async with _exclusive_store(settings, invocation) as store:
        version = await store.schema_version()
    print(f"database {settings.db_path} is at schema version {version}")
    return exit_codes.OK
