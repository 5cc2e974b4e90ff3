"""The migration runner: SQL and Python migrations in one numbered sequence, each in its own
transaction. Each test hands the runner a temporary migrations folder."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from picobridge.store.schema import SchemaError, applied_version, available_migrations, migrate


def write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[aiosqlite.Connection]:
    # As the store opens it: autocommit, so the runner's BEGIN is the only transaction.
    conn = await aiosqlite.connect(tmp_path / "t.db", isolation_level=None)
    yield conn
    await conn.close()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    folder.mkdir()
    write(folder, "0001_people.sql", """
        -- a comment line before the first statement
        CREATE TABLE people (name TEXT NOT NULL);
        INSERT INTO people VALUES ('ada'), ('alan');
    """)
    return folder


async def rows(db: aiosqlite.Connection, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in await db.execute_fetchall(sql)]


async def test_python_migration_runs_in_order_with_sql_ones(
    db: aiosqlite.Connection, source: Path,
) -> None:
    write(source, "0002_shout.py", """
        import aiosqlite

        async def migrate(db: aiosqlite.Connection) -> None:
            # A data step: what SQL has no function for.
            for (name,) in await db.execute_fetchall("SELECT name FROM people"):
                await db.execute("UPDATE people SET name = ? WHERE name = ?",
                                 (name.swapcase()[::-1], name))
    """)
    write(source, "0003_nick.sql", """
        ALTER TABLE people ADD COLUMN nick TEXT;
        UPDATE people SET nick = lower(name);
    """)
    applied = await migrate(db, source)
    assert [(m.version, m.name, m.is_python) for m in applied] == [
        (1, "people", False), (2, "shout", True), (3, "nick", False)]
    assert await rows(db, "SELECT name, nick FROM people ORDER BY name") == [
        ("ADA", "ada"), ("NALA", "nala")]
    assert await rows(db, "SELECT version, name FROM schema_migrations ORDER BY version") == [
        (1, "people"), (2, "shout"), (3, "nick")]
    assert await migrate(db, source) == []  # nothing is applied twice


async def test_a_failing_python_migration_is_rolled_back_and_not_recorded(
    db: aiosqlite.Connection, source: Path,
) -> None:
    write(source, "0002_half.py", """
        async def migrate(db):
            await db.execute("INSERT INTO people VALUES ('grace')")
            raise ValueError("bad data")
    """)
    write(source, "0003_later.sql", "CREATE TABLE later (x);")
    with pytest.raises(SchemaError, match=r"migration 0002_half failed: bad data"):
        await migrate(db, source)
    assert await applied_version(db) == 1
    assert await rows(db, "SELECT name FROM people ORDER BY name") == [("ada",), ("alan",)]
    assert not await rows(db, "SELECT name FROM sqlite_master WHERE name = 'later'")
    assert not db.in_transaction
    # Once fixed, the next run picks up where the last one stopped.
    write(source, "0002_half.py", """
        async def migrate(db):
            await db.execute("INSERT INTO people VALUES ('grace')")
    """)
    assert [m.version for m in await migrate(db, source)] == [2, 3]
    assert ("grace",) in await rows(db, "SELECT name FROM people")


async def test_a_python_migration_may_not_end_its_transaction(
    db: aiosqlite.Connection, source: Path,
) -> None:
    write(source, "0002_commits.py", """
        async def migrate(db):
            await db.execute("INSERT INTO people VALUES ('grace')")
            await db.commit()
    """)
    with pytest.raises(SchemaError, match="0002_commits failed: it ended its transaction"):
        await migrate(db, source)
    assert await applied_version(db) == 1


@pytest.mark.parametrize("body", [
    "x = 1\n",                                  # no migrate at all
    "def migrate(db):\n    pass\n",             # not a coroutine function
])
async def test_a_python_migration_must_define_async_migrate(
    db: aiosqlite.Connection, source: Path, body: str,
) -> None:
    write(source, "0002_odd.py", body)
    with pytest.raises(SchemaError, match=r"0002_odd\.py defines no `async def migrate"):
        await migrate(db, source)
    assert await applied_version(db) == 1


async def test_a_python_migration_does_not_inherit_the_runners_future_imports(
    db: aiosqlite.Connection, source: Path,
) -> None:
    # Annotations are evaluated at definition time unless the migration asks otherwise.
    write(source, "0002_annotations.py", """
        async def migrate(db) -> None:
            await db.execute("INSERT INTO people VALUES (?)",
                             (type(migrate.__annotations__["return"]).__name__,))
    """)
    await migrate(db, source)
    assert ("NoneType",) in await rows(db, "SELECT name FROM people")


@pytest.mark.parametrize("names", [
    ["0002_b.sql", "0003_c.sql"],                # not starting at 1
    ["0001_a.sql", "0002_b.sql", "0002_b.py"],   # one number twice, across the kinds
])
def test_duplicates_and_a_missing_first_are_refused(tmp_path: Path, names: list[str]) -> None:
    for name in names:
        write(tmp_path, name, "")
    with pytest.raises(SchemaError, match="each number once"):
        available_migrations(tmp_path)


async def test_a_migration_numbered_into_a_gap_later_is_still_applied(
        tmp_path: Path, db: aiosqlite.Connection) -> None:
    # Numbers are handed out to changes made side by side; they land in any order.
    write(tmp_path, "0001_a.sql", "CREATE TABLE a (x);")
    write(tmp_path, "0003_c.sql", "CREATE TABLE c (x);")
    assert [m.version for m in await migrate(db, tmp_path)] == [1, 3]
    write(tmp_path, "0002_b.sql", "CREATE TABLE b (x);")
    assert [m.version for m in await migrate(db, tmp_path)] == [2]
    assert await migrate(db, tmp_path) == []
    assert {r[0] for r in await rows(db, "SELECT name FROM sqlite_master WHERE type = 'table'")
            } >= {"a", "b", "c"}


def test_other_files_in_the_folder_are_not_migrations(source: Path) -> None:
    for name in ("__init__.py", "README.md", "0002_Upper.sql", "2_short.py", "0002_x.sql.bak"):
        write(source, name, "")
    (source / "__pycache__").mkdir()
    assert [m.name for m in available_migrations(source)] == ["people"]


def test_the_shipped_migrations_are_the_default_source() -> None:
    shipped = available_migrations()
    assert [(m.version, m.name) for m in shipped][:2] == [(1, "init"), (2, "outbox_settles")]
    versions = [m.version for m in shipped]
    assert versions == sorted(set(versions)) and versions[0] == 1
