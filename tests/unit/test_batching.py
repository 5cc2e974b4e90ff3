"""Group commit: concurrent calls share a flush, and each caller gets its own outcome."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence

import pytest

from picobridge.store.batching import Coalescer


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.fail_on: int | None = None

    async def flush(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_on in items:
            raise RuntimeError("disk full")
        return [i * 10 for i in items]


async def test_calls_made_together_share_one_flush() -> None:
    rec = Recorder()
    coalesce = Coalescer(rec.flush, "test")
    results = await asyncio.gather(*(coalesce(i) for i in range(5)))
    assert results == [0, 10, 20, 30, 40]
    assert rec.batches == [[0, 1, 2, 3, 4]]


async def flush_under_way() -> tuple[Recorder, Coalescer[int, int], asyncio.Task[int]]:
    """A coalescer whose flush of item 1 is under way, held at its recorder's gate."""
    rec = Recorder()
    rec.gate = asyncio.Event()
    coalesce = Coalescer(rec.flush, "test")
    first = asyncio.create_task(coalesce(1))
    await rec.entered.wait()
    return rec, coalesce, first


async def test_calls_made_during_a_flush_go_together_in_the_next() -> None:
    rec, coalesce, first = await flush_under_way()
    assert rec.gate is not None
    later = [asyncio.create_task(coalesce(i)) for i in (2, 3)]
    await asyncio.sleep(0)  # the later calls are queued while the first flush waits
    rec.gate.set()
    assert await first == 10
    assert [await t for t in later] == [20, 30]
    assert rec.batches == [[1], [2, 3]]


async def test_a_failed_flush_fails_only_its_own_callers() -> None:
    rec = Recorder()
    rec.gate = asyncio.Event()
    rec.fail_on = 1
    coalesce = Coalescer(rec.flush, "test")
    doomed = asyncio.create_task(coalesce(1))
    await rec.entered.wait()
    fine = asyncio.create_task(coalesce(2))
    await asyncio.sleep(0)
    rec.gate.set()
    with pytest.raises(RuntimeError, match="disk full"):
        await doomed
    assert await fine == 20
    assert await coalesce(3) == 30  # and the coalescer still works afterwards


async def test_a_cancelled_caller_does_not_disturb_the_others() -> None:
    rec = Recorder()
    rec.gate = asyncio.Event()
    coalesce = Coalescer(rec.flush, "test")
    leaving = asyncio.create_task(coalesce(1))
    staying = asyncio.create_task(coalesce(2))
    await rec.entered.wait()
    leaving.cancel()
    rec.gate.set()
    assert await staying == 20
    assert leaving.cancelled()
    assert rec.batches == [[1, 2]]  # its item was written all the same


async def test_settle_waits_for_writes_whose_callers_left() -> None:
    rec = Recorder()
    rec.gate = asyncio.Event()
    coalesce = Coalescer(rec.flush, "test")
    leaving = asyncio.create_task(coalesce(1))
    await rec.entered.wait()
    leaving.cancel()
    settling = asyncio.create_task(coalesce.settle())
    await asyncio.sleep(0)
    assert not settling.done()  # the write is still under way
    rec.gate.set()
    await settling
    assert rec.batches == [[1]]


async def test_one_bad_item_fails_only_its_own_caller() -> None:
    rec = Recorder()
    rec.fail_on = 2
    coalesce = Coalescer(rec.flush, "test")
    results = await asyncio.gather(*(coalesce(i) for i in (1, 2, 3)), return_exceptions=True)
    assert results[0] == 10 and results[2] == 30
    assert isinstance(results[1], RuntimeError)
    # Tried together first, then each on its own.
    assert rec.batches == [[1, 2, 3], [1], [2], [3]]


async def test_a_database_that_refuses_the_batch_fails_it_at_once() -> None:
    """A locked or full database would refuse every item again, each after its busy timeout,
    and everything else queued on the connection would wait behind them."""
    async def refuse(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        raise sqlite3.OperationalError("database is locked")

    batches: list[list[int]] = []
    coalesce = Coalescer(refuse, "test")
    results = await asyncio.gather(*(coalesce(i) for i in (1, 2, 3)), return_exceptions=True)
    assert all(isinstance(r, sqlite3.OperationalError) for r in results), results
    assert batches == [[1, 2, 3]]


async def test_a_ready_flush_of_the_first_call_runs_in_the_callers_own_task() -> None:
    rec = Recorder()
    rec.gate = asyncio.Event()
    flushed_in: list[asyncio.Task[object] | None] = []

    async def flush(items: Sequence[int]) -> list[int]:
        flushed_in.append(asyncio.current_task())
        return await rec.flush(items)

    coalesce = Coalescer(flush, "test", ready=lambda: True)
    first = asyncio.create_task(coalesce(1))
    await rec.entered.wait()
    later = [asyncio.create_task(coalesce(i)) for i in (2, 3)]
    settling = asyncio.create_task(coalesce.settle())
    await asyncio.sleep(0)
    assert not settling.done()  # the caller's own flush counts as under way
    rec.gate.set()
    assert await first == 10
    assert [await t for t in later] == [20, 30]
    await settling
    assert rec.batches == [[1], [2, 3]]  # the first at once, the others together after it
    assert flushed_in[0] is first and flushed_in[1] is not first


async def test_calls_wait_for_a_flush_of_their_own_task_when_not_ready() -> None:
    rec = Recorder()
    ready = False
    coalesce = Coalescer(rec.flush, "test", ready=lambda: ready)
    assert await asyncio.gather(*(coalesce(i) for i in range(3))) == [0, 10, 20]
    ready = True
    rec.gate = asyncio.Event()  # a flush waits for the database
    calls = asyncio.gather(*(coalesce(i) for i in range(3, 6)))
    await asyncio.sleep(0)
    rec.gate.set()
    assert await calls == [30, 40, 50]
    assert rec.batches == [[0, 1, 2], [3], [4, 5]]


async def drained_behind_a_flush() -> tuple[Recorder, Coalescer[int, int], asyncio.Task[int],
                                          asyncio.Task[int], asyncio.Task[None]]:
    """Item 1's flush under way (held at the gate), item 2 queued behind it, and a call of
    `drained` made then, still waiting."""
    rec, coalesce, first = await flush_under_way()
    queued = asyncio.create_task(coalesce(2))
    await asyncio.sleep(0)
    drained = asyncio.create_task(coalesce.drained())
    await asyncio.sleep(0)
    assert not drained.done()  # item 2 waits behind the flush of item 1
    return rec, coalesce, first, queued, drained


async def test_drained_waits_for_the_items_queued_so_far_only() -> None:
    await Coalescer(Recorder().flush, "test").drained()  # nothing queued: at once
    rec, _, first, queued, drained = await drained_behind_a_flush()
    assert rec.gate is not None
    rec.gate.set()
    await drained
    assert rec.batches == [[1], [2]]  # item 2 was flushed before drained() returned
    assert (await first, await queued) == (10, 20)


async def test_drained_returns_when_the_flushing_task_is_cancelled() -> None:
    rec, coalesce, first, queued, drained = await drained_behind_a_flush()
    assert coalesce._task is not None
    coalesce._task.cancel()
    await drained  # nothing is queued any more: it does not wait for ever
    for caller in (first, queued):
        with pytest.raises(asyncio.CancelledError):
            await caller
    assert rec.batches == [[1]]


async def test_later_queues_at_once_and_joins_the_next_flush() -> None:
    rec, coalesce, first = await flush_under_way()
    assert rec.gate is not None
    joined = coalesce.later(2)  # queued in this call: no task of its own
    also = coalesce.later(3)
    assert not joined.done()
    rec.gate.set()
    assert (await first, await joined, await also) == (10, 20, 30)
    assert rec.batches == [[1], [2, 3]]
    alone = coalesce.later(4)  # nothing under way: it starts a flush
    assert await alone == 40
    assert rec.batches[-1] == [4]
