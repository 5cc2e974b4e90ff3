"""The bridge's view of the agent side, independent of the wire protocol and of how many
processes serve it.

The router sends `AgentRequest`s to workers it gets from an `AgentPool` and hears back through
an `AgentListener`: every event is stamped with its session by the protocol driver (which
knows the turn it sent) and every callback names the worker it comes from, so the router never
has to guess where a record belongs.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from picobridge.contract import (
    DEFAULT_AGENT,
    Attachment,
    DialogAnswer,
    DialogKind,
    OutboundFile,
    OutgoingReply,
    ReplyKind,
)


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One user turn for the agent: text (possibly several coalesced messages) in a session."""

    session: str
    text: str
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True, slots=True)
class Reply:
    """The agent's answer. `session` None: the agent named no session (logged, dropped).

    `reply` is the one object that travels on to the platform: its text, and the files the
    agent named (where it said they are; the core checks and stores them).
    """

    session: str | None
    reply: OutgoingReply

    @classmethod
    def of(cls, session: str | None, text: str,
           files: tuple[OutboundFile, ...] = ()) -> Reply:
        return cls(session, OutgoingReply(text, ReplyKind.ANSWER, files=files))

    @property
    def text(self) -> str:
        return self.reply.text


@dataclass(frozen=True, slots=True)
class Progress:
    session: str | None
    kind: str  # "text", "reasoning", "tool_start", "tool_done", "status"
    text: str = ""
    tool: str = ""


@dataclass(frozen=True, slots=True)
class Failure:
    session: str | None
    message: str
    code: str | None = None


@dataclass(frozen=True, slots=True)
class DialogRequest:
    """The agent asks the person a question and waits for the answer (its turn is blocked)."""

    session: str | None
    request_id: str  # the protocol's own id, for the answer
    kind: DialogKind
    title: str
    message: str = ""
    options: tuple[str, ...] = ()
    prefill: str = ""
    timeout: float | None = None  # seconds the agent waits by itself, if it said


AgentEvent = Reply | Progress | Failure | DialogRequest


class WorkerState(enum.StrEnum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"  # waiting out the backoff before the next start
    STOPPED = "stopped"


class AgentUnavailable(Exception):
    """The worker is not ready to take a turn."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker as operations and /status see it."""

    name: str
    state: WorkerState
    pid: int | None
    restarts: int
    last_error: str | None
    last_pong: float | None  # wall clock of the last answered health probe
    down_since: float | None  # monotonic; None while ready
    turns: int  # turns finished on it since the daemon started
    agent: str = DEFAULT_AGENT  # the named agent whose pool it is in


class Worker(Protocol):
    """What the router may do with one agent worker."""

    @property
    def name(self) -> str: ...

    @property
    def ready(self) -> bool: ...

    async def send(self, request: AgentRequest) -> None:
        """Hand a turn to the agent; raises AgentUnavailable when it cannot take it."""
        ...

    def restart(self, reason: str) -> None:
        """Kill the process; the worker starts a new one after its backoff."""
        ...

    def cancel_turn(self, session: str, reason: str) -> None:
        """Stop a turn that must not go on (timeout, /stop): abort it where the protocol can,
        else restart the process."""
        ...

    @property
    def can_abort(self) -> bool:
        """Whether a turn can be stopped without restarting the agent (the protocol allows)."""
        ...

    async def answer_dialog(self, request_id: str, answer: DialogAnswer) -> None:
        """Give the agent the person's answer to a DialogRequest."""
        ...


class AgentListener(Protocol):
    """What workers report to the router."""

    async def worker_ready(self, worker: Worker) -> None: ...

    async def worker_lost(self, worker: Worker, reason: str) -> None:
        """The worker's process exited or was restarted: its turns in flight are gone."""
        ...

    async def agent_event(self, worker: Worker, event: AgentEvent) -> None: ...

    def turn_running(self, worker: Worker) -> bool:
        """Whether a turn runs on this worker (the health probe is judged leniently then)."""
        ...


class AgentPool(Protocol):
    """The workers of every agent, and which one serves a session."""

    def start(self, listener: AgentListener) -> None: ...

    async def stop(self) -> None: ...

    def place(self, session: str, busy: Mapping[str, int],
              agent: str = DEFAULT_AGENT) -> Worker | None:
        """The worker of `agent` that should run this session's next turn now, or None to
        wait.

        `busy` is the number of turns in flight per worker name (the router keeps them;
        worker names are unique across agents).
        """
        ...

    @property
    def workers(self) -> Sequence[Worker]: ...


class PoolStatus(Protocol):
    """What the core shows of the agent side (/status, notices while it is down)."""

    def infos(self) -> list[WorkerInfo]: ...

    def down_since(self, agent: str | None = None) -> float | None:
        """Monotonic time since which no worker (of `agent`; None: of any agent) has been
        ready; None while one is."""
        ...

    def assigned_worker(self, session: str) -> str | None: ...
