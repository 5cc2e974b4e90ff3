"""The contract between the bridge and the chat platforms.

An adapter knows its platform and nothing of the agent; the bridge knows the agent and nothing
of any platform. They meet here: one normalised inbound message type, one outgoing reply type,
progress events, the `Adapter` base class a platform implements and the `BridgeLink` the bridge
hands to every adapter.
"""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from aiohttp import web

    from picobridge.config.settings import Settings

_KEY_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """Pair up surrogate halves and replace lone ones with U+FFFD.

    A broken JSON escape (from a platform or the agent) can leave lone surrogates in a str; no
    platform accepts them, SQLite refuses them and every UTF-8 encoder raises on them.
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a conversation lives: a chat, optionally a thread/topic inside it.

    Every distinct ChatRef is its own conversation with its own agent session.
    """

    platform: str
    chat_id: str
    thread_id: str | None = None

    @property
    def key(self) -> str:
        base = f"{self.platform}:{self.chat_id}"
        return base if self.thread_id is None else f"{base}:{self.thread_id}"

    def session_stem(self) -> str:
        """Readable prefix for this chat's session ids, restricted to [A-Za-z0-9_.-]."""
        parts = [self.platform, self.chat_id]
        if self.thread_id is not None:
            parts.append(self.thread_id)
        return ".".join(_KEY_SAFE.sub("_", p) for p in parts)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file the user sent, already fetched by the adapter.

    Text-like files travel inline (`content`); other files were saved to disk and `path`,
    `size` and `mime` tell the agent where to find them.
    """

    name: str
    content: str | None = None
    path: str | None = None
    size: int | None = None
    mime: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in {
            "name": self.name, "content": self.content, "path": self.path,
            "size": self.size, "mime": self.mime,
        }.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attachment:
        return cls(
            name=str(data["name"]), content=data.get("content"), path=data.get("path"),
            size=data.get("size"), mime=data.get("mime"),
        )


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A chat message normalised by an adapter, before the bridge has seen it.

    `platform_message_id` must be unique per platform and stable across redeliveries: the
    bridge deduplicates on it. `reply_to` is the platform id of the message a reply should
    quote or thread under. `sent_at` is when the user sent it by the platform's clock, for a
    platform that may deliver a chat's messages out of order (one that retries an event whose
    acknowledgement was lost after newer ones): queued messages are taken in that order.
    """

    chat: ChatRef
    sender_id: str
    text: str
    platform_message_id: str
    sender_name: str = ""
    attachments: tuple[Attachment, ...] = ()
    reply_to: str | None = None
    sent_at: float | None = None


class ReplyKind(enum.StrEnum):
    ANSWER = "answer"  # the agent's reply to a turn
    UNSOLICITED = "unsolicited"  # an agent response with no turn in flight (scheduled jobs)
    NOTICE = "notice"  # a bridge message: command replies, access notices
    ERROR = "error"  # the turn failed; the user must be told


@dataclass(frozen=True, slots=True)
class OutgoingReply:
    """One message for a chat. `text` is Markdown; the adapter renders it for its platform."""

    text: str
    kind: ReplyKind
    reply_to: str | None = None
    # Platform ids of the user messages this reply settles, so a console or test can match.
    answers: tuple[str, ...] = ()
    # Set for notices meant for one user only (a platform may show them to that user alone).
    private_to: str | None = None
    # The reply's id in the store's outbox, stable across retries and restarts: what an
    # adapter keys the progress of a reply sent in several parts on. None outside the outbox.
    outbox_id: int | None = None


@dataclass(frozen=True, slots=True)
class BridgeCommand:
    """A command the bridge answers itself, on every platform.

    `description` is one line in lower case, as /help lists it after the command (a platform
    may capitalise it for its command menu). An unlisted command works but is not offered:
    /start is what chat apps send when someone first opens a bot.
    """

    name: str
    description: str
    listed: bool = True


# The one list of bridge commands: /help and every platform's command menu and command help
# are made from it, so they cannot disagree.
BRIDGE_COMMANDS: tuple[BridgeCommand, ...] = (
    BridgeCommand("new", "start a fresh conversation (the agent forgets this one)"),
    BridgeCommand("status", "agent health, your place in the queue, your session"),
    BridgeCommand("stop", "drop your messages that are still waiting"),
    BridgeCommand("help", "what this bot does and its commands"),
    BridgeCommand("start", "say hello and explain the bot", listed=False),
)


def listed_commands() -> tuple[BridgeCommand, ...]:
    """The bridge commands offered to users, in the order menus show them."""
    return tuple(command for command in BRIDGE_COMMANDS if command.listed)


class ProgressKind(enum.StrEnum):
    STARTED = "started"  # the chat's turn was handed to the agent
    TEXT = "text"  # streamed answer text (a delta)
    REASONING = "reasoning"
    TOOL_START = "tool_start"
    TOOL_DONE = "tool_done"
    STATUS = "status"  # a line about the agent's state (retrying, compacting its memory)


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    kind: ProgressKind
    text: str = ""
    tool: str = ""
    # The user messages the running turn answers (platform ids), for reactions and quoting.
    message_ids: tuple[str, ...] = ()


class Outcome(enum.StrEnum):
    DONE = "done"
    FAILED = "failed"
    REQUEUED = "requeued"  # the agent went away; the turn will run again


class SubmitResult(enum.StrEnum):
    ACCEPTED = "accepted"  # stored durably; the platform may be told it was received
    DUPLICATE = "duplicate"  # seen before; acknowledge again, do nothing
    DENIED = "denied"  # sender not allowed; stored nothing for the agent
    COMMAND = "command"  # a bridge command, handled


class StorageUnavailable(Exception):
    """Raised by `BridgeLink` calls while the bridge cannot write (a full disk, a database
    locked by another process or read-only). Nothing was stored: the adapter must not
    acknowledge the message to its platform, and offers it again after a pause. It is
    transient, never a reason to skip a message; the bridge logs the outage once."""


class DeliveryError(Exception):
    """Raised by `Adapter.send_reply` when a reply could not be delivered.

    Transient errors are retried later (after `retry_after` seconds when the platform said so);
    permanent ones are recorded as failed and not retried.
    """

    def __init__(self, message: str, *, permanent: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after


class BridgeLink(Protocol):
    """What the bridge offers an adapter."""

    async def submit(self, message: InboundMessage) -> SubmitResult:
        """Record a message durably (returns only after the commit) and queue it for the agent."""
        ...

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        """Whether this user may reach the agent. `submit` checks this itself; adapters ask
        first only to avoid fetching what a stranger sent (file downloads)."""
        ...

    async def update_queued(self, platform: str, platform_message_id: str, text: str) -> bool:
        """Replace the text of a message that is still waiting for its turn (edits)."""
        ...

    async def knows_chat(self, chat: ChatRef) -> bool:
        """Whether the bridge already holds a conversation for this chat (e.g. a thread)."""
        ...

    async def get_cursor(self, name: str) -> str | None: ...

    async def set_cursor(self, name: str, value: str) -> None: ...

    def connection_changed(self, platform: str, connected: bool) -> None:
        """Adapters report their platform connection state (health, watchdog)."""
        ...

    def http_app(self) -> web.Application | None:
        """The daemon's local HTTP server (`http.listen`), None when it is off.

        Adapters that receive webhooks (a platform's HTTP or webhook mode) add their
        routes in `start`; the server begins listening after every adapter has started.
        """
        ...

    def fatal(self, platform: str, reason: str) -> None:
        """The platform refused us for good (revoked token, another poller): stop the daemon
        with a non-zero exit so the service manager shows it. `reason` must hold no secret."""
        ...

    def keep_running(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        """Run a long-lived loop (a poller, a socket reader) under the bridge's supervision:
        if `loop()` raises or returns, the exception is logged with `name` and the loop is
        started again after a backoff; one that keeps failing makes the daemon unhealthy
        (and withholds systemd's watchdog keep-alives). Names are unique per daemon."""
        ...

    async def stop_running(self, name: str) -> None:
        """Stop a loop started with `keep_running` for good (the adapter is stopping)."""
        ...


class Adapter(ABC):
    """A chat platform. Subclasses set `platform` and implement the abstract methods."""

    platform: ClassVar[str]

    @abstractmethod
    async def start(self, bridge: BridgeLink) -> None:
        """Connect and begin feeding messages to `bridge.submit`; return once running."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop taking messages and release connections. Must be safe to call twice."""

    @abstractmethod
    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        """Deliver one reply. Raise DeliveryError when it did not reach the platform."""

    async def show_progress(self, chat: ChatRef, event: ProgressEvent) -> None:
        """Show that the agent works (typing, a reaction, streamed text). Optional.

        Called inline while the agent's output is read: return quickly and do slow platform
        calls in the adapter's own tasks.
        """
        return None

    async def clear_progress(self, chat: ChatRef, outcome: Outcome) -> None:
        """The turn ended (before its reply is sent): stop any progress display. Optional."""
        return None

    async def verify(self) -> str:
        """Check the credentials against the platform for `picobridge check`.

        Returns a short description (e.g. the bot's name); raises on failure with a message
        that never contains a secret.
        """
        return "ok"

    def connected(self) -> bool:
        """Whether the platform connection is currently up (health and watchdog)."""
        return True


class Platform(ABC):
    """A platform as the rest of picobridge knows it before (or without) starting it: its
    config section, who may talk to the bot, how its user ids look, and how to build its
    adapter. Importing it must stay cheap; the platform's libraries load in `adapter()`.

    A new platform is one package under adapters/ with a Platform subclass, plus one line in
    adapters/registry.py.
    """

    name: ClassVar[str]
    # The pydantic model of its config section, `[<name>]`.
    section: ClassVar[type[Any]]
    # systemd credential file name -> key in its section (`LoadCredential=<file>:...`).
    credentials: ClassVar[Mapping[str, str]] = {}
    # A user id as operators see it, for help texts (`access allow <name>:<example>`).
    user_example: ClassVar[str] = "12345"
    # The key that turns it on, for "no platform is enabled" (e.g. "<name>.token").
    enable_hint: ClassVar[str] = ""

    @abstractmethod
    def active(self, section: Any) -> bool:
        """Whether the configuration turns this platform on."""

    @abstractmethod
    def allowed_users(self, section: Any) -> frozenset[str]:
        """The user ids the config file lets in."""

    def user_id_problem(self, user_id: str) -> str | None:
        """Why `user_id` cannot be one of this platform's user ids (None when it can)."""
        return None if user_id.strip() == user_id and user_id else "an empty or padded id"

    def needs_listener(self, section: Any) -> str | None:
        """What of this section needs the local HTTP listener (`http.listen`), if anything."""
        return None

    def secrets(self, section: Any) -> list[str]:
        """Every secret in the section, for the log redaction filter."""
        found = []
        for name in type(section).model_fields:
            value = getattr(section, name)
            if hasattr(value, "get_secret_value"):
                found.append(str(value.get_secret_value()))
        return found

    @abstractmethod
    def adapter(self, settings: Settings) -> Adapter:
        """Build the adapter (the settings enable this platform)."""
