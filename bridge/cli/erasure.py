"""`picobridge forget USER` and `picobridge export USER PATH`: what the bridge holds about one
user (their messages and the replies to them, the chats only they wrote in with their sessions,
their access grant, the media they sent, and the agent's session files picobridge keeps for
prime-rpc), removed or written out. Safe beside a running daemon. What they cannot reach: the
agent's own memory and the platform's copy (docs/operations.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from picobridge import exit_codes
from picobridge.cli.admin import parse_user
from picobridge.cli.common import open_existing_store
from picobridge.cli.errors import CliError

if TYPE_CHECKING:
    from picobridge.cli.invocation import Invocation
    from picobridge.config.settings import Settings


def forget_command(invocation: Invocation) -> int:
    return asyncio.run(forget(invocation.settings(), invocation.args, invocation.argv))


def export_command(invocation: Invocation) -> int:
    return asyncio.run(export(invocation.settings(), invocation.args, invocation.argv))


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def media_files(settings: Settings, paths: Iterable[str]) -> list[Path]:
    """The downloaded files that exist, only under state_dir (a path in the database is not
    trusted to point anywhere else)."""
    return [p for p in map(Path, dict.fromkeys(paths))
            if _inside(p, settings.state_dir) and p.is_file()]


def session_files(settings: Settings, sessions: Sequence[str]) -> list[Path]:
    """The prime-rpc session files picobridge keeps for these sessions (every agent's
    sessions directory), and the copies it set aside."""
    folders = {settings.state_dir / "agent-sessions"}
    for agent in settings.named_agents().values():
        if agent.sessions_dir is not None:
            folders.add(agent.sessions_dir)
    found = []
    for folder in folders:
        for session in sessions:
            found += [p for p in folder.glob(f"{session}.*") if p.is_file()]
    return found


async def forget(settings: Settings, args: argparse.Namespace, argv: Sequence[str]) -> int:
    platform, user = parse_user(settings, args.user)
    store = await open_existing_store(settings, argv)
    if store is None:
        print(f"nothing held about {platform}:{user} (no database yet)")
        return exit_codes.OK
    try:
        found = await store.forget_user(platform, user, keep_access=args.keep_access)
    finally:
        await store.close()
    files = media_files(settings, found.files) + session_files(settings, found.sessions)
    removed = 0
    for path in files:
        try:
            path.unlink()
            removed += 1
        except OSError as exc:
            print(f"could not remove {path}: {exc.strerror}")
    print(f"forgot {platform}:{user}: {len(found.messages)} message(s), "
          f"{len(found.replies)} reply(ies), {len(found.chats)} chat(s) with "
          f"{len(found.sessions)} session(s), {removed} file(s)"
          + (f", {found.grants} access grant" if found.grants else "")
          + (", access kept" if args.keep_access else ""))
    for path in files:
        print(f"  removed {path}")
    print("not removed: what the agent itself remembers (its own memory and files), and the "
          "platform's copy of the conversation")
    return exit_codes.OK


async def export(settings: Settings, args: argparse.Namespace, argv: Sequence[str]) -> int:
    platform, user = parse_user(settings, args.user)
    target: Path = args.path
    _check_target(target)
    store = await open_existing_store(settings, argv)
    if store is None:
        raise CliError(f"nothing held about {platform}:{user} (no database yet)",
                       exit_codes.FAILURE)
    try:
        data = await store.user_export(platform, user)
        found = await store.user_footprint(platform, user)
    finally:
        await store.close()
    copied = _write(target, data, media_files(settings, found.files)
                    + session_files(settings, found.sessions))
    print(f"exported {platform}:{user} to {target}: {len(data['messages'])} message(s), "
          f"{len(data['replies'])} reply(ies), {len(data['chats'])} chat(s), "
          f"{copied} file(s)")
    return exit_codes.OK


def _check_target(target: Path) -> None:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CliError(f"{target} exists and is not an empty directory", exit_codes.USAGE)


def _write(target: Path, data: dict[str, object], files: list[Path]) -> int:
    """export.json and the files under media/, readable by the operator only."""
    media = target / "media"
    media.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(target, 0o700)
    copied = []
    for path in files:
        shutil.copy2(path, media / path.name)
        copied.append({"from": str(path), "file": f"media/{path.name}"})
    data["files"] = copied
    (target / "export.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
    return len(copied)
