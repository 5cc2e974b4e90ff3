"""What the bridge offers an adapter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from picobridge.contract.commands import BridgeCommand
from picobridge.contract.dialogs import DialogAnswer
from picobridge.contract.messages import ChatRef, InboundMessage, SubmitResult

if TYPE_CHECKING:
    from aiohttp import web

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

    def heard_from(self, platform: str) -> None:
        """The platform delivered something (an event, a completed poll, the answer to a
        ping): the connection is alive, not only up (inbound liveness)."""
        ...

    def rate_limited(self, platform: str) -> None:
        """The platform answered a call with a rate limit that its library waited out by
        itself (the outbox never saw it): counted with the outbox's (/metrics platform_429)."""
        ...

    def silence(self, platform: str, seconds: float | None) -> None:
        """The platform's connection reports up but has carried nothing for `seconds` (None:
        it speaks again); /healthz shows the platform degraded meanwhile."""
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

    async def answer_dialog(self, dialog_id: str, chat: ChatRef, user_id: str,
                            answer: DialogAnswer) -> str | None:
        """A person answered a question with a button. Returns the answer as the question
        should now show it (buttons off), or None when it does not count: the question is
        closed or unknown, was asked in another chat, or the person is not allowed."""
        ...

    def commands(self, chat: ChatRef | None = None, *,
                 bot: str | None = None) -> tuple[BridgeCommand, ...]:
        """The chat commands of `chat`'s agent (None: of the agent the chats of the bot named
        `bot` get by default, the bridge's default agent without it), in menu order, listed
        or not: what a command menu or command help offers. A bot's own menu holds
        `commands(bot=...)`: the bridge gives a chat whose agent offers others a menu of its
        own (`Adapter.show_commands`)."""
        ...

    def offered_commands(self, platform: str, kind: str | None = None
                         ) -> tuple[BridgeCommand, ...]:
        """Every command some chat of the bot `platform` (of `kind` if given: "private",
        "group") may be offered: those of each agent its routes can reach (their own and the
        switchable ones), in menu order. For platforms whose command lists cannot follow each
        chat; the bridge answers a command the chat's own agent lacks with a word saying so."""
        ...

    async def stop_running(self, name: str) -> None:
        """Stop a loop started with `keep_running` for good (the adapter is stopping)."""
        ...
