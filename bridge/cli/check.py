"""`picobridge check`: is this installation usable? One line per part, exit 0 only when all
parts are. Nothing printed here may contain a secret."""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from picobridge import exit_codes
from picobridge.adapters.registry import secret_shapes
from picobridge.agent.probe import probe_agent
from picobridge.agent.process import workdir
from picobridge.agent.protocols import driver_class
from picobridge.cli import statedir
from picobridge.cli.agent_hint import missing_agent
from picobridge.cli.common import no_platform
from picobridge.cli.errors import CliError
from picobridge.cli.exposure import exposure
from picobridge.cli.instance import holder
from picobridge.config.sections import AgentSettings
from picobridge.config.settings import Settings, default_config_path
from picobridge.contract import DEFAULT_AGENT
from picobridge.core.routes import shadowed
from picobridge.ops import listen
from picobridge.ops.logs import RedactingFormatter
from picobridge.store.schema import latest_version

if TYPE_CHECKING:
    from picobridge.cli.invocation import Invocation


class _Report:
    def __init__(self, secrets: list[str]) -> None:
        self.failed = False  # a part cannot be used
        self.misconfigured = False  # the configuration is what is wrong
        self._scrub = RedactingFormatter("%(message)s", secrets, journald=False,
                                         shapes=secret_shapes())

    def line(self, part: str, ok: bool | None, text: str, *, config: bool = False) -> None:
        mark = {True: "ok  ", False: "FAIL", None: "--  "}[ok]
        if ok is False:
            self.misconfigured |= config
            self.failed |= not config
        print(f"{mark} {part:<9} {self._scrub.redact(text)}")

    def warn(self, part: str, text: str) -> None:
        """Usable, but the operator should know (counts as neither ok nor failed)."""
        print(f"WARN {part:<9} {self._scrub.redact(text)}")

    def exit_code(self) -> int:
        """1 when a part fails (the report says which), else 3 when the configuration is
        wrong as for every other command, else 0."""
        if self.failed:
            return exit_codes.FAILURE
        return exit_codes.CONFIG if self.misconfigured else exit_codes.OK

    def secrets(self, secrets: list[str]) -> None:
        self._scrub = RedactingFormatter("%(message)s", secrets, journald=False,
                                         shapes=secret_shapes())


def _database(settings: Settings, argv: list[str]) -> tuple[bool, str]:
    try:
        statedir.refuse_foreign(settings.state_dir, argv)
        if settings.state_dir.is_dir():
            statedir.refuse_foreign_files(settings.state_dir, argv)
        return _database_file(settings)
    except statedir.StateDirError as exc:
        return False, str(exc)
    except OSError as exc:  # a state_dir this user cannot enter, say
        return False, (f"cannot look at {settings.db_path}: {exc.strerror or exc}; "
                       f"{statedir.fix(settings.state_dir, argv)}")


def _database_file(settings: Settings) -> tuple[bool, str]:
    path = settings.db_path
    latest = latest_version()
    for folder in (settings.state_dir, *settings.state_dir.parents):
        if folder.exists() and not folder.is_dir():
            return False, f"state_dir {settings.state_dir}: {folder} is a file, not a directory"
    if path.is_dir():
        return False, f"{path} is a directory, not a database"
    if not path.exists():
        parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), Path("/"))
        if os.access(parent, os.W_OK):
            return True, f"{path} will be created on first start"
        return False, f"{path} does not exist and {parent} is not writable"
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            row = db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return True, f"{path} will be initialised on first start"
        return False, f"cannot read {path}: {exc}{_read_only(path)}"
    except sqlite3.DatabaseError as exc:
        return False, f"{path} is not a picobridge database: {exc}"
    version = int(row[0])
    if version > latest:
        return False, (f"{path} is at schema {version}, newer than this picobridge ({latest}); "
                       "upgrade picobridge")
    if not os.access(path, os.W_OK):
        return False, f"{path} is not writable{_read_only(path)}"
    pending = latest - version
    return True, f"{path} schema {version}" + (f", {pending} migration(s) to apply on start"
                                                if pending else "")


def _read_only(path: Path) -> str:
    return f"; {statedir.READ_ONLY}" if statedir.read_only(path) else ""


def _workdir_problem(settings: Settings, agent: AgentSettings,
                     argv: list[str]) -> str | None:
    """Why the agent's working directory cannot be made, before blaming the agent for it."""
    try:
        statedir.refuse_foreign(settings.state_dir, argv)
        workdir(agent, settings.state_dir)
    except statedir.StateDirError:
        return "not started (see database)"
    except OSError as exc:
        where = agent.workdir or settings.state_dir / "workspace"
        return (f"cannot create its working directory {where}: {exc.strerror or exc}; "
                f"{statedir.fix(Path(where), argv)}")
    return None


def _listener(settings: Settings) -> tuple[bool, str]:
    """Bind http.listen and let go: what `run` will need. In use by the daemon of this
    state_dir is as it should be."""
    address = settings.http.listen
    assert address is not None
    try:
        listen.probe(address)
    except OSError as exc:
        running = holder(settings.state_dir) if exc.errno == errno.EADDRINUSE else None
        if running is not None:
            pid = f" (pid {running})" if running else ""
            return True, (f"{address} is in use, and a picobridge{pid} runs on this "
                          "state_dir: presumably it is serving it")
        return False, listen.why_not(address, exc)
    return True, f"{address} can be had"


def _commands(settings: Settings) -> list[tuple[str, list[str]]]:
    """Each agent worker's name and command, of every agent."""
    found: list[tuple[str, list[str]]] = []
    for name, agent in settings.named_agents().items():
        prefix = "" if name == DEFAULT_AGENT else f"{name}/"
        if agent.workers:
            found += [(prefix + (w.name or f"w{i}"), w.command)
                      for i, w in enumerate(agent.workers, 1)]
        else:
            found.append((prefix + "agent", agent.command))
    return found


async def _agents(report: _Report, settings: Settings, argv: list[str]) -> None:
    """Start every worker's command of every agent once (concurrently: each may take
    ready_timeout)."""
    agents = settings.named_agents()
    several = len(agents) > 1
    probes = []
    for agent_name, agent in agents.items():
        prefix = f"agent {agent_name}" if several else "agent"
        problem = _workdir_problem(settings, agent, argv)
        if problem is not None:
            report.line(prefix, None if problem.startswith("not started") else False, problem)
            continue
        driver = driver_class(agent.protocol)
        if agent.workers:
            for i, w in enumerate(agent.workers, 1):
                probes.append((f"{prefix} {w.name or f'w{i}'}", w.command, agent, driver))
        else:
            probes.append((prefix, agent.command, agent, driver))
    results = await asyncio.gather(
        *(probe_agent(command, agent, driver, settings.state_dir, label.removeprefix("agent "))
          for label, command, agent, driver in probes), return_exceptions=True)
    for (label, command, _, _), result in zip(probes, results, strict=True):
        if isinstance(result, str):
            report.line(label, True, result)
            continue
        text = (str(result) if isinstance(result, RuntimeError)
                else f"{result.__class__.__name__}: {result}")
        hint = missing_agent(command)
        report.line(label, False, text + (f"; {hint}" if hint else ""))


def check_command(invocation: Invocation) -> int:
    return asyncio.run(run_check(invocation))


def _routes(report: _Report, settings: Settings) -> None:
    """Every route names a defined agent (the config model refuses others); say which can
    never match because an earlier one takes all their chats."""
    from picobridge.cli.routing import build_routing

    if not settings.routes:
        return
    dead = shadowed(build_routing(settings, {}).routes)
    for later, earlier in dead:
        report.line("routes", False, f"routes[{later}] (agent {settings.routes[later].agent}) "
                    f"can never match: routes[{earlier}] before it takes all its chats")
    if not dead:
        report.line("routes", True, f"{len(settings.routes)} route(s), the rest to agent "
                    f"{settings.bridge.default_agent}")


async def run_check(invocation: Invocation) -> int:
    report = _Report([])
    try:
        settings = invocation.settings()
    except CliError as exc:
        report.line("config", False, str(exc).removeprefix("config error: "))
        return exc.code
    report.secrets(settings.secrets())
    path = invocation.args.config or default_config_path(os.environ)
    report.line("config", True, str(path or "defaults and environment"))
    found = exposure(path, settings.secrets(), [command for _, command in _commands(settings)])
    for warning in found.warnings:
        report.warn("config", warning)
    for refusal in found.refusals:
        report.line("config", False, f"run would refuse to start: {refusal}", config=True)
    ok, text = _database(settings, invocation.argv)
    report.line("database", ok, text)
    if settings.http.listen is not None:
        report.line("http", *_listener(settings))
    _routes(report, settings)
    await _agents(report, settings, invocation.argv)

    from picobridge.adapters.registry import bots, enabled_platforms

    enabled = enabled_platforms(settings)
    for name, (platform, section) in bots(settings).items():
        if name not in enabled:
            report.line(name, None, "disabled")
            continue
        try:
            report.line(name, True,
                        await platform.bot_adapter(settings, name, section).verify())
        except Exception as exc:  # any failure here is a finding, not a crash
            report.line(name, False, f"{exc.__class__.__name__}: {exc}")
    if not enabled:
        report.line("platforms", False, no_platform(settings), config=True)
    sys.stdout.flush()
    return report.exit_code()
