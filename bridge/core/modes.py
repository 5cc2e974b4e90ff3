"""Busy modes: what a message does while its chat's turn runs (`bridge.busy_mode`, /mode per
chat, stored).

- collect: it waits, and goes to the agent with the chat's other waiting messages as the next
  turn (coalesced).
- steer: it goes into the running turn at once (prime-rpc `steer`): the agent reads it before
  its next step, and one answer covers both.
- followup: the agent queues it and answers it right after the running turn (prime-rpc
  `follow_up`), in order, each with its own answer.
- interrupt: the running turn is stopped (abort) and the new message starts a turn at once,
  the stopped turn's messages included.

A protocol that cannot do one falls back: steer and followup to collect, interrupt to collect
too when the agent cannot stop a turn without a restart (picobot-json); /mode says so.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable

from picobridge.agent.port import Capabilities, ControlKind
from picobridge.contract import ChatRef
from picobridge.core.command_reply import CommandReply, Handler
from picobridge.store import Store

MAX_CACHED = 10_000


class BusyMode(enum.StrEnum):
    COLLECT = "collect"
    STEER = "steer"
    FOLLOWUP = "followup"
    INTERRUPT = "interrupt"


DESCRIBED = {
    BusyMode.COLLECT: "wait, then go to the agent together as its next message",
    BusyMode.STEER: "go into the reply being worked on, at once",
    BusyMode.FOLLOWUP: "are answered one by one right after the current reply",
    BusyMode.INTERRUPT: "stop the current reply and start again with everything you said",
}


def supports(caps: Capabilities, mode: BusyMode) -> bool:
    if mode is BusyMode.STEER:
        return ControlKind.STEER in caps.controls
    if mode is BusyMode.FOLLOWUP:
        return ControlKind.FOLLOW_UP in caps.controls
    if mode is BusyMode.INTERRUPT:
        return caps.can_abort
    return True


class BusyModes:
    def __init__(self, store: Store, default: str,
                 caps: Callable[[str], Capabilities]) -> None:
        self._store = store
        self._default = BusyMode(default)
        self._caps = caps  # of a named agent
        self._cached: OrderedDict[str, BusyMode] = OrderedDict()

    def handlers(self) -> dict[str, Handler]:
        return {"mode": self.command}

    async def of(self, chat: ChatRef) -> BusyMode:
        """The chat's mode as chosen (what it falls back to is the router's business)."""
        mode = self._cached.get(chat.key)
        if mode is None:
            stored = await self._store.busy_mode(chat)
            mode = BusyMode(stored) if stored is not None \
                and stored in BusyMode.__members__.values() else self._default
            self._keep(chat, mode)
        return mode

    def keeps_aborted(self, agent: str) -> bool:
        return self._caps(agent).keeps_aborted

    def effective(self, mode: BusyMode, agent: str) -> BusyMode:
        return mode if supports(self._caps(agent), mode) else BusyMode.COLLECT

    def _keep(self, chat: ChatRef, mode: BusyMode) -> None:
        self._cached[chat.key] = mode
        self._cached.move_to_end(chat.key)
        while len(self._cached) > MAX_CACHED:
            self._cached.popitem(last=False)

    async def command(self, argument: str, chat: ChatRef, agent: str) -> CommandReply:
        caps = self._caps(agent)
        if argument:
            return CommandReply(await self._set(chat, argument.lower(), caps))
        current = await self.of(chat)
        lines = [f"**Mode** (now {current.value}): messages you send while the agent works…"]
        for mode in BusyMode:
            note = "" if supports(caps, mode) else \
                " (not with this agent: works as collect)"
            lines.append(f"- {mode.value}: {DESCRIBED[mode]}{note}"
                         + (" ✓" if mode is current else ""))
        lines.append("Choose one, or send /mode NAME.")

        async def chosen(value: str) -> str:
            return await self._set(chat, value, caps)

        return CommandReply("\n".join(lines), tuple(m.value for m in BusyMode), "Mode",
                            chosen)

    async def _set(self, chat: ChatRef, name: str, caps: Capabilities) -> str:
        if name not in BusyMode.__members__.values():
            return f"⚠️ No mode `{name}`. Modes: {', '.join(m.value for m in BusyMode)}."
        mode = BusyMode(name)
        await self._store.set_busy_mode(chat, mode.value)
        self._keep(chat, mode)
        if not supports(caps, mode):
            return (f"✓ Mode: {mode.value}. This agent ({caps.protocol}) cannot do "
                    f"that, so your messages work as collect: they {DESCRIBED[BusyMode.COLLECT]}.")
        return f"✓ Mode: {mode.value}: messages you send while the agent works {DESCRIBED[mode]}."
