"""The `picobridge` command line. Operator mistakes get one clear line and a distinct exit code
(bridge/exit_codes.py), never a traceback."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from picobridge import __version__, exit_codes
from picobridge.cli.instance import InstanceLock, InstanceLocked
from picobridge.cli.wiring import StartupError
from picobridge.config.settings import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from picobridge.agent.pool import WorkerPool
from picobridge.ops.logs import setup_logging
from picobridge.store import Store, StoreError
from picobridge.store.schema import SchemaError


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="picobridge",
        description="Put a picobot agent behind Telegram and Slack.",
    )
    parser.add_argument("--version", action="version", version=f"picobridge {__version__}")
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", type=Path, metavar="PATH",
                        help="TOML config (default: $PICOBRIDGE_CONFIG, else "
                             "/etc/picobridge/config.toml when present)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    sub.add_parser("run", parents=[config], help="run the daemon in the foreground")
    sub.add_parser("chat", parents=[config],
                   help="chat with the agent on this console through the same bridge")
    sub.add_parser("check", parents=[config],
                   help="validate config, database, agent and platform credentials")
    sub.add_parser("migrate", parents=[config], help="create or upgrade the database")
    health = sub.add_parser("health", parents=[config],
                            help="query the running daemon's /healthz (exit 0 when healthy)")
    health.add_argument("--url", help="health URL (default: from http.listen)")

    sessions = sub.add_parser("sessions", help="list, show or reset chat sessions")
    ssub = sessions.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True
    listing = ssub.add_parser("list", parents=[config], help="chats and their current session")
    listing.add_argument("--platform")
    for action, text in (("show", "one chat's sessions"), ("reset", "start a new session")):
        p = ssub.add_parser(action, parents=[config], help=text)
        p.add_argument("chat", help="chat key (e.g. telegram:12345) or session id")

    access = sub.add_parser("access", help="list, allow or deny users")
    asub = access.add_subparsers(dest="action", metavar="ACTION")
    asub.required = True
    asub.add_parser("list", parents=[config], help="allowed users from config and grants")
    for action in ("allow", "deny"):
        p = asub.add_parser(action, parents=[config], help=f"{action} a user")
        p.add_argument("user", help="platform:user_id, e.g. telegram:12345 or slack:U0123ABCD")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except (CliError, StartupError) as exc:
        print(f"picobridge: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `picobridge sessions list | head`: the reader left early, which is not an error.
        # Point stdout at /dev/null so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exit_codes.OK


def _settings(args: argparse.Namespace) -> Settings:
    try:
        return load_settings(getattr(args, "config", None))
    except ConfigError as exc:
        raise CliError(f"config error: {exc}", exit_codes.CONFIG) from None


async def _open_store(settings: Settings, *, migrate: bool = True) -> Store:
    try:
        return await Store.open(settings.db_path, migrate_schema=migrate)
    except (StoreError, SchemaError) as exc:
        raise CliError(f"database error: {exc}", exit_codes.DATABASE) from None


@asynccontextmanager
async def _exclusive_store(settings: Settings, command: str) -> AsyncIterator[Store]:
    """The store, with this process the only picobridge using the state directory."""
    lock = InstanceLock(settings.state_dir)
    try:
        settings.state_dir.mkdir(parents=True, exist_ok=True)
        lock.acquire(command)
    except InstanceLocked as exc:
        raise CliError(str(exc), exit_codes.DATABASE) from None
    except FileExistsError:
        raise CliError(f"database error: state_dir {settings.state_dir} is a file, not a "
                       "directory", exit_codes.DATABASE) from None
    except OSError as exc:
        raise CliError(f"database error: cannot use state_dir {settings.state_dir}: "
                       f"{exc.strerror or exc}", exit_codes.DATABASE) from None
    try:
        store = await _open_store(settings)
        try:
            yield store
        finally:
            await store.close()
    finally:
        lock.release()


def _dispatch(args: argparse.Namespace) -> int:
    command = args.command
    if command == "check":
        from picobridge.cli.check import run_check

        return asyncio.run(run_check(getattr(args, "config", None)))
    settings = _settings(args)
    if command == "run":
        setup_logging(settings.log.level, settings.secrets())
        return asyncio.run(_run(settings))
    if command == "chat":
        # The console is for the conversation; only problems go to stderr.
        setup_logging("WARNING" if settings.log.level != "DEBUG" else "DEBUG", settings.secrets())
        return asyncio.run(_chat(settings))
    if command == "migrate":
        return asyncio.run(_migrate(settings))
    if command == "health":
        from picobridge.cli.health_client import query_health

        return query_health(settings, args.url)
    if command == "sessions":
        return asyncio.run(_sessions(settings, args))
    if command == "access":
        return asyncio.run(_access(settings, args))
    raise CliError(f"unknown command {command}", exit_codes.USAGE)


async def _run(settings: Settings) -> int:
    from picobridge.adapters.registry import build_adapters
    from picobridge.cli import wiring as daemon

    adapters = build_adapters(settings)
    if not adapters:
        raise CliError("config error: no platform is enabled; " + _enable_hint(settings)
                       + " (or try `picobridge chat`)", exit_codes.CONFIG)
    async with _exclusive_store(settings, "run") as store:
        return await daemon.run(settings, store, adapters)


async def _chat(settings: Settings) -> int:
    from picobridge.adapters.console.adapter import CONSOLE_CHAT, ConsoleAdapter
    from picobridge.cli import wiring as daemon

    console = ConsoleAdapter(sys.stdin.buffer, sys.stdout, sys.stderr,
                             interactive=sys.stdin.isatty())
    async def finished(assembled: daemon.Daemon) -> None:
        await _agent_up(assembled.pool)
        console.may_read.set()
        await console.input_done.wait()
        await daemon.wait_until_settled(assembled, CONSOLE_CHAT.key, console.reply_printed)

    async with _exclusive_store(settings, "chat") as store:
        return await daemon.run(settings, store, [console], finished=finished)


async def _agent_up(pool: WorkerPool) -> None:
    """Wait for some worker's first ready; give up when every worker failed a few starts in
    a row (or its command does not exist)."""
    while not pool.first_ready:
        hopeless = [w for w in pool.workers if w.start_failures >= 3
                    or (w.last_error or "").startswith("agent command")]
        if len(hopeless) == len(pool.workers):
            raise CliError(f"the agent cannot start: {hopeless[0].last_error}", exit_codes.AGENT)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.2):
                await pool.workers[0].first_ready.wait()


async def _migrate(settings: Settings) -> int:
    async with _exclusive_store(settings, "migrate") as store:
        version = await store.schema_version()
    print(f"database {settings.db_path} is at schema version {version}")
    return exit_codes.OK


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


async def _sessions(settings: Settings, args: argparse.Namespace) -> int:
    store = await _open_store(settings)
    try:
        if args.action == "list":
            chats = await store.chats(args.platform)
            if not chats:
                print("no chats yet")
            for info in chats:
                print(f"{info.chat.key}\t{info.session_id}\tlast active {_when(info.updated_at)}"
                      f"\t{info.open_messages} waiting")
            return exit_codes.OK
        chat = await store.find_chat(args.chat)
        if chat is None:
            raise CliError(f"no chat or session {args.chat!r}; see `picobridge sessions list`",
                           exit_codes.FAILURE)
        if args.action == "reset":
            session = await store.new_session(chat)
            print(f"{chat.key}: new session {session}")
            return exit_codes.OK
        current = await store.current_session(chat)
        print(f"chat {chat.key}")
        for session, started, ended in await store.session_history(chat):
            marker = " (current)" if session == current else ""
            print(f"  {session}{marker}\tstarted {_when(started)}\tended {_when(ended)}")
        return exit_codes.OK
    finally:
        await store.close()


def _enable_hint(settings: Settings) -> str:
    return "set " + " or ".join(p.enable_hint for p in settings.platforms.values())


def _parse_user(settings: Settings, value: str) -> tuple[str, str]:
    name, sep, user = value.partition(":")
    platform = settings.platforms.get(name)
    if not sep or not user or platform is None:
        raise CliError(f"expected platform:user_id with platform one of "
                       f"{', '.join(settings.platforms)}, got {value!r}", exit_codes.USAGE)
    problem = platform.user_id_problem(user)
    if problem is not None:
        raise CliError(f"{problem}, got {user!r}", exit_codes.USAGE)
    return name, user


async def _access(settings: Settings, args: argparse.Namespace) -> int:
    from picobridge.adapters.registry import allow_lists

    if args.action in ("allow", "deny"):
        platform, user = _parse_user(settings, args.user)
    store = await _open_store(settings)
    try:
        if args.action == "list":
            for platform, users in allow_lists(settings).items():
                for user in sorted(users):
                    print(f"{platform}:{user}\tallowed\t(config)")
            for platform, user, allowed, changed in await store.access_grants():
                state = "allowed" if allowed else "denied"
                print(f"{platform}:{user}\t{state}\t(granted {_when(changed)})")
            return exit_codes.OK
        await store.set_access(platform, user, args.action == "allow")
        verb = "allowed" if args.action == "allow" else "denied"
        print(f"{platform}:{user} {verb} (takes effect now, no restart needed)")
        return exit_codes.OK
    finally:
        await store.close()
