"""A protocol driver: how the bridge talks to ONE agent child process.

A driver is created fresh at each spawn (so no state of a dead process leaks into the next)
and owns the protocol's whole exchange: the handshake, the health probe, and a turn (any
number of records each way, request ids where the protocol has them). Whatever the agent
says about a turn comes out through `emit` stamped with the turn's session, even where the
wire record carries none. The worker supplies the pipes and the clock; the driver never
spawns, kills or waits for processes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from picobridge.agent.port import (
    AgentEvent,
    AgentRequest,
    Capabilities,
    ControlFailed,
    ControlKind,
    ControlRequest,
    ControlResult,
)
from picobridge.config.sections import AgentSettings
from picobridge.contract import DialogAnswer


class DriverIO(Protocol):
    async def write(self, record: dict[str, Any]) -> None:
        """Write one record as one line; raises OSError/TimeoutError when the agent is gone
        or stopped reading."""
        ...


Emit = Callable[[AgentEvent], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class DriverContext:
    settings: AgentSettings
    state_dir: Path  # the bridge's state directory (saved attachments, session files)
    worker: str  # the worker's name, for log lines


class Driver(ABC):
    # The protocol's name in `agent.protocol` (the registry maps names to drivers).
    protocol: ClassVar[str]
    # Whether the agent answers the health probe while a turn runs. When it does not, a
    # probe missed during a turn is tolerated and agent.turn_timeout guards the turn instead.
    probes_while_busy: ClassVar[bool] = False
    # Whether a running turn can be stopped without restarting the process.
    can_abort: ClassVar[bool] = False
    # Turns one process takes at once, whatever agent.max_in_flight says (None: no limit of
    # the protocol's own).
    max_turns: ClassVar[int | None] = None
    # Whether a session can move between processes (the agent keeps it in a file the bridge
    # names) or lives in the one process that served it (its memory would be lost).
    sessions_portable: ClassVar[bool] = False
    # The chat commands of the catalogue's agent commands (contract AGENT_COMMANDS) this
    # protocol supports, each with the protocol requests it maps to (for docs and logs).
    commands: ClassVar[Mapping[str, str]] = {}
    # The controls `control` does: the commands above, and the busy modes steer (STEER) and
    # followup (FOLLOW_UP); interrupt needs `can_abort`.
    controls: ClassVar[frozenset[ControlKind]] = frozenset()
    # Whether an aborted turn's messages stay in the agent's history (busy mode interrupt
    # then sends only the new message).
    keeps_aborted: ClassVar[bool] = False

    @classmethod
    def capabilities(cls) -> Capabilities:
        return Capabilities(cls.protocol, frozenset(cls.commands), cls.controls, cls.can_abort,
                            cls.keeps_aborted)

    def __init__(self, io: DriverIO, emit: Emit, context: DriverContext) -> None:
        self._io = io
        self._emit = emit
        self._context = context

    @abstractmethod
    async def on_record(self, record: dict[str, Any]) -> None:
        """One JSON object the agent printed (framing has already been done)."""

    @abstractmethod
    async def handshake(self) -> None:
        """Return once the agent is ready for turns. The worker bounds the wait."""

    @abstractmethod
    async def probe(self) -> None:
        """One health round trip; return once the agent answered. The worker bounds it."""

    @abstractmethod
    async def start_turn(self, request: AgentRequest) -> None:
        """Send one turn. Return once the agent has it; its outcome comes through `emit`."""

    @abstractmethod
    def running(self) -> frozenset[str]:
        """Sessions with a turn sent and not yet answered."""

    async def on_unreadable(self, head: bytes) -> None:
        """A line too long to read was skipped; `head` is its first bytes. A driver that can
        tell it was a turn's answer ends that turn with a Failure (the user is told now rather
        than after every retry timed out)."""
        return None

    async def answer_dialog(self, request_id: str, answer: DialogAnswer) -> None:
        """Send the person's answer to a DialogRequest this driver emitted."""
        raise NotImplementedError(f"{self.protocol} has no dialogs")

    async def abort(self, session: str) -> None:
        """Ask the agent to stop this session's running turn (only when `can_abort`)."""
        raise NotImplementedError

    async def control(self, request: ControlRequest) -> ControlResult:
        """Do one of `controls`. The worker runs it only while no turn of another session
        runs on this process (the router reserves the worker), except STEER and FOLLOW_UP,
        which go into the session's own running turn."""
        raise ControlFailed(f"{self.protocol} has no {request.kind.value}")

    def closed(self) -> None:
        """The process is gone: nothing more will be read. Whatever waits for an answer of
        the agent must stop waiting (it raises ConnectionError)."""
        return None

    def shutdown_record(self) -> dict[str, Any] | None:
        """What to write to ask the agent to exit, before its stdin is closed."""
        return None
