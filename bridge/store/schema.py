"""Numbered SQL migrations (migrations/NNNN_name.sql, shipped in the wheel), applied in order,
each in its own transaction, with the applied versions recorded in the database."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from importlib import resources

import aiosqlite

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class SchemaError(Exception):
    """The database cannot be used by this version of picobridge."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("picobridge.migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise SchemaError(f"migrations are not numbered 1..n without gaps: {versions}")
    return found


async def applied_version(db: aiosqlite.Connection) -> int:
    await db.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    async with db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def migrate(db: aiosqlite.Connection) -> list[Migration]:
    """Bring the schema up to date; returns the migrations applied now.

    Refuses a database written by a newer picobridge: running old code on it could corrupt
    state the newer code depends on.
    """
    migrations = available_migrations()
    current = await applied_version(db)
    latest = migrations[-1].version if migrations else 0
    if current > latest:
        raise SchemaError(
            f"the database is at schema version {current}, newer than this picobridge "
            f"knows ({latest}); upgrade picobridge or restore a matching backup"
        )
    applied = []
    for migration in migrations[current:]:
        try:
            await db.execute("BEGIN IMMEDIATE")
            # executescript would commit on its own; run statement by statement instead so the
            # migration and its version row share one transaction.
            for statement in _statements(migration.sql):
                await db.execute(statement)
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
        applied.append(migration)
    return applied


def _statements(sql: str) -> list[str]:
    """Split a migration into statements with sqlite's own completeness check."""
    import sqlite3

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
