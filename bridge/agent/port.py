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
from typing import Any, Protocol

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
class SessionSettings:
    """What a person chose for a session (/model, /think): the driver applies it whenever it
    switches the session in, since an agent process may serve other sessions in between."""

    model: str | None = None  # the model's key as `ModelChoice.key` gives it
    thinking: str | None = None


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One user turn for the agent: text (possibly several coalesced messages) in a session."""

    session: str
    text: str
    attachments: tuple[Attachment, ...] = ()
    settings: SessionSettings = SessionSettings()


@dataclass(frozen=True, slots=True)
class ModelChoice:
    key: str  # how the driver names it back (prime-rpc: provider/id)
    name: str  # as people read it
    levels: tuple[str, ...]  # the thinking levels it takes


class ControlKind(enum.StrEnum):
    """What a chat command or a busy mode asks of the agent, beyond a turn."""

    MODELS = "models"  # the models it offers (no session)
    COMPACT = "compact"  # summarise the session's history (argument: instructions)
    EXPORT = "export"  # write the session as a file (argument: the path)
    STEER = "steer"  # a message into the session's running turn
    FOLLOW_UP = "follow_up"  # a message to run after the session's running turn


@dataclass(frozen=True, slots=True)
class ControlRequest:
    kind: ControlKind
    session: str | None = None
    argument: str = ""  # the text (steer, follow-up), the instructions, the path
    settings: SessionSettings = SessionSettings()
    tag: str = ""  # names a steered or follow-up message in the turn's Reply
    # A steered or follow-up message's files; a driver that cannot pass them raises
    # ControlFailed (the message then waits for the next turn).
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True, slots=True)
class ControlResult:
    text: str = ""  # what the agent said of it, for the person
    models: tuple[ModelChoice, ...] = ()
    path: str | None = None  # an exported file


class ControlFailed(Exception):
    """The agent refused or could not do a control; the message is for the person."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What an agent's protocol offers beyond turns, from its driver."""

    protocol: str
    commands: frozenset[str]  # chat commands (contract AGENT_COMMANDS) it supports
    controls: frozenset[ControlKind]
    can_abort: bool = False  # a running turn can be stopped without a restart
    # An aborted turn's messages stay in the agent's history: an interrupting turn need not
    # send them again.
    keeps_aborted: bool = False


@dataclass(frozen=True, slots=True)
class Reply:
    """The agent's answer. `session` None: the agent named no session (logged, dropped).

    `reply` is the one object that travels on to the platform: its text, and the files the
    agent named (where it said they are; the core checks and stores them).

    Messages sent into a running turn (ControlRequest `tag`s): `delivered` the steered ones
    this answer covers; `continues` a follow-up the agent starts on now (the turn goes on:
    this answer is for what came before it); `undelivered` those the agent never took (they
    go to it again as a turn of their own). `stopped`: the turn was aborted.
    """

    session: str | None
    reply: OutgoingReply
    delivered: tuple[str, ...] = ()
    continues: str | None = None
    undelivered: tuple[str, ...] = ()
    stopped: bool = False

    @classmethod
    def of(cls, session: str | None, text: str,
           files: tuple[OutboundFile, ...] = (), **about: Any) -> Reply:
        return cls(session, OutgoingReply(text, ReplyKind.ANSWER, files=files), **about)

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
    undelivered: tuple[str, ...] = ()  # as for Reply


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

    async def control(self, request: ControlRequest) -> ControlResult:
        """Do one control (raises ControlFailed when the agent refuses, AgentUnavailable when
        it is not there). A control on a session must not run beside a turn of another
        session on this worker: the router reserves the worker for it."""
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

    def has_room(self, busy: Mapping[str, int], agent: str | None = None) -> bool:
        """Whether some ready worker (of `agent`; None: of any agent) could take a turn now:
        when none can, `place` would say wait for every session, and is not asked."""
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

    def capabilities(self, agent: str) -> Capabilities:
        """What the named agent's protocol offers beyond turns."""
        ...
