"""Per-chat lanes and the round-robin order in which they wait for the agent.

One lane per chat: its queued messages and at most one turn in flight. Lanes with queued
messages and no turn wait in one round-robin queue, so one busy chat cannot starve the
others. Idle lanes are dropped (cheap to rebuild), which keeps memory flat with many chats.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from picobridge.contract import ChatRef
from picobridge.store import StoredMessage

if TYPE_CHECKING:
    from picobridge.core.turns import Turn


@dataclass(slots=True, eq=False)
class Lane:
    chat: ChatRef
    queue: deque[StoredMessage] = field(default_factory=deque)
    turn: Turn | None = None
    waiting: bool = False  # in the round-robin queue
    # Reserved for a control (/compact), or a message being sent into the last turn: no
    # turn starts meanwhile.
    held: int = 0


class Lanes:
    def __init__(self, coalesce: bool) -> None:
        self._coalesce = coalesce
        self._lanes: dict[str, Lane] = {}
        self._waiting: deque[Lane] = deque()

    def get(self, chat_key: str) -> Lane | None:
        return self._lanes.get(chat_key)

    def lane(self, chat: ChatRef) -> Lane:
        lane = self._lanes.get(chat.key)
        if lane is None:
            lane = self._lanes[chat.key] = Lane(chat)
        return lane

    def __iter__(self) -> Iterator[Lane]:
        return iter(list(self._lanes.values()))

    @property
    def queued(self) -> int:
        return sum(len(lane.queue) for lane in self._lanes.values())

    @property
    def any_waiting(self) -> bool:
        return bool(self._waiting)

    def add(self, msg: StoredMessage) -> bool:
        """Queue a message in its chat's lane; True when the lane now waits for the agent."""
        lane = self.lane(msg.chat)
        # A message written before others still queued (a platform's late retry) goes ahead
        # of them, so the agent reads the chat in the order it was written.
        position = len(lane.queue)
        if msg.sent_at is not None:
            while position > 0:
                before = lane.queue[position - 1].sent_at
                if before is None or before <= msg.sent_at:
                    break
                position -= 1
        lane.queue.insert(position, msg)
        return self.make_waiting(lane)

    def put_back(self, chat: ChatRef, messages: list[StoredMessage]) -> bool:
        """Messages of a lost turn go back to the front of their lane, and the lane to the
        front of the round robin: they were next already."""
        lane = self.lane(chat)
        lane.queue.extendleft(reversed(messages))
        return self.make_waiting(lane, front=True)

    def make_waiting(self, lane: Lane, front: bool = False) -> bool:
        if lane.waiting or lane.turn is not None or lane.held or not lane.queue:
            return False
        lane.waiting = True
        if front:
            self._waiting.appendleft(lane)
        else:
            self._waiting.append(lane)
        return True

    def next_waiting(self) -> Lane | None:
        """The next lane in round-robin order that has messages and no turn."""
        while self._waiting:
            lane = self._waiting.popleft()
            lane.waiting = False
            if lane.turn is None and not lane.held and lane.queue:
                return lane
            self.forget_if_idle(lane)  # e.g. emptied by /stop while it waited
        return None

    def return_skipped(self, skipped: list[Lane]) -> None:
        """Lanes that could not start now keep their places at the front, in order."""
        for lane in reversed(skipped):
            if not lane.waiting and lane.turn is None and not lane.held and lane.queue:
                lane.waiting = True
                self._waiting.appendleft(lane)

    def take_batch(self, lane: Lane) -> list[StoredMessage]:
        first = lane.queue.popleft()
        batch = [first]
        # Messages already in the agent's history (text "", an interrupted turn's) go with the
        # next one, coalescing or not.
        while lane.queue and lane.queue[0].session_id == first.session_id \
                and (self._coalesce or not any(m.text for m in batch)):
            batch.append(lane.queue.popleft())
        return batch

    def replace(self, msg: StoredMessage) -> None:
        """An edited message takes the place of its queued original."""
        lane = self._lanes.get(msg.chat.key)
        for i, queued in enumerate(lane.queue if lane is not None else ()):
            if queued.id == msg.id:
                lane.queue[i] = msg  # type: ignore[union-attr]

    def senders(self) -> set[tuple[str, str]]:
        """(platform, sender id) of every queued message."""
        return {(m.chat.platform, m.sender_id) for lane in self._lanes.values()
                for m in lane.queue}

    def remove_from(self, senders: set[tuple[str, str]]) -> list[StoredMessage]:
        """Take these senders' queued messages out of their lanes."""
        removed = []
        for lane in list(self._lanes.values()):
            keep = [m for m in lane.queue if (m.chat.platform, m.sender_id) not in senders]
            if len(keep) != len(lane.queue):
                removed += [m for m in lane.queue if (m.chat.platform, m.sender_id) in senders]
                lane.queue = deque(keep)
                self.forget_if_idle(lane)
        return removed

    def forget_if_idle(self, lane: Lane) -> None:
        if not lane.queue and lane.turn is None and not lane.waiting and not lane.held:
            self._lanes.pop(lane.chat.key, None)

    def ahead_of(self, lane: Lane) -> int:
        ahead = 0
        if lane.waiting:
            for other in self._waiting:
                if other is lane:
                    break
                ahead += 1
        return ahead
