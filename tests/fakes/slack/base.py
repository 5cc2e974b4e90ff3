"""The fake Slack's HTTP side: routes, reading Web API requests, tokens, error answers, ids,
and the state every other part uses."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import ClassVar

import aiohttp
from aiohttp import web

from tests.fakes.server import JSON, Call, FakeServer, Fault
from tests.fakes.slack.model import (
    APP_TOKEN_METHODS,
    Ack,
    AssistantStatus,
    CommandResponse,
    Delivery,
    EphemeralMessage,
    EventState,
    FileDownload,
    PostedMessage,
    ReactionChange,
    SlackError,
    SocketConn,
    StoredFile,
    UploadedFile,
)

MethodHandler = Callable[[JSON], JSON]
_DEFAULT_ERRORS = {429: "ratelimited", 500: "internal_error", 503: "service_unavailable"}
# Arguments slack-sdk sends JSON-encoded inside form bodies.
_JSON_ARGS = ("blocks", "attachments", "files", "loading_messages", "metadata")


class SlackBase(FakeServer):
    """State shared by the parts of the fake Slack, and its Web API plumbing."""

    FLOOD_METHODS: ClassVar[frozenset[str]] = frozenset({"chat.postMessage"})

    def __init__(self, *, bot_token: str = "xoxb-1-fake-bot-token",
                 app_token: str = "xapp-1-A1-fake-app-token", team_id: str = "T1",
                 team_name: str = "Fake Team", app_id: str = "A1", bot_user_id: str = "U0BOT",
                 bot_id: str = "B0BOT", bot_name: str = "picobridge",
                 verification_token: str = "fake-verification-token", ack_timeout: float = 3.0,
                 max_retries: int = 3, retry_reason: str = "timeout") -> None:
        super().__init__()
        self.bot_token, self.app_token = bot_token, app_token
        self.team_id, self.team_name, self.app_id = team_id, team_name, app_id
        self.bot_user_id, self.bot_id, self.bot_name = bot_user_id, bot_id, bot_name
        self.verification_token = verification_token
        # Tests shorten the ack timeout to exercise redelivery without waiting Slack's 3 s.
        self.ack_timeout, self.max_retries, self.retry_reason = (ack_timeout, max_retries,
                                                                 retry_reason)
        # what the bot did
        self.messages: list[PostedMessage] = []
        self.ephemeral_messages: list[EphemeralMessage] = []
        self.reaction_log: list[ReactionChange] = []
        self.uploaded_files: list[UploadedFile] = []
        self.assistant_statuses: list[AssistantStatus] = []
        self.downloads: list[FileDownload] = []
        self.command_responses: list[CommandResponse] = []  # posted to a command's response_url
        # Socket Mode
        self.deliveries: list[Delivery] = []
        self.redeliveries: list[Delivery] = []
        self.acks: list[Ack] = []
        self.ack_timeouts: list[str] = []  # envelope ids that were not acked in time
        self.socket_connects = 0
        # Socket Mode connections carry nothing (no hello, no pongs) while this is set.
        self.silent = False
        self.silent_connections = 0
        # the workspace
        self.channels: dict[str, JSON] = {}
        self.users: dict[str, JSON] = {}
        self._store: dict[str, dict[str, JSON]] = {}  # channel -> ts -> message as Slack has it
        self._reactions: dict[tuple[str, str], dict[str, list[str]]] = {}
        self._ids = itertools.count(1)
        self._last_ts_us = 0
        self._files: dict[str, StoredFile] = {}
        self._uploads: dict[str, UploadedFile] = {}  # upload id (in the URL) -> record
        self._tickets: set[str] = set()
        self._connections: list[SocketConn] = []
        self._pending: list[JSON] = []  # envelopes waiting for a socket
        self._events: dict[str, EventState] = {}
        self._envelope_event: dict[str, str] = {}  # envelope id -> event id
        self._acked_envelopes: set[str] = set()
        self._response_urls: dict[str, str] = {}  # a command's response_url path -> its user
        self._response_uses: dict[str, int] = {}  # ... -> how often it was posted to
        self._session: aiohttp.ClientSession | None = None
        self._methods = self.methods()
        self.setup()

    def setup(self) -> None:
        """Initial content (the bot's own user...); parts extend it."""

    def methods(self) -> dict[str, MethodHandler]:
        """Web API method name -> handler(params) -> the answer's fields; parts add theirs."""
        return {"api.test": lambda params: {"args": params}}

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{method}", self._handle_api)

    def next_id(self, prefix: str) -> str:
        return f"{prefix}0{next(self._ids):07X}"

    def next_ts(self) -> str:
        """A fresh message ts: wall-clock based (so age checks work), unique and increasing."""
        self._last_ts_us = max(time.time_ns() // 1000, self._last_ts_us + 1)
        seconds, micros = divmod(self._last_ts_us, 1_000_000)
        return f"{seconds}.{micros:06d}"

    # ---- Web API plumbing --------------------------------------------------------------------

    def error_envelope(self, fault: Fault) -> tuple[JSON, dict[str, str]]:
        error = fault.error or _DEFAULT_ERRORS.get(fault.status, "fatal_error")
        headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
        return {"ok": False, "error": error, **(fault.extra or {})}, headers

    async def _read_params(self, request: web.Request) -> tuple[JSON, str | None]:
        """Merge query string and body the way Slack does; returns (params, token from body)."""
        params: JSON = dict(request.query)
        is_json = request.method == "POST" and request.content_type == "application/json"
        if is_json and request.can_read_body:
            try:
                body = await request.json()
            except ValueError as exc:
                raise SlackError("invalid_json") from exc
            if not isinstance(body, dict):
                raise SlackError("invalid_json")
            params.update(body)
        elif request.method == "POST" and request.can_read_body:
            for key, field in (await request.post()).items():
                params[key] = (field.file.read() if isinstance(field, web.FileField)
                               else field if isinstance(field, str) else bytes(field))
        # Slack ignores a token inside a JSON body: JSON callers must use the header.
        body_token = params.pop("token", None)
        for key in _JSON_ARGS:
            value = params.get(key)
            if isinstance(value, str) and value:
                try:
                    params[key] = json.loads(value)
                except ValueError as exc:
                    raise SlackError("invalid_arguments") from exc
        return params, None if is_json or not isinstance(body_token, str) else body_token

    def _check_auth(self, method: str, token: str | None) -> None:
        if not token:
            raise SlackError("not_authed")
        if token in self.revoked_tokens:
            raise SlackError("token_revoked")
        wanted = self.app_token if method in APP_TOKEN_METHODS else self.bot_token
        if token == wanted:
            return
        if token in (self.app_token, self.bot_token):
            raise SlackError("not_allowed_token_type")
        raise SlackError("invalid_auth")

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.startswith("Bearer ") else None
        call = Call(method, {}, token=token)
        try:
            call.params, body_token = await self._read_params(request)
            call.token = token = token or body_token
        except SlackError as exc:
            call.response = {"ok": False, "error": exc.error}
            self.record(call)
            return web.json_response(call.response)
        self.record(call)
        scripted = await self.guard(method, request, call)
        if scripted is not None:
            return scripted
        try:
            handler = self._methods.get(method)
            if handler is None:
                raise SlackError("unknown_method", req_method=method)
            self._check_auth(method, token)
            body: JSON = {"ok": True, **handler(call.params)}
        except SlackError as exc:
            body = {"ok": False, "error": exc.error, **exc.extra}
        call.response = body
        self.notify()
        return web.json_response(body)

    async def close_connections(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def session(self) -> aiohttp.ClientSession:
        """A client session for what the fake itself sends (HTTP-mode events)."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session
