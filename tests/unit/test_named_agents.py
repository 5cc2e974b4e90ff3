"""Named agents below the daemon: routes (first match wins, globs, users, kinds, a chat's own
choice), routes that can never match, sessions that belong to an agent, the agent set's
placement and health, and the migration that carries a single-agent database over."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import aiosqlite
import pytest

from picobridge.agent.agents import AgentSet, worker_name
from picobridge.agent.pool import WorkerPool
from picobridge.agent.port import WorkerState
from picobridge.contract import ChatRef, InboundMessage
from picobridge.core.routes import Route, Routing, shadowed
from picobridge.store import Store
from picobridge.store.schema import migrate


@dataclass(eq=False)
class Stub:
    """A worker as the pool sees it."""

    name: str
    state: WorkerState = WorkerState.READY
    down_since: float | None = None
    first_start_pending: bool = False

    @property
    def ready(self) -> bool:
        return self.state is WorkerState.READY

    def down(self, at: float) -> None:
        self.state, self.down_since = WorkerState.RESTARTING, at


def pool(names: list[str]) -> tuple[WorkerPool, dict[str, Stub]]:
    stubs = {n: Stub(n) for n in names}
    return WorkerPool(list(stubs.values()), max_in_flight=1), stubs  # type: ignore[arg-type]

DM = ChatRef("telegram", "42")
WORK_DM = ChatRef("telegram@work", "42")  # the same chat id on another bot
DEV = ChatRef("slack", "C0DEV1", "1700000000.1")


def routing(*routes: Route, chosen: Mapping[str, str] | None = None) -> Routing:
    return Routing(list(routes), "default", chosen)


def test_the_first_matching_route_wins_and_the_rest_go_to_the_default() -> None:
    r = routing(Route("coder", chats=("slack:C0DEV*",)),
                Route("family", platform="telegram", kind="private"),
                Route("coder", platform="telegram"))
    assert r.agent_for(DEV, "U1", "group") == "coder"
    assert r.agent_for(DM, "42", "private") == "family"
    assert r.agent_for(ChatRef("telegram", "-100"), "42", "group") == "coder"
    assert r.agent_for(ChatRef("slack", "D1"), "U1", "private") == "default"


def test_routes_by_bot_and_by_user() -> None:
    r = routing(Route("work", bot="work"), Route("coder", users=frozenset({"7"})))
    assert r.agent_for(WORK_DM, "42", "private") == "work"
    assert r.agent_for(DM, "42", "private") == "default"
    assert r.agent_for(DM, "7", "private") == "coder"
    assert r.agent_for(DM, None, None) == "default"  # no sender: a user route cannot match
    assert Route("x", platform="telegram", bot="default").matches(DM, None, None)
    assert not Route("x", platform="telegram", bot="default").matches(WORK_DM, None, None)


def test_a_chats_choice_holds_only_while_its_route_lets_it_switch() -> None:
    r = routing(Route("family", switchable=("coder",)), chosen={DM.key: "coder"})
    assert r.agent_for(DM) == "coder"
    r.choose(DM, None)
    assert r.agent_for(DM) == "family"
    r.choose(DM, "coder")
    assert r.agent_for(DM) == "coder"
    # The operator took the switch away: the chat is back on its route's agent.
    narrowed = routing(Route("family"), chosen={DM.key: "coder"})
    assert narrowed.agent_for(DM) == "family"
    assert Route("family", switchable=("coder", "family")).choices == ("family", "coder")


def test_routes_that_can_never_match_are_found() -> None:
    routes = [
        Route("a", platform="telegram"),
        Route("b", chats=("telegram:42",)),            # telegram: taken by 0
        Route("c", chats=("slack:C0DEV*",)),
        Route("d", chats=("slack:C0DEV1*",)),          # within 2's pattern
        Route("e", chats=("slack:C0*",)),              # wider than 2: still matches some
        Route("f", platform="slack", users=frozenset({"U1"})),
        Route("g", platform="slack", users=frozenset({"U1", "U2"})),  # U2 still reaches it
        Route("h", platform="slack", users=frozenset({"U1"}), kind="group"),  # within 5
    ]
    assert shadowed(routes) == [(1, 0), (3, 2), (7, 5)]


async def test_sessions_belong_to_an_agent_and_switching_back_resumes(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db")
    try:
        first = await store.record_inbound(InboundMessage(DM, "42", "hi", "m1"), "family")
        assert first is not None and first.agent == "family"
        family = first.session_id
        assert ".family." in family
        coder = await store.current_session(DM, "coder")
        assert coder != family and ".coder." in coder
        assert await store.chat_agent(DM) == "coder"
        # /new ends only the current agent's session.
        fresh = await store.new_session(DM)
        assert fresh not in (coder, family)
        assert await store.session_agent(fresh) == "coder"
        # Back to the family agent: its session is the one it had.
        back = await store.record_inbound(InboundMessage(DM, "42", "again", "m2"), "family")
        assert back is not None and back.session_id == family and back.agent == "family"
        assert await store.current_session(DM, "coder") == fresh
        [info] = await store.chats()
        assert info.agent == "coder" and info.session_id == fresh
        assert {m.agent for m in await store.open_messages()} == {"family"}
        # Each agent's current session keeps its worker across a restart.
        await store.assign_worker(family, "w1")
        await store.assign_worker(fresh, "coder/w1")
        await store.assign_worker(coder, "coder/w2")  # ended by /new
        assert await store.worker_assignments() == {family: "w1", fresh: "coder/w1"}
        assert await store.forget_ended_assignments() == 1
        # A chosen agent is stored with the chat.
        assert await store.choose_agent(DM, "family") == family
        assert await store.chosen_agents() == {DM.key: "family"}
        assert await store.agent_session(DM, "coder") == fresh
        assert await store.agent_session(DM, "nobody") is None
        assert await store.choose_agent(DM, "coder", remember=False) == fresh
        assert await store.chosen_agents() == {}
        assert await store.chat_agent(DM) == "coder"
    finally:
        await store.close()


@pytest.fixture
async def old_database(tmp_path: Path) -> AsyncIterator[Path]:
    """A database as the single-agent picobridge left it: migrations 0001-0003 only."""
    old = tmp_path / "old-migrations"
    old.mkdir()
    shipped = resources.files("picobridge.migrations")
    for entry in shipped.iterdir():
        if entry.name[:4] in ("0001", "0002", "0003"):
            with resources.as_file(entry) as source:
                shutil.copy(source, old / entry.name)
    path = tmp_path / "old.db"
    db = await aiosqlite.connect(path, isolation_level=None)
    await migrate(db, old)
    await db.execute(
        "INSERT INTO chats(chat_key, platform, chat_id, session_id, created_at, updated_at)"
        " VALUES ('telegram:42', 'telegram', '42', 'telegram.42.20250101T000000', 1, 2)")
    await db.execute("INSERT INTO sessions(session_id, chat_key, created_at, ended_at) VALUES"
                     " ('telegram.42.20240101T000000', 'telegram:42', 0, 1),"
                     " ('telegram.42.20250101T000000', 'telegram:42', 1, NULL)")
    await db.execute("INSERT INTO session_workers VALUES ('telegram.42.20250101T000000', 'w2', 1)")
    await db.execute("INSERT INTO cursors VALUES ('telegram.offset', '1234', 1)")
    await db.close()
    yield path


async def test_a_single_agent_database_is_carried_over_to_the_default_agent(
        old_database: Path) -> None:
    store = await Store.open(old_database)
    try:
        chat = ChatRef("telegram", "42")
        assert await store.current_session(chat, "default") == "telegram.42.20250101T000000"
        assert await store.session_agent("telegram.42.20240101T000000") == "default"
        assert await store.worker_assignments() == {"telegram.42.20250101T000000": "w2"}
        assert await store.get_cursor("telegram.offset") == "1234"
        [info] = await store.chats()
        assert info.agent == "default"
    finally:
        await store.close()
    with sqlite3.connect(old_database) as db:
        assert db.execute("SELECT COUNT(*) FROM sessions WHERE agent = 'default'"
                          ).fetchone()[0] == 2


def test_the_agent_set_places_each_session_in_its_own_agents_pool() -> None:
    family, _ = pool(["w1"])
    coder, coder_stubs = pool(["coder/w1", "coder/w2"])
    agents = AgentSet({"default": family, "coder": coder})
    assert id(agents.place("s1", {}, "coder")) == id(coder_stubs["coder/w1"])
    assert id(agents.place("s2", {"coder/w1": 1}, "coder")) == id(coder_stubs["coder/w2"])
    assert agents.place("s3", {"coder/w1": 1, "coder/w2": 1}, "coder") is None
    assert agents.place("s3", {"coder/w1": 1, "coder/w2": 1}, "default") is not None
    assert agents.place("s4", {}, "gone") is None  # an agent no longer configured: it waits
    assert agents.assigned_worker("s2") == "coder/w2"
    assert worker_name("default", "w1") == "w1" and worker_name("coder", "w1") == "coder/w1"


def test_an_agent_is_down_only_when_all_its_workers_are() -> None:
    family, family_stubs = pool(["w1"])
    coder, coder_stubs = pool(["coder/w1"])
    agents = AgentSet({"default": family, "coder": coder})
    coder_stubs["coder/w1"].down(at=5.0)
    assert agents.down_since("coder") == 5.0
    assert agents.down_since("default") is None
    assert agents.down_since() is None  # some agent answers
    family_stubs["w1"].down(at=7.0)
    assert agents.down_since() == 7.0

