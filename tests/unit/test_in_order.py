"""The one per-chat order (supervision.InOrder; adapters/common/serial.py is its platforms' face):
each key's work in the order it was added, other keys alongside; what a failed or cancelled
piece does to the work behind it in each mode; nothing kept for a key whose work has ended."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Coroutine
from typing import Any

import pytest

from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet
from picobridge.supervision import InOrder

log = logging.getLogger("test.in_order")


class Refused(Exception):
    pass


async def boom() -> None:
    raise RuntimeError("kaput")


async def test_each_keys_work_keeps_the_order_it_was_added_in_under_concurrent_submission(
        ) -> None:
    held: set[asyncio.Task[Any]] = set()
    order = InOrder(held)
    keys = [f"chat-{k}" for k in range(4)]
    added: dict[str, list[int]] = {key: [] for key in keys}
    ran: dict[str, list[int]] = {key: [] for key in keys}
    running: dict[str, int] = dict.fromkeys(keys, 0)
    gates = {key: asyncio.Event() for key in keys}
    overlaps: list[str] = []

    async def piece(key: str, n: int) -> None:
        running[key] += 1
        if running[key] > 1:
            overlaps.append(key)
        await gates[key].wait()  # every piece of a key is held until the test lets it go
        ran[key].append(n)
        running[key] -= 1

    async def submitter(offset: int) -> None:
        for n in range(offset, 60, 3):  # three submitters interleave their adds
            key = keys[n % len(keys)]
            added[key].append(n)
            order.add(key, piece(key, n), f"piece-{n}")
            await asyncio.sleep(0)  # let the others add in between

    await asyncio.gather(*(submitter(offset) for offset in range(3)))
    assert all(order.waiting(key) for key in keys)
    # One key let go: all of its work ends while the others' is still held.
    gates["chat-2"].set()
    await asyncio.wait([t for t in held if t.get_name() in {
        f"piece-{n}" for n in added["chat-2"]}])
    assert ran["chat-2"] == added["chat-2"] and not order.waiting("chat-2")
    assert all(ran[key] == [] for key in keys if key != "chat-2")
    for key in keys:
        gates[key].set()
    await asyncio.wait(set(held))
    assert ran == added and overlaps == []
    assert len(order) == 0 and not held  # nothing kept once every key is idle


async def test_a_failure_is_logged_and_the_work_behind_it_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    held: set[asyncio.Task[Any]] = set()
    order = InOrder(held)
    ran: list[str] = []

    async def record(name: str) -> None:
        ran.append(name)

    with caplog.at_level(logging.ERROR, logger="picobridge.supervision"):
        failed = order.add("chat", boom(), "settle-1")
        behind = order.add("chat", record("behind"), "settle-2")
        await asyncio.wait([failed, behind])
    assert ran == ["behind"]
    [record_] = [r for r in caplog.records if r.name == "picobridge.supervision"]
    assert "settle-1" in record_.getMessage() and record_.exc_info is not None


async def test_a_failure_is_the_callers_and_the_work_behind_it_goes_on_or_is_refused(
        caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    async def record(name: str) -> str:
        ran.append(name)
        return name

    lenient = InOrder(set(), report=False)
    failed = lenient.add("chat", boom(), "one")
    behind = lenient.add("chat", record("lenient"), "two")
    assert await behind == "lenient"
    with pytest.raises(RuntimeError):
        await failed

    strict = InOrder(set(), report=False, refuse=lambda: Refused("an earlier piece failed"))
    failed = strict.add("chat", boom(), "one")
    never = record("refused")
    refused = strict.add("chat", never, "two")
    refused_too = strict.add("chat", record("refused too"), "three")
    other_chat = strict.add("other", record("other chat"), "four")
    with pytest.raises(RuntimeError):
        await failed
    for task in (refused, refused_too):
        with pytest.raises(Refused):
            await task
    assert await other_chat == "other chat"
    assert inspect.getcoroutinestate(never) == inspect.CORO_CLOSED  # closed, never begun
    # The refusal lasts only while the failed piece's chat has work: new work runs again.
    assert len(strict) == 0
    assert await strict.add("chat", record("later"), "five") == "later"
    assert ran == ["lenient", "other chat", "later"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # the callers' own


@pytest.mark.parametrize("refusing", [False, True])
@pytest.mark.parametrize("began_waiting", [False, True])
async def test_a_piece_cancelled_before_its_turn_never_begins_and_is_not_overtaken(
        refusing: bool, began_waiting: bool) -> None:
    held: set[asyncio.Task[Any]] = set()
    order = InOrder(held, report=False, refuse=(lambda: Refused("no")) if refusing else None)
    began, release = asyncio.Event(), asyncio.Event()
    events: list[str] = []

    async def first() -> None:
        events.append("first begins")
        began.set()
        await release.wait()
        events.append("first ends")

    async def record(name: str) -> None:
        events.append(name)

    running = order.add("chat", first(), "first")
    await began.wait()
    second_work = record("second")
    second = order.add("chat", second_work, "second")
    third = order.add("chat", record("third"), "third")
    if began_waiting:
        await asyncio.sleep(0)  # one step: both are waiting for their turn now
    second.cancel()  # else before its task ever ran: it ends at once, without a step
    await asyncio.wait([second])
    assert second.cancelled()
    assert inspect.getcoroutinestate(second_work) == inspect.CORO_CLOSED  # never began
    # What came behind it still waits for what came before it.
    assert not third.done() and events == ["first begins"] and order.waiting("chat")
    release.set()
    await asyncio.wait([running, third])
    if refusing:  # behind a cancelled piece the work is refused, as behind a failed one
        assert isinstance(third.exception(), Refused)
        assert events == ["first begins", "first ends"]
    else:
        assert events == ["first begins", "first ends", "third"]
    assert len(order) == 0 and not held


async def test_shutdown_stops_every_chats_work_and_keeps_nothing() -> None:
    tasks = TaskSet(log)
    serial = ChatSerial(tasks, name="shutdown")
    began: list[str] = []
    works: list[Coroutine[Any, Any, None]] = []
    three_began = asyncio.Event()

    async def forever(name: str) -> None:
        began.append(name)
        if len(began) == 3:
            three_began.set()
        await asyncio.Event().wait()

    def make(name: str) -> Coroutine[Any, Any, None]:
        works.append(forever(name))
        return works[-1]

    pieces = [serial.run(f"chat-{n % 3}", functools.partial(make, f"piece {n}"))
              for n in range(9)]
    await three_began.wait()
    assert sorted(began) == ["piece 0", "piece 1", "piece 2"]  # one per chat at a time
    assert len(tasks) == 9  # held by the adapter part's task set
    await tasks.close()
    assert all(piece.cancelled() for piece in pieces)
    assert sorted(began) == ["piece 0", "piece 1", "piece 2"]  # none began on the way out
    assert all(inspect.getcoroutinestate(w) == inspect.CORO_CLOSED for w in works)
    assert len(serial) == 0 and len(tasks) == 0


async def test_many_chats_that_went_idle_cost_nothing() -> None:
    tasks = TaskSet(log)
    serial = ChatSerial(tasks)

    async def quick(n: int) -> int:
        return n

    done = [serial.run(f"chat-{n}", functools.partial(quick, n)) for n in range(2000)]
    done += [serial.run(f"chat-{n}", functools.partial(quick, -n)) for n in range(2000)]
    assert len(serial) == 2000  # each chat's latest piece, while under way
    results = await asyncio.gather(*done)
    assert results == list(range(2000)) + [-n for n in range(2000)]
    assert len(serial) == 0 and not serial.waiting("chat-0") and len(tasks) == 0
