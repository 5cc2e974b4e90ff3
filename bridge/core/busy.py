"""A message that arrives while its chat's turn runs, by the chat's busy mode (core/modes.py).

Whoever takes a message out of `Turn.pending` owns it: the agent's answer (covered, or handed
back undelivered), a lost worker (all go back to the queue), or the task that sent it when
the agent refused it (back to the queue). So each message is answered once, or asked again.
While such a task runs the chat's lane is held: the chat's next turn waits for it, so a
message meant for one turn never lands in the next.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from picobridge.agent.port import (
    AgentUnavailable,
    ControlFailed,
    ControlKind,
    ControlRequest,
    Failure,
    Reply,
)
from picobridge.contract import Outcome, OutgoingReply, ReplyKind
from picobridge.core.answers import Answers
from picobridge.core.lanes import Lanes
from picobridge.core.modes import BusyMode, BusyModes
from picobridge.core.outbox import Outbox
from picobridge.core.progress import ProgressRelay
from picobridge.core.turns import Turn, with_attempt
from picobridge.store import Store, StoredMessage
from picobridge.supervision import InOrder, keep

log = logging.getLogger("picobridge.router")

STEERED = "↪️ Passed to the agent while it works on your earlier message."
FOLLOWING = "⏭ Queued: the agent answers this right after its current reply."
INTERRUPTED = "⏹ Stopped the reply in progress: the agent starts again with all you said."
FELL_BACK = ("ℹ️ This agent cannot take messages while it works ({mode}): yours wait and go "
             "to it together after the current reply.")


class BusyHandling:
    busy_modes: BusyModes | None
    _store: Store
    _outbox: Outbox
    _lanes: Lanes
    _turns: dict[str, Turn]
    _answers: Answers
    _progress: ProgressRelay
    _wake: asyncio.Event
    _sending: set[asyncio.Task[None]]
    _arriving: InOrder  # over _sending: each chat's messages on their way to its lane

    def enqueue(self, msg: StoredMessage) -> None:
        raise NotImplementedError

    def _end_turn(self, turn: Turn, outcome: Outcome) -> None:
        raise NotImplementedError

    def _put_back(self, turn: Turn, messages: list[StoredMessage]) -> None:
        raise NotImplementedError

    def _room_freed(self) -> None:
        raise NotImplementedError

    def _record_dispatch(self, ids: list[int]) -> None:
        raise NotImplementedError

    async def _recorded(self) -> None:
        raise NotImplementedError

    def _running(self, msg: StoredMessage) -> Turn | None:
        lane = self._lanes.get(msg.chat.key)
        turn = lane.turn if lane is not None else None
        if turn is None or not turn.sent or turn.session != msg.session_id \
                or self._turns.get(turn.session) is not turn:
            return None
        return turn

    def arrive_soon(self, msg: StoredMessage) -> None:
        """`arrive` for callers that cannot wait: a message of a chat with no turn running
        (most) is queued at once; the others in a task of their own. Either way in the order
        they came: a message arriving after the turn ended waits for one that came during it
        and is still reading the chat's busy mode."""
        key = msg.chat.key
        if not self._arriving.waiting(key) \
                and (self.busy_modes is None or self._running(msg) is None):
            self.enqueue(msg)
            return
        self._arriving.add(key, self.arrive(msg), f"arrive-{msg.id}")

    async def arrive(self, msg: StoredMessage) -> None:
        """A stored message: queued, or sent into its chat's running turn by its mode."""
        if self.busy_modes is None or self._running(msg) is None:
            self.enqueue(msg)
            return
        try:
            chosen = await self.busy_modes.of(msg.chat)
        except Exception as exc:
            # Not knowing the chat's choice must not cost the message its place: it waits,
            # as under the default mode.
            log.warning("chat=%s: its busy mode could not be read (%s); message %d waits for "
                        "the running turn", msg.chat.key, exc.__class__.__name__, msg.id)
            self.enqueue(msg)
            return
        mode = self.busy_modes.effective(chosen, msg.agent)
        turn = self._running(msg)  # again: the turn may have ended meanwhile
        if turn is None or mode is BusyMode.COLLECT:
            self.enqueue(msg)
            if turn is not None and chosen is not BusyMode.COLLECT and not turn.noted:
                turn.noted = True
                await self._note(msg, FELL_BACK.format(mode=chosen.value))
            return
        if mode is BusyMode.INTERRUPT:
            self.enqueue(msg)
            if not turn.interrupted:
                turn.interrupted = True
                turn.worker.cancel_turn(turn.session, f"interrupted in chat {msg.chat.key}")
                await self._note(msg, INTERRUPTED)
            return
        kind = ControlKind.STEER if mode is BusyMode.STEER else ControlKind.FOLLOW_UP
        tag = f"m{msg.id}"
        # Sent to the agent like a turn's own message, it counts as an attempt like one: a
        # message the agent keeps dying on fails after bridge.max_attempts, steered or not.
        msg = with_attempt(msg)
        self._record_dispatch([msg.id])
        turn.pending[tag] = msg
        lane = self._lanes.lane(msg.chat)
        lane.held += 1
        keep(self._sending, self._send_into(turn, kind, msg, tag), f"inject-{tag}")

    async def _send_into(self, turn: Turn, kind: ControlKind, msg: StoredMessage,
                         tag: str) -> None:
        try:
            await turn.worker.control(ControlRequest(kind, turn.session, msg.text, tag=tag,
                                                     attachments=msg.attachments))
        except (ControlFailed, AgentUnavailable) as exc:
            log.info("chat=%s: message %d could not go into the running turn (%s); queued",
                     msg.chat.key, msg.id, exc)
            if turn.pending.pop(tag, None) is msg:  # never reached the agent: no attempt
                self.enqueue(with_attempt(msg, -1))
                # The chat's lane is held until this is written: no turn takes it before.
                await self._recorded()
                await self._store.requeue([msg.id], refund=True)
        else:
            await self._note(msg, STEERED if kind is ControlKind.STEER else FOLLOWING)
        finally:
            lane = self._lanes.lane(msg.chat)
            lane.held -= 1
            self._lanes.make_waiting(lane)
            self._wake.set()
            self._room_freed()

    async def _note(self, msg: StoredMessage, text: str) -> None:
        try:
            self._outbox.deliver(await self._store.add_reply(msg.chat, OutgoingReply(
                text, ReplyKind.NOTICE, reply_to=msg.reply_to or msg.platform_msg_id)))
        except Exception as exc:
            log.warning("chat=%s: a note on a busy-mode message was not stored (%s)",
                        msg.chat.key, exc.__class__.__name__)

    async def _turn_reply(self, turn: Turn, event: Reply | Failure) -> bool:
        """What became of messages sent into the turn; True when the event is handled here
        (a follow-up begins, or an interrupted turn ended stopped)."""
        back = [turn.pending.pop(t) for t in event.undelivered if t in turn.pending]
        if isinstance(event, Reply):
            turn.messages += [turn.pending.pop(t) for t in event.delivered if t in turn.pending]
        if back:
            self._requeue(turn, back)
        if isinstance(event, Reply) and event.continues is not None:
            following = turn.pending.pop(event.continues, None)
            answered = replace(turn, messages=turn.messages)
            self._answers.settle(answered, event.reply, lambda _: None)
            turn.messages = [following] if following is not None else []
            return True
        if isinstance(event, Reply) and event.stopped and turn.interrupted:
            self._end_turn(turn, Outcome.REQUEUED)
            await self._progress.clear(turn.chat, Outcome.REQUEUED)
            again = turn.messages
            if again and self.busy_modes is not None \
                    and self.busy_modes.keeps_aborted(again[0].agent):
                # The agent has them in its history already: the next turn settles them with
                # the new message but sends only that one.
                again = [replace(m, text="", attachments=()) for m in again]
            self._requeue(turn, again)
            return True
        return False

    def _requeue(self, turn: Turn, messages: list[StoredMessage]) -> None:
        """Messages to ask the agent again, not counted as an attempt, at the front."""
        self._put_back(turn, [with_attempt(m, -1) if m.attempts else m for m in messages])
        keep(self._sending, self._requeue_stored([m.id for m in messages]), "requeue-busy")

    async def _requeue_stored(self, ids: list[int]) -> None:
        await self._recorded()  # a steered message's dispatch is written first
        await self._store.requeue(ids, refund=True)
