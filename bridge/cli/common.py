"""What the command line's modules share: opening the store, times (and, for the modules
that always found it here, the one-line error).

The store (aiosqlite, the table groups, the contract's message types) is imported only when a
database is opened: a listing with no database yet never needs it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from picobridge import exit_codes
from picobridge.cli import statedir
from picobridge.cli.errors import CliError as CliError  # where commands found it before

if TYPE_CHECKING:
    from picobridge.config.settings import Settings
    from picobridge.store import Store

Read = TypeVar("Read")


async def open_store(settings: Settings, *, migrate: bool = True) -> Store:
    from picobridge.store import Store, StoreError
    from picobridge.store.schema import SchemaError

    try:
        return await Store.open(settings.db_path, migrate_schema=migrate,
                                busy_timeout=settings.store.busy_timeout)
    except (StoreError, SchemaError) as exc:
        raise _database_error(settings, exc) from None


def _database_error(settings: Settings, exc: Exception) -> CliError:
    hint = f"; {statedir.READ_ONLY}" if statedir.read_only(settings.db_path) else ""
    return CliError(f"database error: {exc}{hint}", exit_codes.DATABASE)


def _database_exists(settings: Settings, argv: Sequence[str]) -> bool:
    """For a command that only reads: whether there is a database (none is created here)."""
    if not statedir.prepare(settings.state_dir, argv, create=False):
        return False
    try:
        return settings.db_path.exists()
    except OSError as exc:
        raise statedir.problem(settings.state_dir, exc, argv) from None


async def open_existing_store(settings: Settings, argv: Sequence[str]) -> Store | None:
    """The store for a command that only reads: None when there is no database yet (it is
    neither created nor migrated here)."""
    if not _database_exists(settings, argv):
        return None
    return await open_store(settings, migrate=False)


def read_existing(settings: Settings, argv: Sequence[str],
                  read: Callable[[Path, float], Read]) -> Read | None:
    """`read(db_path, busy_timeout)`, one of store/reading.py's reads with sqlite3 alone, for
    a command that only reads: None when there is no database yet. The database is refused
    as `open_existing_store` refuses it."""
    if not _database_exists(settings, argv):
        return None
    from picobridge.store.reading import StoreError
    from picobridge.store.schema import SchemaError

    try:
        return read(settings.db_path, settings.store.busy_timeout)
    except (StoreError, SchemaError) as exc:
        raise _database_error(settings, exc) from None


async def open_store_for_writing(settings: Settings, argv: Sequence[str],
                                 announce: bool = False) -> Store:
    """The store for a command that writes: the state_dir and database made when missing."""
    statedir.prepare(settings.state_dir, argv, create=True, announce=announce)
    return await open_store(settings)


def no_platform(settings: Settings) -> str:
    """Why no platform runs: switched off on purpose, or never given its token."""
    off = [name for name, platform in settings.named_platforms.items()
           if platform.switched_off(settings.section(name))]
    unset = [platform.enable_hint for name, platform in settings.platforms.items()
             if name not in off]
    if not off:
        return "no platform is enabled; set " + " or ".join(unset)
    said = " and ".join(f"{name}.enabled = false" for name in off)
    return (f"no platform is enabled: {said}; set enabled = true (or remove the line) where "
            "you want one" + (", or set " + " or ".join(unset) if unset else ""))


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
