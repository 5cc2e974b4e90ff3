"""Numbered migrations, applied in order, each in its own transaction, with the applied
versions recorded in the database.

A migration is a file `NNNN_name.sql` or `NNNN_name.py` in the migrations source: by default
the package picobridge.migrations (the folder migrations/, shipped in the wheel), or any
folder handed to `available_migrations` / `migrate` (tests use temporary ones). The numbers of
both kinds together are unique and ascending; they may leave gaps (numbers are handed out to
changes made side by side, which land in any order), and a database gets every migration it
has not had yet, in ascending order, also one numbered below a version it already has.

An SQL migration runs statement by statement. A Python migration is for a data step SQL cannot
express; it defines

    async def migrate(db: aiosqlite.Connection) -> None

which runs inside the migration's transaction, before its version is recorded: it must not
commit or roll back, nor call executescript (which commits first). A migration that ends the
transaction is refused, as is one that raises; its version is then not recorded.

How a Python migration is loaded: `NNNN_name.py` cannot be imported by name (a module name
cannot start with a digit), but keeping the SQL files' pattern keeps both kinds in one sorted
listing. So the runner reads the file from the package's folder (through importlib.resources
from a zipped install), compiles it and executes it in a fresh module, named
picobridge.migrations.NNNN_name so that its logger (`logging.getLogger(__name__)`) sits under
picobridge's, and not entered in sys.modules. It is loaded only when it is applied, and no
bytecode is cached: it runs once per database, and a stale cache of an edited file could run
the old code. It still ships and is checked: setuptools puts every .py file of a listed package
in the wheel (and in the strict editable tree, after a reinstall), and mypy checks it as a
module of picobridge.migrations. A migration must keep doing the same thing as the code around it
changes, so it should not import picobridge's own modules.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sqlite3
import time
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    # Annotations only: the command line's sqlite3 reads (store/reading.py) check the
    # schema with this module and no aiosqlite.
    import aiosqlite

PACKAGE = "picobridge.migrations"

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.(sql|py)$")

Step = Callable[["aiosqlite.Connection"], Awaitable[None]]

# The applied versions, in the database itself.
VERSIONS_TABLE = ("CREATE TABLE IF NOT EXISTS schema_migrations ("
                  " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)")
APPLIED_VERSIONS = "SELECT version FROM schema_migrations"


class SchemaError(Exception):
    """The database cannot be used by this version of picobridge."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    file: Traversable

    @property
    def is_python(self) -> bool:
        return self.file.name.endswith(".py")

    async def run(self, db: aiosqlite.Connection) -> None:
        """The migration's own statements, inside the transaction the runner opened."""
        if self.is_python:
            await _python_step(self)(db)
            return
        # executescript would commit on its own; run statement by statement instead so the
        # migration and its version row share one transaction.
        for statement in _statements(self.file.read_text(encoding="utf-8")):
            await db.execute(statement)


def shipped_migrations() -> Traversable:
    """The migrations package's folder. Installed as files (a wheel, a checkout) it is read
    as the folder it is, as importlib.resources would give it: importlib.resources' reader
    imports zipfile (about 0.4 MB resident, kept by the daemon for this one listing at its
    start). A zipped install is read through importlib.resources."""
    origin = importlib.import_module(PACKAGE).__file__
    folder = Path(origin).parent if origin else None
    if folder is not None and folder.is_dir():
        return folder
    from importlib import resources

    return resources.files(PACKAGE)


def available_migrations(source: Traversable | None = None) -> list[Migration]:
    root = shipped_migrations() if source is None else source
    found = []
    for entry in root.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions) or (versions and versions[0] != 1):
        raise SchemaError(f"migrations must be numbered from 1, each number once: {versions}")
    return found


def latest_version(migrations: list[Migration] | None = None) -> int:
    """The schema version this picobridge brings a database to (its highest migration)."""
    found = available_migrations() if migrations is None else migrations
    return found[-1].version if found else 0


async def applied_versions(db: aiosqlite.Connection) -> set[int]:
    await db.execute(VERSIONS_TABLE)
    async with db.execute(APPLIED_VERSIONS) as cur:
        return {int(row[0]) for row in await cur.fetchall()}


def require_current(applied: set[int]) -> None:
    """Refuse a database that lacks a migration of this picobridge or has a newer one (for
    a command that does not migrate)."""
    found = available_migrations()
    version, latest = max(applied, default=0), latest_version(found)
    if version != latest or any(m.version not in applied for m in found):
        raise SchemaError(f"database schema is at version {version}, this picobridge needs "
                          f"{latest}; run `picobridge migrate`")


async def applied_version(db: aiosqlite.Connection) -> int:
    """The database's schema version: the highest migration it has had."""
    return max(await applied_versions(db), default=0)


async def missing_migrations(db: aiosqlite.Connection,
                             migrations: list[Migration] | None = None) -> list[Migration]:
    """The migrations the database has not had yet, in the order they are applied."""
    found = available_migrations() if migrations is None else migrations
    applied = await applied_versions(db)
    return [m for m in found if m.version not in applied]


async def migrate(db: aiosqlite.Connection, source: Traversable | None = None) -> list[Migration]:
    """Bring the schema up to date; returns the migrations applied now.

    Refuses a database written by a newer picobridge: running old code on it could corrupt
    state the newer code depends on.
    """
    migrations = available_migrations(source)
    current = await applied_version(db)
    latest = latest_version(migrations)
    if current > latest:
        raise SchemaError(
            f"the database is at schema version {current}, newer than this picobridge "
            f"knows ({latest}); upgrade picobridge or restore a matching backup"
        )
    applied = []
    for migration in await missing_migrations(db, migrations):
        await _apply(db, migration)
        applied.append(migration)
    return applied


async def _apply(db: aiosqlite.Connection, migration: Migration) -> None:
    try:
        await db.execute("BEGIN IMMEDIATE")
        await migration.run(db)
        if not db.in_transaction:
            # Recording the version now would mark a half-done migration as done.
            raise SchemaError("it ended its transaction itself (commit, rollback or "
                              "executescript); what it did before that may be committed")
        await db.execute(
            "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, time.time()),
        )
        await db.commit()
    except Exception as exc:
        await db.rollback()
        raise SchemaError(
            f"migration {migration.version:04d}_{migration.name} failed: {exc}"
        ) from exc


def _python_step(migration: Migration) -> Step:
    module = types.ModuleType(f"{PACKAGE}.{migration.file.name.removesuffix('.py')}")
    module.__file__ = str(migration.file)  # for tracebacks
    source = migration.file.read_text(encoding="utf-8")
    # dont_inherit: this module's `from __future__` imports are not the migration's.
    exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)
    step = getattr(module, "migrate", None)
    if not inspect.iscoroutinefunction(step):
        raise SchemaError(f"{migration.file.name} defines no `async def migrate(db)`")
    return cast(Step, step)


def _statements(sql: str) -> list[str]:
    """Split a migration into statements with sqlite's own completeness check."""
    statements, buffer = [], ""
    for line in sql.splitlines(keepends=True):
        if not buffer and line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
