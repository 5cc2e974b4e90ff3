"""The commands that hold the state directory: `run` (the daemon), `chat` (the console through
the same bridge) and `migrate`. Only run and chat import the daemon's wiring.

`run` checks what it can before anything starts (the configuration, who may change it, that
some platform is on, the agent's program), then becomes the daemon proper (cli/handoff.py),
which takes the state directory and serves (`serve`). `chat` and `migrate` stay in one
program: a console and a one-off, whose footprint matters less than their start."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, NoReturn

from picobridge import exit_codes
from picobridge.cli import statedir
from picobridge.cli.common import no_platform, open_store
from picobridge.cli.errors import CliError
from picobridge.cli.instance import InstanceLock, InstanceLocked

if TYPE_CHECKING:
    from picobridge.agent.agents import AgentSet
    from picobridge.cli.invocation import Invocation
    from picobridge.cli.signals import HeldSignals
    from picobridge.config.settings import Settings
    from picobridge.store import Store

log = logging.getLogger("picobridge.cli")


def run_command(invocation: Invocation) -> NoReturn:
    from picobridge.adapters.registry import enabled_platforms
    from picobridge.cli import handoff
    from picobridge.cli.agent_hint import missing_agent

    handoff.hold_signals()  # a stop asked for from now on is acted on by the daemon proper
    settings = invocation.settings()
    _refuse_exposed(settings, invocation)
    if not enabled_platforms(settings):
        raise CliError(f"config error: {no_platform(settings)} (or try `picobridge chat "
                       "--echo`)", exit_codes.CONFIG)
    for command in _agent_commands(settings):
        hint = missing_agent(command)
        if hint:
            log.error("agent command not found: %r (agent.command); %s", command[0], hint)
    handoff.exec_daemon(settings, invocation.argv, invocation.default_state_dir)


def serve(settings: Settings, words: Sequence[str], announce: bool,
          held: HeldSignals | None = None) -> int:
    """The daemon proper, with settings `run_command` checked: `words` are what was typed
    (repeated in the state_dir's messages), `announce` to say the state_dir was made."""
    return asyncio.run(_serve(settings, words, announce, held))


def chat_command(invocation: Invocation) -> int:
    return asyncio.run(_chat(invocation.settings(), invocation))


def migrate_command(invocation: Invocation) -> int:
    return asyncio.run(_migrate(invocation.settings(), invocation))


@asynccontextmanager
async def _exclusive_store(settings: Settings, words: Sequence[str], command: str,
                           announce: bool) -> AsyncIterator[Store]:
    """The store, with this process the only picobridge using the state directory."""
    statedir.prepare(settings.state_dir, words, create=True, announce=announce)
    lock = InstanceLock(settings.state_dir)
    try:
        lock.acquire(command)
    except InstanceLocked as exc:
        raise CliError(str(exc), exit_codes.DATABASE) from None
    except OSError as exc:
        raise statedir.problem(settings.state_dir, exc, words) from None
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
    from picobridge.config.settings import default_config_path

    config = invocation.args.config or default_config_path(os.environ)
    found = exposure(config, invocation.secrets, _agent_commands(settings))
    for warning in found.warnings:
        log.warning("%s", warning)
    if found.refusals:
        raise CliError("refusing to start: " + "; ".join(found.refusals), exit_codes.CONFIG)


async def _serve(settings: Settings, words: Sequence[str], announce: bool,
                 held: HeldSignals | None) -> int:
    from picobridge.adapters.registry import build_adapters
    from picobridge.cli import wiring as daemon

    adapters = build_adapters(settings)
    async with _exclusive_store(settings, words, "run", announce) as store:
        return await daemon.run(settings, store, adapters, held=held)


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

    async with _exclusive_store(settings, invocation.argv, invocation.args.command,
                                invocation.default_state_dir) as store:
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
    async with _exclusive_store(settings, invocation.argv, invocation.args.command,
                                invocation.default_state_dir) as store:
        version = await store.schema_version()
    print(f"database {settings.db_path} is at schema version {version}")
    return exit_codes.OK
