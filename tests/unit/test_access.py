"""AccessPolicy: the allow lists and the operator's grants, decisions cached until a grant
changes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from picobridge.core.access import AccessPolicy
from picobridge.store import Store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "a.db")
    try:
        yield opened
    finally:
        await opened.close()


async def test_decisions_are_per_platform_and_follow_the_grants(store: Store) -> None:
    policy = AccessPolicy(store, {"telegram": frozenset({"1"})})
    assert await policy.allowed("telegram", "1")
    assert not await policy.allowed("slack", "1")  # the same id on another platform
    assert not await policy.allowed("telegram", "2")
    assert await policy.allowed("console", "anyone")
    await store.set_access("telegram", "2", True)
    await store.set_access("telegram", "1", False)
    assert await policy.allowed("telegram", "2")  # cached "no" dropped with the grant
    assert not await policy.allowed("telegram", "1")
    assert not await policy.allowed("slack", "1")
