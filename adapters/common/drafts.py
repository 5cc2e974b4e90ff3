"""Streamed drafts: the text a turn streams (`DraftText`), and drafts waiting for their answers
per chat, in turn order, each for its own answer (`DraftQueue`).

A model may stream its answer in hundreds of thousands of tiny deltas. Each delta must cost
the same small amount however long the answer already is, or one long answer holds up every
other chat: `DraftText` appends without copying, joins only when a draft is shown (at most
once per edit interval), and keeps no more than a draft can show.

With streaming on, a turn's answer is shown while it is written, in a draft message that the
final answer then replaces. The agent may finish a chat's next turn before the outbox has
delivered the previous answer (it sends a chat's replies one at a time, and a platform's flood
control can hold them up), so a chat may have several finished drafts waiting. Each answer
must replace its own draft, never the newest one: otherwise the older draft stays on screen
half-written.

A draft is tied to the user messages its turn answers (the progress events' message ids); an
answer finds its draft by the message it replies to or settles. A draft older than the one an
answer takes belongs to an answer that will not come in this run (never stored, say; the turn
runs again after a restart and gets a draft of its own), so it is taken down.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from picobridge.adapters.common.tasks import TaskSet
from picobridge.contract import DeliveryError, OutgoingReply

D = TypeVar("D")

# Parts appended before they are joined into one string: keeps the list of a long stream of
# one-character deltas short without joining on every delta.
_JOIN_EVERY = 4096


class DraftText:
    """The text a turn has streamed so far, up to `cap` characters.

    A draft shows the start of the answer (the final answer replaces it), so text past what
    one message can show is not kept: memory stays bounded and each render has a bounded
    input. `cut` tells whether text was dropped, for the draft to say it goes on.
    """

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._parts: list[str] = []
        self._length = 0
        self.cut = False
        # Bumped by every change, so a flush can tell whether there is anything new to show.
        self.version = 0

    def __len__(self) -> int:
        return self._length

    def add(self, delta: str) -> None:
        room = self._cap - self._length
        if room <= 0 or not delta:
            self.cut = self.cut or bool(delta)
            return
        if len(delta) > room:
            delta = delta[:room]
            self.cut = True
        self._parts.append(delta)
        self._length += len(delta)
        self.version += 1
        if len(self._parts) >= _JOIN_EVERY:
            self._parts = ["".join(self._parts)]

    def text(self) -> str:
        """All the kept text, joined once and remembered until the next delta."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""


@dataclass(frozen=True, slots=True)
class _Waiting(Generic[D]):
    message_ids: frozenset[str]
    draft: D


class DraftQueue(Generic[D]):
    def __init__(self, tasks: TaskSet,
                 discard: Callable[[D], Coroutine[Any, Any, None]]) -> None:
        """`discard` takes a draft off the screen; it runs in `tasks`."""
        self._tasks = tasks
        self._discard = discard
        self._waiting: dict[str, deque[_Waiting[D]]] = {}
        # Drafts handed to a reply, by outbox id: a retry of that reply must replace the
        # same draft, not look for another one.
        self._taken: dict[int, D] = {}

    def add(self, chat_key: str, message_ids: tuple[str, ...], draft: D) -> None:
        """A turn ended with this draft on screen; its answer is on the way."""
        entry = _Waiting(frozenset(message_ids), draft)
        self._waiting.setdefault(chat_key, deque()).append(entry)

    def take(self, chat_key: str, reply: OutgoingReply) -> D | None:
        """The draft `reply` should replace, or None when it has none."""
        if reply.outbox_id is not None and reply.outbox_id in self._taken:
            return self._taken[reply.outbox_id]
        queue = self._waiting.get(chat_key)
        if not queue:
            return None
        wanted = {mid for mid in (reply.reply_to, *reply.answers) if mid}
        # Without ids on either side, turn order alone decides.
        index = next((i for i, entry in enumerate(queue)
                      if not entry.message_ids or not wanted or entry.message_ids & wanted),
                     None)
        if index is None:
            return None
        for _ in range(index):
            stale = queue.popleft()
            self._tasks.spawn(self._discard(stale.draft), name=f"draft-discard-{chat_key}")
        draft = queue.popleft().draft
        if not queue:
            del self._waiting[chat_key]
        if reply.outbox_id is not None:
            self._taken[reply.outbox_id] = draft
        return draft

    def settled(self, reply: OutgoingReply) -> None:
        """The reply was delivered or refused for good: its draft is no longer needed."""
        if reply.outbox_id is not None:
            self._taken.pop(reply.outbox_id, None)

    @contextlib.contextmanager
    def settling(self, reply: OutgoingReply) -> Iterator[None]:
        """Around one attempt to send `reply`: forgets its draft when the reply got through
        or was refused for good, keeps it for the retry of a transient failure."""
        try:
            yield
        except DeliveryError as exc:
            if exc.permanent:
                self.settled(reply)
            raise
        self.settled(reply)

    def waiting(self) -> list[D]:
        """Every draft still waiting for its answer, and those taken by undelivered replies."""
        drafts = [entry.draft for queue in self._waiting.values() for entry in queue]
        return drafts + list(self._taken.values())

    def clear(self) -> None:
        self._waiting.clear()
        self._taken.clear()
