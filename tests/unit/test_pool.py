"""Which worker runs a session: affinity, room, weights, and what a busy worker means per
protocol."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from picobridge.agent.pool import WorkerPool
from picobridge.agent.port import WorkerState
from picobridge.contract import ChatRef
from picobridge.store import Store


@dataclass(eq=False)
class Stub:
    name: str
    state: WorkerState = WorkerState.READY
    first_ready: Any = field(default=None)

    @property
    def ready(self) -> bool:
        return self.state is WorkerState.READY


class StubPool(Protocol):
    """A WorkerPool of Stubs as the tests see it: it places the very Stubs it was given."""

    def place(self, session: str, busy: Mapping[str, int]) -> Stub | None: ...

    def assigned_worker(self, session: str) -> str | None: ...


def pool(*names: str, portable: bool = False, max_in_flight: int = 1,
         **kwargs: Any) -> tuple[StubPool, dict[str, Stub], list[tuple[str, str]]]:
    stubs = {n: Stub(n) for n in names}
    assigned: list[tuple[str, str]] = []
    made = WorkerPool(list(stubs.values()), max_in_flight=max_in_flight,  # type: ignore[arg-type]
                      portable=portable, on_assign=lambda s, w: assigned.append((s, w)),
                      **kwargs)
    return cast(StubPool, made), stubs, assigned


def test_a_new_session_goes_to_the_roomiest_worker_and_stays() -> None:
    chosen, stubs, assigned = pool("w1", "w2", max_in_flight=2)
    first = chosen.place("s1", {"w1": 1})
    assert first is stubs["w2"]
    assert chosen.place("s1", {"w2": 1, "w1": 0}) is stubs["w2"]  # affinity beats room
    assert assigned == [("s1", "w2")]


def test_a_busy_worker_keeps_its_session_waiting_unless_sessions_are_portable() -> None:
    waiting, stubs, _ = pool("w1", "w2")
    assert waiting.place("s1", {}) is stubs["w1"]
    assert waiting.place("s1", {"w1": 1}) is None  # in-process memory: wait for w1
    moving, stubs, assigned = pool("w1", "w2", portable=True)
    assert moving.place("s1", {}) is stubs["w1"]
    assert moving.place("s1", {"w1": 1}) is stubs["w2"]  # the file moves with it
    assert assigned == [("s1", "w1"), ("s1", "w2")]


def test_a_session_whose_worker_is_down_moves_and_stays_moved() -> None:
    chosen, stubs, assigned = pool("w1", "w2")
    assert chosen.place("s1", {}) is stubs["w1"]
    stubs["w1"].state = WorkerState.RESTARTING
    assert chosen.place("s1", {}) is stubs["w2"]
    stubs["w1"].state = WorkerState.READY
    assert chosen.place("s1", {}) is stubs["w2"]
    assert assigned == [("s1", "w1"), ("s1", "w2")]


def test_nothing_is_placed_when_no_worker_is_ready_or_free() -> None:
    chosen, stubs, _ = pool("w1", "w2")
    for stub in stubs.values():
        stub.state = WorkerState.STARTING
    assert chosen.place("s1", {}) is None
    stubs["w1"].state = stubs["w2"].state = WorkerState.READY
    assert chosen.place("s2", {"w1": 1, "w2": 1}) is None


def test_weights_share_new_sessions_out() -> None:
    chosen, _, _ = pool("small", "big", max_in_flight=2, weights={"big": 3.0})
    busy: dict[str, int] = {}
    placed = []
    for n in range(4):
        worker = chosen.place(f"s{n}", busy)
        assert worker is not None
        busy[worker.name] = busy.get(worker.name, 0) + 1
        placed.append(worker.name)
    assert placed == ["big", "big", "small", "small"]


def test_stored_assignments_are_honoured_and_unknown_workers_dropped() -> None:
    chosen, stubs, assigned = pool("w1", "w2", assigned={"s1": "w2", "s9": "gone"})
    assert chosen.place("s1", {}) is stubs["w2"]
    assert chosen.assigned_worker("s9") is None
    assert assigned == []


async def test_the_store_keeps_assignments_of_current_sessions(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "a.db")
    try:
        chat = ChatRef("test", "1")
        old = await store.current_session(chat)
        await store.assign_worker(old, "w1")
        new = await store.new_session(chat)
        await store.assign_worker(new, "w2")
        await store.assign_worker(new, "w3")  # moved
        assert await store.worker_assignments() == {new: "w3"}
        assert await store.forget_ended_assignments() == 1
    finally:
        await store.close()


def test_room_is_any_ready_worker_below_its_limit() -> None:
    chosen, stubs, _ = pool("w1", "w2", max_in_flight=2)
    made = cast(WorkerPool, chosen)
    assert made.has_room({"w1": 2, "w2": 1})
    assert not made.has_room({"w1": 2, "w2": 2})
    stubs["w2"].state = WorkerState.RESTARTING
    assert not made.has_room({"w1": 2})
    assert made.has_room({"w1": 1})
