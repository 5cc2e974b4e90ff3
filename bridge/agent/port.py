"""The bridge's view of an agent, independent of its wire protocol.

The router speaks only in these terms: it sends `AgentRequest`s and receives `AgentEvent`s
through an `AgentListener`. A protocol (picobot's JSON channel today, prime-agent's RPC later)
is an `AgentCodec` that maps them to and from wire records.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol

from picobridge.contract import Attachment


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One user turn for the agent: text (possibly several coalesced messages) in a session."""

    session: str
    text: str
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True, slots=True)
class Reply:
    session: str | None
    text: str


@dataclass(frozen=True, slots=True)
class Progress:
    session: str | None
    kind: str  # "text", "reasoning", "tool_start", "tool_done", or a protocol's own name
    text: str = ""
    tool: str = ""


@dataclass(frozen=True, slots=True)
class Failure:
    session: str | None
    message: str
    code: str | None = None


@dataclass(frozen=True, slots=True)
class Ready:
    pass


@dataclass(frozen=True, slots=True)
class Pong:
    pass


@dataclass(frozen=True, slots=True)
class Unknown:
    record: dict[str, Any] = field(default_factory=dict)


AgentEvent = Reply | Progress | Failure | Ready | Pong | Unknown


class AgentState(enum.StrEnum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"  # waiting out the backoff before the next start
    STOPPED = "stopped"


class AgentCodec(Protocol):
    """A wire protocol: how requests become records and records become events."""

    name: str

    def message(self, request: AgentRequest) -> dict[str, Any]: ...

    def ping(self) -> dict[str, Any]: ...

    def shutdown(self) -> dict[str, Any]: ...

    def decode(self, record: dict[str, Any]) -> AgentEvent: ...


class AgentListener(Protocol):
    """What the agent supervisor reports to the router."""

    async def agent_ready(self) -> None: ...

    async def agent_lost(self, reason: str) -> None:
        """The agent exited or was restarted: every turn in flight is gone."""
        ...

    async def agent_event(self, event: Reply | Progress | Failure) -> None: ...

    def turn_running(self) -> bool:
        """Whether a turn is in flight (missed pongs are tolerated then; turn_timeout rules)."""
        ...
