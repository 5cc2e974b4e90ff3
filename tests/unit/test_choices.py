"""SessionChoices: what a session chose, cached after the first read, written through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from picobridge.agent.port import SessionSettings
from picobridge.core.choices import NOTHING_CHOSEN, SessionChoices
from picobridge.store import Store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "c.db")
    try:
        yield opened
    finally:
        await opened.close()


async def test_sessions_that_chose_nothing_share_one_object(store: Store) -> None:
    choices = SessionChoices(store)
    first, second = await choices.get("s1"), await choices.get("s2")
    assert first is second is NOTHING_CHOSEN
    assert first == SessionSettings()


async def test_a_choice_is_written_through_and_cleared_back_to_nothing(store: Store) -> None:
    choices = SessionChoices(store)
    assert await choices.choose("s1", model="m", thinking="high") == SessionSettings("m", "high")
    assert await SessionChoices(store).get("s1") == SessionSettings("m", "high")  # stored
    assert await choices.choose("s1", thinking="") == SessionSettings("m", None)
    assert await choices.choose("s1", model="") is NOTHING_CHOSEN


async def test_the_oldest_session_leaves_the_cache_first(store: Store) -> None:
    choices = SessionChoices(store, size=2)
    await choices.choose("old", model="a")
    await choices.choose("mid", model="b")
    await choices.choose("old", model="c")  # kept again: now the newest
    await choices.get("new")
    # "mid" was evicted: a choice stored behind the cache's back shows for it, not for "old".
    await store.choose_for_session("mid", model="elsewhere")
    await store.choose_for_session("old", model="elsewhere")
    assert (await choices.get("old")).model == "c"
    assert (await choices.get("mid")).model == "elsewhere"
