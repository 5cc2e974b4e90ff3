"""discord.py's client, pointed at `discord.base_url` without touching its globals.

discord.py builds every REST URL from `Route.BASE` and opens the gateway at
`DiscordWebSocket.DEFAULT_GATEWAY` (a plain `Client` never asks /gateway/bot). Both are
class attributes shared by every client in the process, so setting them would move other
clients too. Instead each bot's `HTTPClient` is a `RoutedHTTP`: it rewrites the prefix of
each request's URL from Route.BASE to the configured base, and, at login, asks /gateway/bot
for the gateway's address and uses it where discord.py would open its built-in one. With the
default base nothing changes. Interaction callbacks go through this client too (send.py,
commands.py), not through discord.py's `Interaction.response`, whose webhook adapter builds
its URLs from the global Route.BASE.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import HTTPClient, Route

log = logging.getLogger("picobridge.discord")

# Gateway intents: DMs, guild messages (with their content, a privileged intent the bot must
# be granted in the Developer Portal), guilds (channels and threads), reactions not needed.
INTENTS = discord.Intents.none()
INTENTS.guilds = True
INTENTS.guild_messages = True
INTENTS.dm_messages = True
INTENTS.message_content = True


class _NoVoice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        # The bridge has no voice: discord.py's warning that voice libraries are missing
        # would only alarm operators.
        return "voice will NOT be supported" not in str(record.msg)


def quiet_library_logs() -> None:
    """discord.py logs whole payloads (message texts) at DEBUG and each connection at INFO:
    keep it to warnings, as the daemon does for the other platforms' libraries."""
    library = logging.getLogger("discord")
    library.setLevel(max(logging.WARNING, logging.getLogger().getEffectiveLevel()))
    client_log = logging.getLogger("discord.client")
    if not any(isinstance(f, _NoVoice) for f in client_log.filters):
        client_log.addFilter(_NoVoice())


def _on_429(rate_limited: Callable[[], None]) -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()

    async def ended(session: aiohttp.ClientSession, context: Any,
                    params: aiohttp.TraceRequestEndParams) -> None:
        if params.response.status == 429:
            rate_limited()

    trace.on_request_end.append(ended)
    return trace


class RoutedHTTP(HTTPClient):
    """discord.py's HTTP client with its own REST base and gateway address."""

    def __init__(self, base_url: str, loop: asyncio.AbstractEventLoop,
                 rate_limited: Callable[[], None] = lambda: None) -> None:
        # discord.py waits out 429s itself; the trace counts each for /metrics.
        super().__init__(loop, max_ratelimit_timeout=None, http_trace=_on_429(rate_limited))
        self._base = base_url.rstrip("/")
        self.gateway_url: str | None = None

    def routed(self, url: str) -> str:
        default = Route.BASE
        if url.startswith(default) and self._base != default:
            return self._base + url[len(default):]
        return url

    async def request(self, route: Route, **kwargs: Any) -> Any:
        route.url = self.routed(route.url)
        return await super().request(route, **kwargs)

    async def static_login(self, token: str) -> Any:
        data = await super().static_login(token)
        _, url, _ = await self.get_bot_gateway()
        self.gateway_url = url
        return data

    async def ws_connect(self, url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        return await super().ws_connect(self.gateway(url), compress=compress)

    def gateway(self, url: str) -> str:
        """Where discord.py would open its built-in gateway, open the one /gateway/bot named
        (with discord.py's query: version, encoding, compression)."""
        wanted = yarl.URL(url)
        default = DiscordWebSocket.DEFAULT_GATEWAY
        if self.gateway_url is None or wanted.host != default.host:
            return url  # a resume_gateway_url from READY: already the right place
        return str(yarl.URL(self.gateway_url).with_query(wanted.query))


Handler = Callable[..., Coroutine[Any, Any, None]]


class BridgeClient(discord.Client):
    """A discord.Client whose events go to the adapter's handlers (by event name)."""

    def __init__(self, base_url: str, handlers: dict[str, Handler],
                 rate_limited: Callable[[], None] = lambda: None) -> None:
        super().__init__(intents=INTENTS, chunk_guilds_at_startup=False,
                         member_cache_flags=discord.MemberCacheFlags.none(),
                         allowed_mentions=discord.AllowedMentions.none(),
                         enable_debug_events=False, max_messages=None)
        # Before anything uses it: the connection state holds the same HTTP client.
        self.http = RoutedHTTP(base_url, self.loop, rate_limited)
        self._connection.http = self.http
        self._picobridge_handlers = handlers

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        super().dispatch(event, *args, **kwargs)
        handler = self._picobridge_handlers.get(event)
        if handler is not None:
            self._schedule_event(handler, f"picobridge:{event}", *args, **kwargs)

    @property
    def routed_http(self) -> RoutedHTTP:
        assert isinstance(self.http, RoutedHTTP)
        return self.http
