"""What the command line's modules share: opening the store, times (and, for the modules
that always found it here, the one-line error).

The store (aiosqlite, the table groups, the contract's message types) is imported only when a
database is opened: a listing with no database yet never needs it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from picobridge import exit_codes
from picobridge.cli import statedir
from picobridge.cli.errors import CliError as CliError  # where commands found it before

if TYPE_CHECKING:
    from picobridge.config.settings import Settings
    from picobridge.store import Store


async def open_store(settings: Settings, *, migrate: bool = True) -> Store:
    from picobridge.store import Store, StoreError
    from picobridge.store.schema import SchemaError

    try:
        return await Store.open(settings.db_path, migrate_schema=migrate,
                                busy_timeout=settings.store.busy_timeout)
    except (StoreError, SchemaError) as exc:
        hint = f"; {statedir.READ_ONLY}" if statedir.read_only(settings.db_path) else ""
        raise CliError(f"database error: {exc}{hint}", exit_codes.DATABASE) from None


async def open_existing_store(settings: Settings, argv: Sequence[str]) -> Store | None:
    """The store for a command that only reads: None when there is no database yet (it is
    neither created nor migrated here)."""
    if not statedir.prepare(settings.state_dir, argv, create=False):
        return None
    try:
        if not settings.db_path.exists():
            return None
    except OSError as exc:
        raise statedir.problem(settings.state_dir, exc, argv) from None
    return await open_store(settings, migrate=False)


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
