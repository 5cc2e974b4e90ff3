"""The fake Discord's HTTP side: its state, the bot's token, Discord's error bodies and its rate
limits (429 with `retry_after` in the body and the X-RateLimit-* headers, per route bucket or
global, and a second 429 for a client that comes back before the wait is over)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar

from aiohttp import web

from tests.fakes.discord.model import (
    CHANNEL_DM,
    FLAG_MESSAGE_CONTENT,
    JSON,
    Channel,
    Connection,
    Interaction,
    Reaction,
    SentMessage,
    Snowflakes,
    user_payload,
)
from tests.fakes.server import Call, FakeServer, Fault

API = "/api/v10"
Handler = Callable[[web.Request, Call], Awaitable[web.StreamResponse]]
_MESSAGES = {400: "400: Bad Request", 401: "401: Unauthorized", 403: "Missing Access",
             404: "404: Not Found", 500: "500: Internal Server Error",
             502: "502: Bad Gateway", 503: "503: Service Unavailable"}


class DiscordError(Exception):
    """An error answer in Discord's shape: {"message": ..., "code": ...}."""

    def __init__(self, status: int, code: int, message: str,
                 errors: JSON | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.errors = status, code, message, errors

    def response(self) -> web.Response:
        body: JSON = {"message": self.message, "code": self.code}
        if self.errors is not None:
            body["errors"] = self.errors
        return json_response(body, self.status)


class DiscordBase(FakeServer):
    FLOOD_METHODS: ClassVar[frozenset[str]] = frozenset({"create_message", "edit_message"})

    def __init__(self, *, token: str | None = None, bot_name: str = "picobot",
                 app_flags: int = FLAG_MESSAGE_CONTENT, heartbeat_interval_ms: int = 41250,
                 interaction_deadline: float | None = None) -> None:
        super().__init__()
        from tests.fakes.discord.model import INTERACTION_DEADLINE

        self.ids = Snowflakes()
        self.token = token or f"MTIzNDU2Nzg5MDEy.GfAkE1.{secrets.token_urlsafe(27)}"
        self.app_id = self.ids.next()
        self.bot_id = self.app_id  # a bot user has its application's id
        self.bot_name = bot_name
        self.app_flags = app_flags
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.interaction_deadline = interaction_deadline or INTERACTION_DEADLINE
        self.users: dict[str, JSON] = {self.bot_id: user_payload(self.bot_id, bot_name, bot=True)}
        self.channels: dict[str, Channel] = {}
        self.guilds: dict[str, JSON] = {}
        self.sent: list[SentMessage] = []  # the bot's messages, in the order sent
        self.reactions: list[Reaction] = []
        self.typing: list[tuple[str, float]] = []  # (channel id, when)
        self.interactions: dict[str, Interaction] = {}
        self.commands: dict[str, list[JSON]] = {}  # "global" or guild id -> registered commands
        self.uploads: list[tuple[str, str, bytes]] = []  # (channel, file name, data)
        self.connections: list[Connection] = []
        self.early_retries: list[str] = []  # calls that came back before their 429 was over
        self._route_waits: dict[str, float] = {}  # bucket -> monotonic end of its 429
        self._global_wait = 0.0
        self._rate_limits: list[tuple[str, float, bool]] = []  # scripted: (method, wait, global)
        self.files: dict[str, tuple[str, bytes]] = {}  # attachment path -> (type, bytes)

    @property
    def base_url(self) -> str:
        """`discord.base_url` for the daemon: the REST base; /gateway/bot names the gateway."""
        return f"{self.url}{API}"

    @property
    def gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}/gateway"

    def revoke_bot_token(self) -> None:
        """The operator reset the token in the Developer Portal: the old one gets 401s and
        the gateway closes with 4004."""
        self.token = f"MTIzNDU2Nzg5MDEy.GfAkE2.{secrets.token_urlsafe(27)}"

    # ---- rate limits -------------------------------------------------------------------------

    def rate_limit_next(self, method: str, retry_after: float = 1.0, *,
                        is_global: bool = False) -> None:
        """The next call of ``method`` gets a 429 as Discord sends it; calls that come back
        before ``retry_after`` (on its route, or any route when global) get another one."""
        self._rate_limits.append((method, retry_after, is_global))

    def clear_rate_limits(self) -> None:
        """Drop the scripted 429s not yet sent and the waits they began."""
        self._rate_limits.clear()
        self._route_waits.clear()
        self._global_wait = 0.0

    def _limited(self, method: str, bucket: str) -> web.Response | None:
        now = time.monotonic()
        if now < self._global_wait or now < self._route_waits.get(bucket, 0.0):
            self.early_retries.append(bucket)
            wait = max(self._global_wait, self._route_waits.get(bucket, 0.0)) - now
            return self._too_many(bucket, wait, now < self._global_wait)
        for index, (name, wait, is_global) in enumerate(self._rate_limits):
            if name == method:
                del self._rate_limits[index]
                if is_global:
                    self._global_wait = now + wait
                else:
                    self._route_waits[bucket] = now + wait
                return self._too_many(bucket, wait, is_global)
        return None

    def _too_many(self, bucket: str, wait: float, is_global: bool) -> web.Response:
        headers = {"Retry-After": str(max(1, round(wait))), "Via": "1.1 google",
                   "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                   "X-RateLimit-Reset-After": f"{wait:.3f}",
                   "X-RateLimit-Reset": f"{time.time() + wait:.3f}",
                   "X-RateLimit-Bucket": bucket.replace(" ", "_"),
                   "X-RateLimit-Scope": "global" if is_global else "user"}
        if is_global:
            headers["X-RateLimit-Global"] = "true"
        body = {"message": "You are being rate limited.", "retry_after": round(wait, 3),
                "global": is_global}
        return json_response(body, 429, headers)

    def error_envelope(self, fault: Fault) -> tuple[JSON, dict[str, str]]:
        if fault.status == 429:
            wait = float(fault.retry_after or 1)
            return ({"message": "You are being rate limited.", "retry_after": wait,
                     "global": False}, {"Retry-After": str(int(wait)), "Via": "1.1 google",
                                        "X-RateLimit-Remaining": "0",
                                        "X-RateLimit-Reset-After": str(wait)})
        message = fault.error or _MESSAGES.get(fault.status, f"{fault.status}")
        return {"message": message, "code": 0, **(fault.extra or {})}, {}

    def error_response(self, fault: Fault, call: Call | None = None) -> web.Response:
        body, headers = self.error_envelope(fault)
        if call is not None:
            call.status, call.response = fault.status, body
            self.notify()
        return json_response(body, fault.status, headers)

    # ---- the plumbing of every route ---------------------------------------------------------

    def route(self, method: str, handler: Handler, *, auth: bool = True,
              bucket_key: str = "channel_id") -> Callable[[web.Request],
                                                          Awaitable[web.StreamResponse]]:
        async def serve(request: web.Request) -> web.StreamResponse:
            call = self.record(Call(method, dict(request.match_info),
                                    token=_token(request.headers.get("Authorization"))))
            if auth and call.token != self.token:
                call.status = 401
                self.notify()
                return DiscordError(401, 0, "401: Unauthorized").response()
            call.params.update(request.query)
            fault = await self.guard(method, request, call)
            if fault is not None:
                return fault
            bucket = f"{method} {request.match_info.get(bucket_key, '')}"
            limited = self._limited(method, bucket)
            if limited is not None:
                call.status = 429
                self.notify()
                return limited
            try:
                answer = await handler(request, call)
            except DiscordError as exc:
                call.status, call.response = exc.status, {"message": exc.message,
                                                          "code": exc.code}
                self.notify()
                return exc.response()
            call.status = answer.status
            self.notify()
            return answer

        return serve

    def ok(self, call: Call, body: JSON | list[JSON] | None, status: int = 200) -> web.Response:
        if body is None:
            return web.Response(status=204)
        call.response = body if isinstance(body, dict) else {"items": body}
        # Exactly this content type: discord.py reads anything else as text.
        return web.Response(status=status, body=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json"})

    # ---- state shared by the parts -------------------------------------------------------------

    def channel(self, channel_id: str) -> Channel:
        found = self.channels.get(channel_id)
        if found is None:
            raise DiscordError(404, 10003, "Unknown Channel")
        return found

    def dm_channel(self, user_id: str) -> Channel:
        """The DM channel between the bot and ``user_id`` (made on first use)."""
        for channel in self.channels.values():
            if channel.type == CHANNEL_DM and channel.recipient == user_id:
                return channel
        channel = Channel(self.ids.next(), CHANNEL_DM, recipient=user_id)
        self.channels[channel.id] = channel
        return channel

    def add_user(self, user_id: str, name: str) -> JSON:
        self.users[user_id] = user_payload(user_id, name)
        return self.users[user_id]

    def messages_in(self, channel_id: str) -> list[SentMessage]:
        return [m for m in self.sent if m.channel_id == channel_id]


def json_response(body: JSON, status: int, headers: dict[str, str] | None = None
                  ) -> web.Response:
    """JSON as Discord sends it: discord.py reads a body as JSON only under exactly this
    content type (aiohttp's json_response adds a charset)."""
    return web.Response(status=status, body=json.dumps(body).encode(),
                        headers={**(headers or {}), "Content-Type": "application/json"})


def _token(header: str | None) -> str | None:
    if header is None or not header.startswith("Bot "):
        return None
    return header[4:]
