"""adapters/common: a reply sent in several parts, resumable by its outbox id, with its
progress kept in the bridge's cursors (partlog)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from picobridge.adapters.common.multipart import MultipartSend
from picobridge.adapters.common.partlog import PartLog, plan_digest


class Cursors:
    """The cursor half of a BridgeLink, counting what it is asked."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.reads = 0
        self.writes: list[tuple[str, str]] = []

    async def get_cursor(self, name: str) -> str | None:
        self.reads += 1
        return self.values.get(name)

    async def set_cursor(self, name: str, value: str) -> None:
        self.values[name] = value
        self.writes.append((name, value))


class Platform:
    """Takes parts, and refuses the ones it was told to."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        self.shown: list[str] = []
        self.refuse = refuse or set()

    def sender(self, text: str) -> Callable[[], Awaitable[None]]:
        async def send() -> None:
            if text in self.refuse:
                raise ConnectionError(text)
            self.shown.append(text)
        return send


PARTS = ["one", "two", "three"]


async def send_all(log: PartLog, outbox_id: int | None, platform: Platform,
                   parts: list[str] = PARTS) -> None:
    sending = await MultipartSend.begin(log, outbox_id, parts)
    for index, text in enumerate(parts):
        await sending.part(str(index), platform.sender(text))
    await sending.finish()


async def test_progress_is_recorded_before_each_next_part_and_emptied_at_the_end() -> None:
    cursors = Cursors()
    log = PartLog(cursors, "chat")
    seen_before: list[str | None] = []
    platform = Platform()

    def sender(text: str) -> Callable[[], Awaitable[None]]:
        send = platform.sender(text)

        async def recorded_first() -> None:
            # What the store holds at the moment this part leaves.
            seen_before.append(cursors.values.get("chat.parts.42"))
            await send()
        return recorded_first

    sending = await MultipartSend.begin(log, 42, PARTS)
    for index, text in enumerate(PARTS):
        await sending.part(str(index), sender(text))
    await sending.finish()
    assert platform.shown == PARTS
    done_before = [json.loads(v)["done"] if v else None for v in seen_before]
    assert done_before == [None, ["0"], ["0", "1"]]
    assert cursors.writes[-1] == ("chat.parts.42", "")
    assert len(cursors.writes) == 3  # the last part needs no record of its own
    assert json.loads(cursors.writes[0][1])["plan"] == plan_digest(PARTS)


async def test_a_new_process_resumes_after_the_last_part_that_arrived() -> None:
    cursors = Cursors()
    platform = Platform(refuse={"two"})
    with pytest.raises(ConnectionError):
        await send_all(PartLog(cursors, "chat"), 7, platform)
    platform.refuse.clear()
    await send_all(PartLog(cursors, "chat"), 7, platform)  # nothing in memory, as after a kill
    assert platform.shown == PARTS
    assert cursors.values == {"chat.parts.7": ""}


async def test_a_retry_in_the_same_process_reads_nothing_back() -> None:
    cursors = Cursors()
    log = PartLog(cursors, "chat")
    platform = Platform(refuse={"three"})
    with pytest.raises(ConnectionError):
        await send_all(log, 8, platform)
    reads = cursors.reads
    platform.refuse.clear()
    await send_all(log, 8, platform)
    assert platform.shown == PARTS and cursors.reads == reads


@pytest.mark.parametrize("outbox_id, parts", [(None, PARTS), (9, ["only one"])])
async def test_nothing_is_recorded_without_an_outbox_id_or_for_one_part(
        outbox_id: int | None, parts: list[str]) -> None:
    cursors = Cursors()
    platform = Platform()
    await send_all(PartLog(cursors, "chat"), outbox_id, platform, parts)
    assert platform.shown == parts
    assert cursors.reads == 0 and cursors.writes == []


@pytest.mark.parametrize("saved", [
    json.dumps({"plan": "another-split", "done": ["0", "1"]}),
    "not json at all",
])
async def test_progress_that_does_not_fit_the_plan_is_not_trusted(saved: str) -> None:
    cursors = Cursors()
    cursors.values["chat.parts.10"] = saved
    platform = Platform()
    await send_all(PartLog(cursors, "chat"), 10, platform)
    assert platform.shown == PARTS  # all of it again rather than a part missing
    assert cursors.values["chat.parts.10"] == ""


async def test_pieces_of_a_part_are_resumed_piece_by_piece() -> None:
    cursors = Cursors()
    platform = Platform(refuse={"1.1"})
    sending = await MultipartSend.begin(PartLog(cursors, "chat"), 11, PARTS)
    await sending.part("0", platform.sender("0"))
    assert not sending.begun("1")
    with pytest.raises(ConnectionError):
        # Part 1 goes in pieces (a fallback); its second piece fails.
        await sending.part("1", lambda: piecewise(sending, platform))
    platform.refuse.clear()
    again = await MultipartSend.begin(PartLog(cursors, "chat"), 11, PARTS)
    assert again.resumed and again.done("0") and not again.done("1") and again.begun("1")
    await again.part("1", lambda: piecewise(again, platform))
    assert platform.shown == ["0", "1.0", "1.1"]


async def piecewise(sending: MultipartSend, platform: Platform) -> None:
    for n in range(2):
        await sending.part(f"1.{n}", platform.sender(f"1.{n}"))


async def test_finishing_a_reply_that_recorded_nothing_writes_nothing() -> None:
    cursors = Cursors()
    platform = Platform(refuse={"one"})
    with pytest.raises(ConnectionError):
        await send_all(PartLog(cursors, "chat"), 12, platform)
    sending = await MultipartSend.begin(PartLog(cursors, "chat"), 12, PARTS)
    await sending.finish()  # e.g. refused for good before anything arrived
    assert cursors.writes == []
