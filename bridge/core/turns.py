"""A turn: the batch of a chat's messages handed to one agent worker, until its answer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from picobridge.agent.port import Worker
from picobridge.contract import ChatRef
from picobridge.store import StoredMessage


@dataclass(slots=True, eq=False)
class Turn:
    chat: ChatRef
    session: str
    messages: list[StoredMessage]
    worker: Worker
    started: float
    last_activity: float
    # Written to the agent (or being written). A turn of a dispatch wave is claimed before
    # it is sent; until then nothing the agent says belongs to it.
    sent: bool = False
    # The turn outlived agent.turn_timeout and was cancelled: not cancelled twice.
    timed_out: bool = False
    # The person asked to stop it (/stop): if its agent must be killed for that, the turn
    # ends there instead of being sent again.
    stopping: bool = False
    # Messages sent into the running turn (busy modes steer, followup) by their tag, until
    # the agent's answer says what became of them.
    pending: dict[str, StoredMessage] = field(default_factory=dict)
    # A new message asked to stop this turn (busy mode interrupt): once it ends stopped, its
    # messages go to the agent again with the new one.
    interrupted: bool = False
    noted: bool = False  # the chat was told its mode falls back (once per turn)

    @property
    def ids(self) -> list[int]:
        return [m.id for m in self.messages]

    @property
    def attempts(self) -> int:
        return max(m.attempts for m in self.messages)

    @property
    def quoted_ids(self) -> tuple[str, ...]:
        """The platform ids progress displays refer to (reactions, quotes)."""
        return tuple(m.reply_to or m.platform_msg_id for m in self.messages)


def with_attempt(msg: StoredMessage, delta: int = 1) -> StoredMessage:
    return replace(msg, attempts=msg.attempts + delta)


def overdue(turns: Iterable[Turn], now: float, limits: Mapping[str, float],
            default: float) -> list[tuple[Turn, float]]:
    """Turns sent that have gone without output for longer than their agent's turn timeout
    (`limits` per agent, else `default`), each with that timeout; not those already timed out."""
    found = []
    for turn in turns:
        # (A turn between follow-ups may hold no message of its own for a moment.)
        limit = limits.get(turn.messages[0].agent, default) if turn.messages else default
        if turn.sent and not turn.timed_out and now - turn.last_activity > limit:
            found.append((turn, limit))
    return found
