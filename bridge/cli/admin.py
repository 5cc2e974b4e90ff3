"""`picobridge sessions ...` and `picobridge access ...`: the operator's look at chats and
users. Listing and showing only read (no database is created or migrated for them); reset,
allow and deny write one row beside a running daemon, which picks the change up at once."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from picobridge import exit_codes
from picobridge.cli.common import (
    open_existing_store,
    open_store_for_writing,
    read_existing,
    when,
)
from picobridge.cli.errors import CliError

if TYPE_CHECKING:
    from picobridge.cli.invocation import Invocation
    from picobridge.config.settings import Settings
    from picobridge.store import ChatInfo


def sessions_command(invocation: Invocation) -> int:
    settings, args = invocation.settings(), invocation.args
    if args.action == "list":
        # One query, read with sqlite3 alone: no event loop, no aiosqlite, no store.
        found = read_existing(settings, invocation.argv,
                              lambda path, busy_timeout: _chats(path, busy_timeout, args.platform))
        if found is None:
            print(f"no chats yet (no database at {settings.db_path})")
            return exit_codes.OK
        return _list_sessions(found, args.platform)
    return asyncio.run(sessions(settings, args, invocation.argv))


def access_command(invocation: Invocation) -> int:
    settings, args = invocation.settings(), invocation.args
    if args.action == "list":
        # One query, read with sqlite3 alone: no event loop, no aiosqlite, no store.
        return _list_access(settings, read_existing(settings, invocation.argv, _grants) or [])
    return asyncio.run(access(settings, args, invocation.argv))


async def sessions(settings: Settings, args: argparse.Namespace, argv: Sequence[str]) -> int:
    """`sessions show` and `sessions reset`."""
    if args.action == "reset":
        store = await open_store_for_writing(settings, argv)
    else:
        found = await open_existing_store(settings, argv)
        if found is None:
            raise CliError(f"no chat or session {args.chat!r}: there is no database at "
                           f"{settings.db_path} yet", exit_codes.FAILURE)
        store = found
    try:
        chat = await store.find_chat(args.chat)
        if chat is None:
            raise CliError(f"no chat or session {args.chat!r}; see `picobridge sessions list`",
                           exit_codes.FAILURE)
        if args.action == "reset":
            session = await store.new_session(chat)
            print(f"{chat.key}: new session {session}")
            return exit_codes.OK
        current = await store.current_session(chat)
        agents = await store.session_agents(chat)
        print(f"chat {chat.key}")
        for session, started, ended in await store.session_history(chat):
            # A chat keeps a current session with each agent it talked to: /agent resumes it.
            marker = (" (current)" if session == current
                      else " (kept for its agent)" if ended is None else "")
            print(f"  {session}{marker}\tagent {agents.get(session, '?')}\tstarted "
                  f"{when(started)}\tended {when(ended)}")
        return exit_codes.OK
    finally:
        await store.close()


def _chats(path: Path, busy_timeout: float, platform: str | None) -> list[ChatInfo]:
    from picobridge.store.reading import chats

    return chats(path, busy_timeout, platform)


def _list_sessions(chats: list[ChatInfo], platform: str | None) -> int:
    if not chats:
        print("no chats yet" + (f" on {platform}" if platform else ""))
    for info in chats:
        print(f"{info.chat.key}\t{info.session_id}\tagent {info.agent}\tlast active "
              f"{when(info.updated_at)}\t{info.open_messages} waiting")
    return exit_codes.OK


def parse_user(settings: Settings, value: str) -> tuple[str, str]:
    """`telegram:123`, or `telegram@work:123` for the bot named "work"."""
    from picobridge.adapters.registry import bots

    name, sep, user = value.partition(":")
    known = bots(settings)
    platform = known[name][0] if name in known else None
    if not sep or not user or platform is None:
        raise CliError(f"expected platform:user_id with platform one of "
                       f"{', '.join(known)}, got {value!r}", exit_codes.USAGE)
    problem = platform.user_id_problem(user)
    if problem is not None:
        raise CliError(f"{problem}, got {user!r}", exit_codes.USAGE)
    return name, user


async def access(settings: Settings, args: argparse.Namespace, argv: Sequence[str]) -> int:
    """`access allow` and `access deny`."""
    platform, user = parse_user(settings, args.user)
    store = await open_store_for_writing(settings, argv)
    held = 0
    try:
        await store.set_access(platform, user, args.action == "allow")
        if args.action == "deny":
            from picobridge.store.queued import DENIED

            # What is queued from them is not sent either (a running daemon takes it out of
            # its queue too: core/revocation.py).
            held = await store.hold_back(platform, user, DENIED)
    finally:
        await store.close()
    verb = "allowed" if args.action == "allow" else "denied"
    queued = f"; {held} queued message(s) of theirs will not reach the agent" if held else ""
    print(f"{platform}:{user} {verb} (takes effect now, no restart needed){queued}")
    return exit_codes.OK


def _grants(path: Path, busy_timeout: float) -> list[tuple[str, str, bool, float]]:
    from picobridge.store.reading import access_grants

    return access_grants(path, busy_timeout)


def _list_access(settings: Settings, grants: list[tuple[str, str, bool, float]]) -> int:
    from picobridge.adapters.registry import allow_lists

    decided = {(platform, user) for platform, user, _, _ in grants}
    configured = {(platform, user) for platform, users in allow_lists(settings).items()
                  for user in users}
    lines = [f"{platform}:{user}\tallowed\t(config)"
             for platform, user in sorted(configured - decided)]
    for platform, user, allowed, changed in grants:
        overrides = ", over the config" if not allowed and (platform, user) in configured else ""
        state, verb = ("allowed", "granted") if allowed else ("denied", "denied")
        lines.append(f"{platform}:{user}\t{state}\t({verb} {when(changed)}{overrides})")
    if not lines:
        names = list(settings.platforms)
        print("nobody is allowed yet: list user ids in "
              + " or ".join(f"{n}.allowed_users" for n in names)
              + f", or run `picobridge access allow {names[0]}:<user id>`")
    for line in lines:
        print(line)
    return exit_codes.OK
