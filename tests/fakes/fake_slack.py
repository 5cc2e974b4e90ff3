"""An in-process fake of Slack for tests: Web API, Socket Mode, file host, HTTP-mode signing.

The real slack-sdk / slack-bolt clients talk to it unchanged
(``AsyncWebClient(base_url=fake.api_url)``, ``SocketModeClient`` via ``apps.connections.open``),
so the bridge is tested against the protocol rather than against mocks of the SDK. Where real
Slack is strict (token types, message limits, Block Kit limits, unknown channels, reactions,
acks and redelivery) the fake is strict too, so code that passes here does not fail in
production for a reason the fake hid.

Typical use::

    async with FakeSlack(ack_timeout=0.5) as fake:
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
        await fake.send_event(fake.dm_message("hello"))
        await fake.wait_for(lambda: fake.posted_messages(channel=fake.dm_channel(DEFAULT_USER)))
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import mimetypes
import re
import secrets
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, TypeVar
from urllib.parse import quote, urlencode

import aiohttp
from aiohttp import WSMsgType, web

T = TypeVar("T")
JSON = dict[str, Any]

DEFAULT_USER = "U0USER1"
DEFAULT_CHANNEL = "C0CHAN1"

# Limits real Slack enforces; the bridge's splitting and rendering must respect them.
MAX_TEXT_CHARS = 40_000
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3_000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2_000
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_BLOCK_ID = 255
MAX_MARKDOWN_BLOCK_TEXT = 12_000
MAX_MARKDOWN_TEXT = 12_000  # the markdown_text argument of chat.postMessage / chat.update
MAX_ALT_TEXT = 2_000

KNOWN_BLOCK_TYPES = frozenset(
    {
        "actions",
        "context",
        "context_actions",
        "divider",
        "file",
        "header",
        "image",
        "input",
        "markdown",
        "rich_text",
        "section",
        "table",
        "video",
    }
)

# Methods that take the app-level token; every other method wants the bot token.
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})

# Pseudo-method names accepted by fail_next() for the non-API endpoints.
UPLOAD_ENDPOINT = "<upload>"
DOWNLOAD_ENDPOINT = "<download>"

_REACTION_NAME = re.compile(r"^[a-z0-9_+'\-]+(::skin-tone-[2-6])?$")
_MENTION = re.compile(r"(<@[UW][A-Z0-9]+(?:\|[^>]*)?>)")

LOGIN_PAGE_HTML = """<!DOCTYPE html>
<html lang="en-US">
<head><meta charset="utf-8"><title>Sign in | Slack</title></head>
<body class="signin">
<h1>Sign in to Fake Team</h1>
<p>fake-team.slack.com</p>
<form id="signin_form" action="/" method="post">
<input type="email" name="email" placeholder="name@work-email.com">
<button type="submit">Sign In With Email</button>
</form>
</body>
</html>
"""


# --------------------------------------------------------------------------------------------
# Records kept for assertions


@dataclass
class ApiCall:
    """One Web API request as the fake saw it (token removed from params)."""

    method: str
    params: JSON
    time: float  # time.monotonic(), so tests can measure back-off between attempts
    token: str | None
    http_status: int = 200
    response: JSON = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        err = self.response.get("error")
        return err if isinstance(err, str) else None


@dataclass
class PostedMessage:
    """A message the bot put in a channel (chat.postMessage, file share, or stream)."""

    channel: str
    ts: str
    text: str
    blocks: list[JSON] | None
    thread_ts: str | None
    mrkdwn: bool | None = None
    files: list[JSON] = field(default_factory=list)
    params: JSON = field(default_factory=dict)
    kind: str = "message"  # "message" | "file_share" | "stream"
    edits: list[JSON] = field(default_factory=list)  # earlier versions, oldest first
    deleted: bool = False
    streaming: bool = False


@dataclass
class EphemeralMessage:
    channel: str
    user: str
    text: str
    blocks: list[JSON] | None
    thread_ts: str | None
    message_ts: str


@dataclass
class ReactionChange:
    action: str  # "add" | "remove"
    channel: str
    ts: str
    name: str


@dataclass
class UploadedFile:
    """A file the bot uploaded through files.getUploadURLExternal + completeUploadExternal."""

    file_id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    alt_txt: str | None = None
    snippet_type: str | None = None
    completed: bool = False
    channel: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None


@dataclass
class AssistantStatus:
    channel_id: str
    thread_ts: str
    status: str
    loading_messages: list[str] | None = None


@dataclass
class Delivery:
    """One envelope written to a Socket Mode connection."""

    envelope: JSON
    connection_id: int
    time: float

    @property
    def envelope_id(self) -> str:
        return str(self.envelope["envelope_id"])

    @property
    def retry_attempt(self) -> int:
        return int(self.envelope.get("retry_attempt") or 0)

    @property
    def event_id(self) -> str | None:
        payload = self.envelope.get("payload")
        if isinstance(payload, dict):
            ev = payload.get("event_id")
            return ev if isinstance(ev, str) else None
        return None


@dataclass
class Ack:
    envelope_id: str
    payload: JSON | None
    time: float
    connection_id: int
    known: bool  # False when the envelope id was never sent by the fake


@dataclass
class FileDownload:
    file_id: str
    authorized: bool
    time: float


@dataclass
class ResponseUrlPost:
    path: str
    body: JSON


@dataclass
class HttpDelivery:
    """What a daemon in HTTP mode answered to an event the fake POSTed to it."""

    status: int
    body: str
    headers: Mapping[str, str]
    payload: JSON


# --------------------------------------------------------------------------------------------
# Internal state


class _ApiError(Exception):
    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass
class _Fault:
    status: int
    retry_after: int | None
    error: str | None
    remaining: int


@dataclass
class _Flood:
    every: int
    retry_after: int
    methods: frozenset[str]
    count: int = 0


@dataclass
class _SocketConn:
    id: int
    ws: web.WebSocketResponse
    request: web.Request


@dataclass
class _EventState:
    """Redelivery bookkeeping for one Events API event_id."""

    event_id: str
    payload: JSON
    attempts: int = 0  # highest retry_attempt sent so far
    acked: bool = False
    envelope_ids: list[str] = field(default_factory=list)


@dataclass
class _StoredFile:
    obj: JSON
    content: bytes


@dataclass
class _PendingUpload:
    record: UploadedFile


def slack_escape(text: str) -> str:
    """Escape text the way Slack does on the wire (&, <, >) for event builders."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() in ("1", "true", "yes")
    return bool(value)


def _ts_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def _rich_text(text: str) -> list[JSON]:
    """The rich_text block Slack clients attach to a typed message, mentions included."""
    elements: list[JSON] = []
    for part in _MENTION.split(text):
        if not part:
            continue
        m = re.fullmatch(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>", part)
        if m:
            elements.append({"type": "user", "user_id": m[1]})
        else:
            elements.append({"type": "text", "text": part})
    block_id = secrets.token_hex(3)
    return [
        {
            "type": "rich_text",
            "block_id": block_id,
            "elements": [{"type": "rich_text_section", "elements": elements}],
        }
    ]


def _validate_text_object(obj: Any, pointer: str, limit: int, errors: list[str]) -> None:
    if not isinstance(obj, dict):
        errors.append(f"must be an object [json-pointer:{pointer}]")
        return
    if obj.get("type") not in ("plain_text", "mrkdwn"):
        errors.append(f"must be one of plain_text, mrkdwn [json-pointer:{pointer}/type]")
    text = obj.get("text")
    if not isinstance(text, str):
        errors.append(f"must provide a string [json-pointer:{pointer}/text]")
    elif len(text) == 0:
        errors.append(f"must be more than 0 characters [json-pointer:{pointer}/text]")
    elif len(text) > limit:
        errors.append(f"must be less than {limit + 1} characters [json-pointer:{pointer}/text]")


def validate_blocks(blocks: Any) -> list[str]:
    """Block Kit checks real Slack makes; returns Slack-style error strings (empty when valid)."""
    errors: list[str] = []
    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"]
    if len(blocks) > MAX_BLOCKS:
        errors.append(f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]")
    for i, block in enumerate(blocks):
        ptr = f"/blocks/{i}"
        if not isinstance(block, dict):
            errors.append(f"must be an object [json-pointer:{ptr}]")
            continue
        btype = block.get("type")
        if btype not in KNOWN_BLOCK_TYPES:
            errors.append(f"unsupported type: {btype!r} [json-pointer:{ptr}/type]")
            continue
        block_id = block.get("block_id")
        if block_id is not None and (not isinstance(block_id, str) or len(block_id) > MAX_BLOCK_ID):
            errors.append(
                f"must be less than {MAX_BLOCK_ID + 1} characters [json-pointer:{ptr}/block_id]"
            )
        if btype == "section":
            text, fields = block.get("text"), block.get("fields")
            if text is None and fields is None:
                errors.append(f"must provide either text or fields [json-pointer:{ptr}]")
            if text is not None:
                _validate_text_object(text, f"{ptr}/text", MAX_SECTION_TEXT, errors)
            if fields is not None:
                if not isinstance(fields, list) or len(fields) > MAX_SECTION_FIELDS:
                    errors.append(
                        f"no more than {MAX_SECTION_FIELDS} items allowed "
                        f"[json-pointer:{ptr}/fields]"
                    )
                else:
                    for j, f in enumerate(fields):
                        _validate_text_object(f, f"{ptr}/fields/{j}", MAX_FIELD_TEXT, errors)
        elif btype == "header":
            text = block.get("text")
            if not isinstance(text, dict) or text.get("type") != "plain_text":
                errors.append(f"must be plain_text [json-pointer:{ptr}/text/type]")
            else:
                _validate_text_object(text, f"{ptr}/text", MAX_HEADER_TEXT, errors)
        elif btype == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_CONTEXT_ELEMENTS:
                errors.append(
                    f"must have between 1 and {MAX_CONTEXT_ELEMENTS} items "
                    f"[json-pointer:{ptr}/elements]"
                )
        elif btype == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_ACTIONS_ELEMENTS:
                errors.append(
                    f"must have between 1 and {MAX_ACTIONS_ELEMENTS} items "
                    f"[json-pointer:{ptr}/elements]"
                )
        elif btype == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text:
                errors.append(f"must provide a non-empty string [json-pointer:{ptr}/text]")
            elif len(text) > MAX_MARKDOWN_BLOCK_TEXT:
                errors.append(
                    f"must be less than {MAX_MARKDOWN_BLOCK_TEXT + 1} characters "
                    f"[json-pointer:{ptr}/text]"
                )
        elif btype == "rich_text":
            if not isinstance(block.get("elements"), list):
                errors.append(f"must provide an array [json-pointer:{ptr}/elements]")
        elif btype == "image":
            if not block.get("image_url") and not block.get("slack_file"):
                errors.append(f"must provide image_url or slack_file [json-pointer:{ptr}]")
            alt = block.get("alt_text")
            if not isinstance(alt, str) or not alt or len(alt) > MAX_ALT_TEXT:
                errors.append(f"must provide a valid alt_text [json-pointer:{ptr}/alt_text]")
    return errors


# --------------------------------------------------------------------------------------------


class FakeSlack:
    """A fake Slack workspace with one app installed, served on 127.0.0.1 (random port)."""

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-1-fake-bot-token",
        app_token: str = "xapp-1-A1-fake-app-token",
        team_id: str = "T1",
        team_name: str = "Fake Team",
        app_id: str = "A1",
        bot_user_id: str = "U0BOT",
        bot_id: str = "B0BOT",
        bot_name: str = "picobridge",
        verification_token: str = "fake-verification-token",
        ack_timeout: float = 3.0,
        max_retries: int = 3,
        retry_reason: str = "timeout",
        echo_bot_messages: bool = False,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.team_id = team_id
        self.team_name = team_name
        self.app_id = app_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.verification_token = verification_token
        # Tests shorten these to exercise redelivery without waiting Slack's real 3 s.
        self.ack_timeout = ack_timeout
        self.max_retries = max_retries
        self.retry_reason = retry_reason
        # Real Slack echoes the bot's own posts back as message events; off by default so most
        # tests stay deterministic, on for tests that check the bridge ignores itself.
        self.echo_bot_messages = echo_bot_messages
        # When False the fake stops answering websocket pings, which makes the SDK see a stale
        # connection the way a half-dead network path does.
        self.answer_pings = True

        # --- logs for assertions
        self.calls: list[ApiCall] = []
        self.messages: list[PostedMessage] = []
        self.ephemeral_messages: list[EphemeralMessage] = []
        self.reaction_log: list[ReactionChange] = []
        self.uploaded_files: list[UploadedFile] = []
        self.assistant_statuses: list[AssistantStatus] = []
        self.deliveries: list[Delivery] = []
        self.redeliveries: list[Delivery] = []
        self.acks: list[Ack] = []
        self.ack_timeouts: list[str] = []  # envelope ids that were not acked in time
        self.downloads: list[FileDownload] = []
        self.response_url_posts: list[ResponseUrlPost] = []
        self.socket_connects = 0

        # --- workspace state
        self.channels: dict[str, JSON] = {}
        self.users: dict[str, JSON] = {}
        self.revoked_tokens: set[str] = set()
        self._store: dict[str, dict[str, JSON]] = {}  # channel -> ts -> message as Slack keeps it
        self._reactions: dict[tuple[str, str], dict[str, list[str]]] = {}
        self._files: dict[str, _StoredFile] = {}
        self._uploads: dict[str, _PendingUpload] = {}  # upload id (in the URL) -> record
        self._uploads_by_file: dict[str, UploadedFile] = {}
        self._tickets: set[str] = set()
        self._connections: list[_SocketConn] = []
        self._pending: list[JSON] = []  # envelopes waiting for a socket
        self._events: dict[str, _EventState] = {}
        self._envelope_event: dict[str, str] = {}  # envelope id -> event id
        self._acked_envelopes: set[str] = set()
        self._faults: dict[str, list[_Fault]] = {}
        self._flood: _Flood | None = None
        self._timers: set[asyncio.Future[Any]] = set()

        self._ids = itertools.count(1)
        self._last_ts_us = 0
        self._cond = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._port = 0

        self.users[bot_user_id] = self._user_obj(bot_user_id, bot_name, is_bot=True)

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> FakeSlack:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/socket", self._handle_socket)
        app.router.add_post("/upload/v1/{upload_id}", self._handle_upload)
        app.router.add_get("/files-pri/{team_file}/download/{name}", self._handle_download)
        app.router.add_get("/files-pri/{team_file}/{name}", self._handle_download)
        app.router.add_post("/commands/{rest:.*}", self._handle_response_url)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        self._session = aiohttp.ClientSession()
        return self

    async def stop(self) -> None:
        for task in list(self._timers):
            task.cancel()
        for task in list(self._timers):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for conn in list(self._connections):
            with contextlib.suppress(Exception):
                await conn.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY)
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def host(self) -> str:
        """host:port of the fake, which also serves files (for a `slack.file_hosts` allow-list)."""
        return f"127.0.0.1:{self._port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    # ---------------------------------------------------------------- waiting

    async def notify(self) -> None:
        """Wake wait_for() callers; the fake does this itself on every call, ack and connect."""
        async with self._cond:
            self._cond.notify_all()

    async def wait_for(self, predicate: Callable[[], T | None], timeout: float = 10.0) -> T:
        """Wait until predicate() is truthy and return its value.

        The predicate is re-checked whenever the fake's state changes (API call, upload, download,
        socket connect/disconnect, delivery, ack), never by polling; a predicate over state the
        fake does not own only wakes on those, or on an explicit ``await fake.notify()``.
        """
        async with self._cond:
            try:
                async with asyncio.timeout(timeout):
                    while True:
                        result = predicate()
                        if result:
                            return result
                        await self._cond.wait()
            except TimeoutError:
                recent = ", ".join(f"{c.method}->{c.error or 'ok'}" for c in self.calls[-10:])
                raise TimeoutError(
                    f"FakeSlack.wait_for: condition not met within {timeout}s "
                    f"(last calls: {recent or 'none'}; sockets: {len(self._connections)})"
                ) from None

    async def wait_for_call(
        self,
        method: str,
        predicate: Callable[[ApiCall], bool] | None = None,
        timeout: float = 10.0,
    ) -> ApiCall:
        def find() -> ApiCall | None:
            for call in self.calls:
                if call.method == method and (predicate is None or predicate(call)):
                    return call
            return None

        return await self.wait_for(find, timeout)

    async def wait_for_message(
        self,
        channel: str | None = None,
        thread_ts: str | None = None,
        predicate: Callable[[PostedMessage], bool] | None = None,
        timeout: float = 10.0,
    ) -> PostedMessage:
        def find() -> PostedMessage | None:
            for m in self.posted_messages(channel, thread_ts):
                if predicate is None or predicate(m):
                    return m
            return None

        return await self.wait_for(find, timeout)

    async def wait_for_socket(self, count: int = 1, timeout: float = 10.0) -> None:
        await self.wait_for(lambda: len(self._connections) >= count, timeout)

    async def wait_for_ack(self, envelope_id: str, timeout: float = 10.0) -> Ack:
        def find() -> Ack | None:
            return next((a for a in self.acks if a.envelope_id == envelope_id), None)

        return await self.wait_for(find, timeout)

    # ---------------------------------------------------------------- queries

    def calls_to(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    def posted_messages(
        self, channel: str | None = None, thread_ts: str | None = None
    ) -> list[PostedMessage]:
        """Messages the bot posted (not deleted), optionally in one channel / thread."""
        return [
            m
            for m in self.messages
            if not m.deleted
            and (channel is None or m.channel == channel)
            and (thread_ts is None or m.thread_ts == thread_ts)
        ]

    def reactions_on(self, channel: str, ts: str, user: str | None = None) -> list[str]:
        """Reaction names currently on a message (by the bot unless another user is given)."""
        who = user or self.bot_user_id
        return [n for n, users in self._reactions.get((channel, ts), {}).items() if who in users]

    def file_content(self, file_id: str) -> bytes | None:
        stored = self._files.get(file_id)
        return stored.content if stored else None

    def message(self, channel: str, ts: str) -> JSON | None:
        """A message as Slack stores it (injected or posted)."""
        return self._store.get(channel, {}).get(ts)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    @property
    def pending_envelopes(self) -> list[JSON]:
        """Envelopes waiting for a Socket Mode connection (sent when a client connects)."""
        return list(self._pending)

    @property
    def acked_envelope_ids(self) -> list[str]:
        return [a.envelope_id for a in self.acks]

    # ---------------------------------------------------------------- faults

    def fail_next(
        self,
        method: str,
        status: int = 429,
        *,
        retry_after: int | None = 1,
        times: int = 1,
        error: str | None = None,
    ) -> None:
        """Make the next `times` calls of `method` fail.

        status 429 -> Retry-After header + {"ok":false,"error":"ratelimited"};
        500/503 -> server error with a JSON body; 200 with `error` -> a plain API error
        (e.g. error="channel_not_found"). `method` may be UPLOAD_ENDPOINT / DOWNLOAD_ENDPOINT.
        """
        if error is None:
            error = {429: "ratelimited", 500: "internal_error", 503: "service_unavailable"}.get(
                status, "fatal_error"
            )
        self._faults.setdefault(method, []).append(
            _Fault(status, retry_after if status == 429 else None, error, times)
        )

    def set_flood(
        self,
        every: int | None,
        *,
        retry_after: int = 1,
        methods: Iterable[str] = ("chat.postMessage",),
    ) -> None:
        """Every `every`-th call of the methods gets 429 (None switches flood mode off)."""
        self._flood = None if every is None else _Flood(every, retry_after, frozenset(methods))

    def revoke(self, token: str) -> None:
        self.revoked_tokens.add(token)

    def _take_fault(self, method: str) -> _Fault | None:
        queue = self._faults.get(method)
        if queue:
            fault = queue[0]
            fault.remaining -= 1
            if fault.remaining <= 0:
                queue.pop(0)
            return fault
        flood = self._flood
        if flood is not None and method in flood.methods:
            flood.count += 1
            if flood.count % flood.every == 0:
                return _Fault(429, flood.retry_after, "ratelimited", 1)
        return None

    @staticmethod
    def _fault_response(fault: _Fault) -> web.Response:
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        return web.json_response(
            {"ok": False, "error": fault.error}, status=fault.status, headers=headers
        )

    # ---------------------------------------------------------------- ids and registry

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}0{next(self._ids):07X}"

    def next_ts(self) -> str:
        """A fresh message ts: wall-clock based (so age checks work), unique and increasing."""
        now_us = time.time_ns() // 1000
        self._last_ts_us = max(now_us, self._last_ts_us + 1)
        v = self._last_ts_us
        return f"{v // 1_000_000}.{v % 1_000_000:06d}"

    def _user_obj(self, user_id: str, name: str, *, is_bot: bool = False) -> JSON:
        return {
            "id": user_id,
            "team_id": self.team_id,
            "name": name,
            "deleted": False,
            "real_name": name.title(),
            "tz": "Europe/London",
            "tz_label": "Greenwich Mean Time",
            "tz_offset": 0,
            "is_admin": False,
            "is_owner": False,
            "is_bot": is_bot,
            "is_app_user": False,
            "updated": int(time.time()),
            "profile": {
                "real_name": name.title(),
                "display_name": name,
                "real_name_normalized": name.title(),
                "display_name_normalized": name,
                "image_72": f"{self.url}/avatars/{user_id}_72.png",
                "team": self.team_id,
                **({"bot_id": self.bot_id} if is_bot else {}),
            },
        }

    def register_user(
        self, user_id: str, name: str | None = None, *, is_bot: bool = False, **extra: Any
    ) -> JSON:
        user = self.users.get(user_id)
        if user is None or name is not None:
            user = self._user_obj(user_id, name or user_id.lower(), is_bot=is_bot)
            user.update(extra)
            self.users[user_id] = user
        return user

    def register_channel(
        self,
        channel_id: str,
        *,
        name: str | None = None,
        user: str | None = None,
        is_member: bool = True,
        is_private: bool | None = None,
    ) -> JSON:
        """Make a channel known. IDs starting with D are DMs (then `user` is the other party)."""
        existing = self.channels.get(channel_id)
        if existing is not None:
            if name is not None and not existing.get("is_im"):
                existing["name"] = name
            if user is not None and existing.get("is_im"):
                existing["user"] = user
            existing["is_member"] = is_member or existing.get("is_member", False)
            return existing
        created = int(time.time())
        if channel_id.startswith("D"):
            info: JSON = {
                "id": channel_id,
                "created": created,
                "is_im": True,
                "is_org_shared": False,
                "context_team_id": self.team_id,
                "user": user or DEFAULT_USER,
                "is_user_deleted": False,
                "priority": 0,
            }
            if user:
                self.register_user(user)
        else:
            private = channel_id.startswith("G") if is_private is None else is_private
            cname = name or channel_id.lower()
            info = {
                "id": channel_id,
                "name": cname,
                "name_normalized": cname,
                "is_channel": not private,
                "is_group": private,
                "is_im": False,
                "is_mpim": False,
                "is_private": private,
                "created": created,
                "is_archived": False,
                "is_general": False,
                "is_shared": False,
                "is_org_shared": False,
                "is_member": is_member,
                "context_team_id": self.team_id,
                "topic": {"value": "", "creator": "", "last_set": 0},
                "purpose": {"value": "", "creator": "", "last_set": 0},
            }
        self.channels[channel_id] = info
        self._store.setdefault(channel_id, {})
        return info

    def dm_channel(self, user: str = DEFAULT_USER) -> str:
        """The bot's DM channel with `user` (created on first use, stable per user)."""
        for cid, info in self.channels.items():
            if info.get("is_im") and info.get("user") == user:
                return cid
        cid = "D" + user[1:]
        self.register_channel(cid, user=user)
        return cid

    def channel_type(self, channel_id: str) -> str:
        info = self.channels.get(channel_id)
        if channel_id.startswith("D") or (info and info.get("is_im")):
            return "im"
        if info and info.get("is_mpim"):
            return "mpim"
        if channel_id.startswith("G") or (info and info.get("is_private")):
            return "group"
        return "channel"

    def _resolve_channel(self, value: Any) -> str:
        """Channel param -> known channel id (IDs, #names and user IDs, as Slack allows)."""
        if not isinstance(value, str) or not value:
            raise _ApiError("channel_not_found")
        if value in self.channels:
            return value
        name = value.lstrip("#")
        for cid, info in self.channels.items():
            if info.get("name") == name:
                return cid
        if value[0] in "UW" and value in self.users:
            return self.dm_channel(value)
        raise _ApiError("channel_not_found")

    # ---------------------------------------------------------------- file host

    def add_file(
        self,
        content: bytes,
        name: str = "file.txt",
        mimetype: str = "text/plain",
        *,
        title: str | None = None,
        user: str = DEFAULT_USER,
        filetype: str | None = None,
    ) -> JSON:
        """Host a file and return the Slack file object (for files[] in message events)."""
        file_id = self._next_id("F")
        return self._host_file(
            file_id, content, name, mimetype, title=title, user=user, filetype=filetype
        )

    def _host_file(
        self,
        file_id: str,
        content: bytes,
        name: str,
        mimetype: str,
        *,
        title: str | None,
        user: str,
        filetype: str | None = None,
    ) -> JSON:
        now = int(time.time())
        quoted = quote(name)
        ftype = filetype or (name.rsplit(".", 1)[-1].lower() if "." in name else "binary")
        base = f"{self.url}/files-pri/{self.team_id}-{file_id}"
        obj: JSON = {
            "id": file_id,
            "created": now,
            "timestamp": now,
            "name": name,
            "title": title or name,
            "mimetype": mimetype,
            "filetype": ftype,
            "pretty_type": ftype.upper(),
            "user": user,
            "user_team": self.team_id,
            "editable": False,
            "size": len(content),
            "mode": "hosted",
            "is_external": False,
            "external_type": "",
            "is_public": False,
            "public_url_shared": False,
            "display_as_bot": False,
            "username": "",
            "url_private": f"{base}/{quoted}",
            "url_private_download": f"{base}/download/{quoted}",
            "permalink": f"https://fake-team.slack.com/files/{user}/{file_id}/{quoted}",
            "permalink_public": f"https://slack-files.com/{self.team_id}-{file_id}-fake",
            "is_starred": False,
            "has_rich_preview": False,
            "file_access": "visible",
        }
        self._files[file_id] = _StoredFile(obj, content)
        return obj

    async def _handle_download(self, request: web.Request) -> web.StreamResponse:
        team_file = request.match_info["team_file"]
        file_id = team_file.split("-", 1)[-1]
        fault = self._take_fault(DOWNLOAD_ENDPOINT)
        if fault is not None:
            return self._fault_response(fault)
        auth = request.headers.get("Authorization", "")
        authorized = (
            auth == f"Bearer {self.bot_token}" and self.bot_token not in self.revoked_tokens
        )
        self.downloads.append(FileDownload(file_id, authorized, time.monotonic()))
        await self.notify()
        if not authorized:
            # Real Slack answers an unauthenticated file URL with its sign-in page and 200, so a
            # client that only checks the status saves HTML as the user's file.
            return web.Response(text=LOGIN_PAGE_HTML, content_type="text/html", charset="utf-8")
        stored = self._files.get(file_id)
        if stored is None or not team_file.startswith(f"{self.team_id}-"):
            return web.Response(status=404, text="file not found")
        return web.Response(
            body=stored.content,
            content_type=str(stored.obj["mimetype"]),
            headers={
                "Content-Disposition": f"attachment; filename*=UTF-8''{quote(stored.obj['name'])}"
            },
        )

    # ---------------------------------------------------------------- Web API plumbing

    async def _read_params(self, request: web.Request) -> tuple[JSON, str | None]:
        """Merge query string and body the way Slack does; returns (params, token from body)."""
        params: JSON = dict(request.query)
        is_json = False
        if request.method == "POST" and request.can_read_body:
            ctype = request.content_type
            if ctype == "application/json":
                is_json = True
                try:
                    body = await request.json()
                except ValueError as exc:
                    raise _ApiError("invalid_json") from exc
                if not isinstance(body, dict):
                    raise _ApiError("invalid_json")
                params.update(body)
            elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
                form = await request.post()
                for k, v in form.items():
                    if isinstance(v, web.FileField):
                        params[k] = v.file.read()
                    else:
                        params[k] = v if isinstance(v, str) else bytes(v)
        # Slack ignores a token inside a JSON body: JSON callers must use the header.
        body_token = params.pop("token", None)
        if is_json:
            body_token = None
        for key in ("blocks", "attachments", "files", "loading_messages", "metadata", "chunks"):
            value = params.get(key)
            if isinstance(value, str) and value:
                try:
                    params[key] = json.loads(value)
                except ValueError as exc:
                    if key == "blocks":
                        raise _ApiError("invalid_blocks_format") from exc
                    raise _ApiError("invalid_arguments") from exc
        return params, (body_token if isinstance(body_token, str) else None)

    def _check_auth(self, method: str, token: str | None) -> None:
        if not token:
            raise _ApiError("not_authed")
        if token in self.revoked_tokens:
            raise _ApiError("token_revoked")
        wanted = self.app_token if method in APP_TOKEN_METHODS else self.bot_token
        if token == wanted:
            return
        if token in (self.app_token, self.bot_token):
            raise _ApiError("not_allowed_token_type")
        raise _ApiError("invalid_auth")

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        header = request.headers.get("Authorization", "")
        token: str | None = header[7:].strip() if header.startswith("Bearer ") else None
        call = ApiCall(method=method, params={}, time=time.monotonic(), token=token)
        try:
            params, body_token = await self._read_params(request)
            call.params = params
            if token is None:
                token = body_token
                call.token = token
        except _ApiError as exc:
            call.response = {"ok": False, "error": exc.error}
            self.calls.append(call)
            await self.notify()
            return web.json_response(call.response)
        self.calls.append(call)
        fault = self._take_fault(method)
        if fault is not None:
            call.http_status = fault.status
            call.response = {"ok": False, "error": fault.error}
            await self.notify()
            return self._fault_response(fault)
        try:
            handler = self._methods.get(method)
            if handler is None:
                raise _ApiError("unknown_method", req_method=method)
            self._check_auth(method, token)
            body: JSON = {"ok": True, **handler(self, params)}
        except _ApiError as exc:
            body = {"ok": False, "error": exc.error, **exc.extra}
        call.response = body
        await self.notify()
        return web.json_response(body)

    # ---------------------------------------------------------------- Web API methods

    def _m_auth_test(self, params: JSON) -> JSON:
        return {
            "url": "https://fake-team.slack.com/",
            "team": self.team_name,
            "user": self.bot_name,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _m_apps_connections_open(self, params: JSON) -> JSON:
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        return {"url": f"ws://127.0.0.1:{self._port}/socket?ticket={ticket}&app_id={self.app_id}"}

    def _bot_message(
        self, text: str, ts: str, blocks: list[JSON] | None, thread_ts: str | None
    ) -> JSON:
        msg: JSON = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "text": text,
            "ts": ts,
            "team": self.team_id,
            "bot_profile": {
                "id": self.bot_id,
                "app_id": self.app_id,
                "name": self.bot_name,
                "deleted": False,
                "team_id": self.team_id,
            },
        }
        if blocks is not None:
            msg["blocks"] = blocks
        if thread_ts:
            msg["thread_ts"] = thread_ts
            msg["parent_user_id"] = self._store_parent_user(ts, thread_ts)
        return msg

    def _store_parent_user(self, ts: str, thread_ts: str) -> str:
        for msgs in self._store.values():
            parent = msgs.get(thread_ts)
            if parent is not None:
                return str(parent.get("user") or "")
        return ""

    def _check_content(
        self, params: JSON, *, require: bool = True
    ) -> tuple[str, list[JSON] | None]:
        text = params.get("text")
        text = "" if text is None else str(text)
        blocks = params.get("blocks")
        if blocks == "":
            blocks = None
        if blocks is not None:
            errors = validate_blocks(blocks)
            if errors:
                raise _ApiError(
                    "invalid_blocks",
                    errors=errors,
                    response_metadata={"messages": [f"[ERROR] {e}" for e in errors]},
                )
        if len(text) > MAX_TEXT_CHARS:
            raise _ApiError("msg_too_long")
        markdown = params.get("markdown_text")
        if markdown is not None:
            # markdown_text replaces text and blocks; Slack refuses a mix of them.
            if text or blocks is not None:
                raise _ApiError("markdown_text_conflict")
            text = str(markdown)
            if len(text) > MAX_MARKDOWN_TEXT:
                raise _ApiError("msg_too_long")
        if require and not text and not blocks and not params.get("attachments"):
            raise _ApiError("no_text")
        return text, blocks

    def _keep(self, channel: str, msg: JSON) -> None:
        """Put a message in the channel history, maintaining thread metadata on the parent."""
        self._store.setdefault(channel, {})[msg["ts"]] = msg
        thread_ts = msg.get("thread_ts")
        if thread_ts and thread_ts != msg["ts"]:
            parent = self._store[channel].get(thread_ts)
            if parent is not None:
                parent["thread_ts"] = thread_ts
                parent["reply_count"] = int(parent.get("reply_count", 0)) + 1
                users = parent.setdefault("reply_users", [])
                who = msg.get("user") or msg.get("bot_id")
                if who and who not in users:
                    users.append(who)
                parent["reply_users_count"] = len(users)
                parent["latest_reply"] = msg["ts"]

    def _post(
        self,
        channel: str,
        text: str,
        blocks: list[JSON] | None,
        thread_ts: str | None,
        params: JSON,
        *,
        kind: str = "message",
        files: list[JSON] | None = None,
    ) -> tuple[PostedMessage, JSON]:
        ts = self.next_ts()
        msg = self._bot_message(text, ts, blocks, thread_ts)
        if files:
            msg["files"] = files
            msg["upload"] = True
            msg["display_as_bot"] = False
        self._keep(channel, msg)
        mrkdwn = params.get("mrkdwn")
        posted = PostedMessage(
            channel=channel,
            ts=ts,
            text=text,
            blocks=blocks,
            thread_ts=thread_ts,
            mrkdwn=None if mrkdwn is None else _truthy(mrkdwn),
            files=list(files or []),
            params=dict(params),
            kind=kind,
        )
        self.messages.append(posted)
        if self.echo_bot_messages:
            echo = {
                **msg,
                "channel": channel,
                "event_ts": ts,
                "channel_type": self.channel_type(channel),
            }
            self._spawn(self.send_event(echo))
        return posted, msg

    def _writable_channel(self, params: JSON) -> str:
        channel = self._resolve_channel(params.get("channel"))
        info = self.channels[channel]
        if info.get("is_archived"):
            raise _ApiError("is_archived")
        if not info.get("is_im") and not info.get("is_member", True):
            raise _ApiError("not_in_channel")
        return channel

    def _m_chat_post_message(self, params: JSON) -> JSON:
        channel = self._writable_channel(params)
        text, blocks = self._check_content(params)
        thread_ts = _ts_str(params.get("thread_ts"))
        _, msg = self._post(channel, text, blocks, thread_ts, params)
        return {"channel": channel, "ts": msg["ts"], "message": msg}

    def _own_message(self, params: JSON, verb: str) -> tuple[str, str, PostedMessage, JSON]:
        channel = self._resolve_channel(params.get("channel"))
        ts = _ts_str(params.get("ts"))
        stored = self._store.get(channel, {}).get(ts or "")
        if ts is None or stored is None:
            raise _ApiError("message_not_found")
        posted = next(
            (m for m in self.messages if m.channel == channel and m.ts == ts and not m.deleted),
            None,
        )
        if posted is None:
            raise _ApiError(f"cant_{verb}_message")
        return channel, ts, posted, stored

    def _m_chat_update(self, params: JSON) -> JSON:
        channel, ts, posted, stored = self._own_message(params, "update")
        text, blocks = self._check_content(params)
        posted.edits.append({"text": posted.text, "blocks": posted.blocks, "params": posted.params})
        posted.text, posted.params = text, dict(params)
        if "blocks" in params:
            posted.blocks = blocks
        stored["text"] = text
        if blocks is not None:
            stored["blocks"] = blocks
        stored["edited"] = {"user": self.bot_user_id, "ts": self.next_ts()}
        msg = {k: v for k, v in stored.items() if k != "ts"}
        return {"channel": channel, "ts": ts, "text": text, "message": msg}

    def _m_chat_delete(self, params: JSON) -> JSON:
        channel, ts, posted, _ = self._own_message(params, "delete")
        posted.deleted = True
        del self._store[channel][ts]
        return {"channel": channel, "ts": ts}

    def _m_chat_post_ephemeral(self, params: JSON) -> JSON:
        channel = self._writable_channel(params)
        user = params.get("user")
        if not isinstance(user, str) or user not in self.users:
            raise _ApiError("user_not_in_channel")
        text, blocks = self._check_content(params)
        message_ts = self.next_ts()
        self.ephemeral_messages.append(
            EphemeralMessage(
                channel, user, text, blocks, _ts_str(params.get("thread_ts")), message_ts
            )
        )
        return {"message_ts": message_ts}

    def _m_chat_start_stream(self, params: JSON) -> JSON:
        channel = self._writable_channel(params)
        thread_ts = _ts_str(params.get("thread_ts"))
        if thread_ts is None:
            raise _ApiError("invalid_arguments")
        text = str(params.get("markdown_text") or "")
        if len(text) > MAX_TEXT_CHARS:
            raise _ApiError("msg_too_long")
        posted, msg = self._post(channel, text, None, thread_ts, params, kind="stream")
        posted.streaming = True
        return {"channel": channel, "ts": msg["ts"]}

    def _stream(self, params: JSON) -> tuple[str, str, PostedMessage, JSON]:
        channel, ts, posted, stored = self._own_message(params, "update")
        if not posted.streaming:
            raise _ApiError("message_not_in_streaming_state")
        return channel, ts, posted, stored

    def _m_chat_append_stream(self, params: JSON) -> JSON:
        channel, ts, posted, stored = self._stream(params)
        new_text = posted.text + str(params.get("markdown_text") or "")
        if len(new_text) > MAX_TEXT_CHARS:
            raise _ApiError("msg_too_long")
        posted.edits.append({"text": posted.text, "blocks": posted.blocks, "params": posted.params})
        posted.text = stored["text"] = new_text
        return {"channel": channel, "ts": ts}

    def _m_chat_stop_stream(self, params: JSON) -> JSON:
        channel, ts, posted, stored = self._stream(params)
        new_text = posted.text + str(params.get("markdown_text") or "")
        blocks = params.get("blocks")
        if blocks is not None:
            errors = validate_blocks(blocks)
            if errors:
                raise _ApiError("invalid_blocks", errors=errors)
            posted.blocks = stored["blocks"] = blocks
        posted.edits.append({"text": posted.text, "blocks": posted.blocks, "params": posted.params})
        posted.text = stored["text"] = new_text
        posted.streaming = False
        return {"channel": channel, "ts": ts, "message": stored}

    def _reaction_target(self, params: JSON) -> tuple[str, str, str]:
        channel = self._resolve_channel(params.get("channel"))
        ts = _ts_str(params.get("timestamp"))
        name = params.get("name")
        if not isinstance(name, str) or not _REACTION_NAME.match(name):
            raise _ApiError("invalid_name")
        if ts is None or ts not in self._store.get(channel, {}):
            raise _ApiError("message_not_found")
        return channel, ts, name

    def _m_reactions_add(self, params: JSON) -> JSON:
        channel, ts, name = self._reaction_target(params)
        users = self._reactions.setdefault((channel, ts), {}).setdefault(name, [])
        if self.bot_user_id in users:
            raise _ApiError("already_reacted")
        users.append(self.bot_user_id)
        self.reaction_log.append(ReactionChange("add", channel, ts, name))
        return {}

    def _m_reactions_remove(self, params: JSON) -> JSON:
        channel, ts, name = self._reaction_target(params)
        on_msg = self._reactions.get((channel, ts), {})
        users = on_msg.get(name, [])
        if self.bot_user_id not in users:
            raise _ApiError("no_reaction")
        users.remove(self.bot_user_id)
        if not users:
            del on_msg[name]
        self.reaction_log.append(ReactionChange("remove", channel, ts, name))
        return {}

    def _public_message(self, channel: str, msg: JSON) -> JSON:
        out = {k: v for k, v in msg.items() if k not in ("channel", "event_ts", "channel_type")}
        reactions = self._reactions.get((channel, msg["ts"]))
        if reactions:
            out["reactions"] = [
                {"name": n, "users": list(u), "count": len(u)} for n, u in reactions.items() if u
            ]
        return out

    def _m_conversations_replies(self, params: JSON) -> JSON:
        channel = self._resolve_channel(params.get("channel"))
        ts = _ts_str(params.get("ts"))
        history = self._store.get(channel, {})
        if ts is None or ts not in history:
            raise _ApiError("thread_not_found")
        thread = sorted(
            (m for m in history.values() if m["ts"] == ts or m.get("thread_ts") == ts),
            key=lambda m: float(m["ts"]),
        )
        oldest, latest = _ts_str(params.get("oldest")), _ts_str(params.get("latest"))
        inclusive = _truthy(params.get("inclusive", False))
        if oldest:
            thread = [
                m
                for m in thread
                if float(m["ts"]) > float(oldest) or (inclusive and m["ts"] == oldest)
            ]
        if latest:
            thread = [
                m
                for m in thread
                if float(m["ts"]) < float(latest) or (inclusive and m["ts"] == latest)
            ]
        start = 0
        cursor = params.get("cursor")
        if cursor:
            try:
                start = int(base64.b64decode(str(cursor)).decode().split(":", 1)[1])
            except (ValueError, IndexError) as exc:
                raise _ApiError("invalid_cursor") from exc
        limit = int(params.get("limit") or 1000)
        page = thread[start : start + limit]
        more = start + limit < len(thread)
        next_cursor = base64.b64encode(f"next:{start + limit}".encode()).decode() if more else ""
        return {
            "messages": [self._public_message(channel, m) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": next_cursor},
        }

    def _m_conversations_info(self, params: JSON) -> JSON:
        channel = self._resolve_channel(params.get("channel"))
        return {"channel": dict(self.channels[channel])}

    def _m_conversations_open(self, params: JSON) -> JSON:
        users = str(params.get("users") or "").split(",")
        if len(users) != 1 or users[0] not in self.users:
            raise _ApiError("user_not_found")
        return {"channel": {"id": self.dm_channel(users[0])}}

    def _m_users_info(self, params: JSON) -> JSON:
        user = params.get("user")
        if not isinstance(user, str) or user not in self.users:
            raise _ApiError("user_not_found")
        return {"user": self.users[user]}

    def _m_assistant_set_status(self, params: JSON) -> JSON:
        channel_id, thread_ts = params.get("channel_id"), _ts_str(params.get("thread_ts"))
        if not channel_id or thread_ts is None or "status" not in params:
            raise _ApiError("invalid_arguments")
        channel = self._resolve_channel(channel_id)
        loading = params.get("loading_messages")
        self.assistant_statuses.append(
            AssistantStatus(
                channel,
                thread_ts,
                str(params["status"]),
                list(loading) if isinstance(loading, list) else None,
            )
        )
        return {}

    def _m_assistant_noop(self, params: JSON) -> JSON:
        self._resolve_channel(params.get("channel_id"))
        return {}

    def _m_files_get_upload_url(self, params: JSON) -> JSON:
        filename = params.get("filename")
        try:
            length = int(params.get("length"))  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise _ApiError("invalid_arguments") from exc
        if not filename or length <= 0:
            raise _ApiError("invalid_arguments")
        file_id = self._next_id("F")
        upload_id = secrets.token_urlsafe(12)
        record = UploadedFile(
            file_id=file_id,
            filename=str(filename),
            length=length,
            alt_txt=params.get("alt_txt"),
            snippet_type=params.get("snippet_type"),
        )
        self._uploads[upload_id] = _PendingUpload(record)
        self._uploads_by_file[file_id] = record
        self.uploaded_files.append(record)
        return {"upload_url": f"{self.url}/upload/v1/{upload_id}", "file_id": file_id}

    async def _handle_upload(self, request: web.Request) -> web.Response:
        fault = self._take_fault(UPLOAD_ENDPOINT)
        if fault is not None:
            return self._fault_response(fault)
        pending = self._uploads.get(request.match_info["upload_id"])
        if pending is None:
            return web.Response(status=404, text="upload url not found")
        data: bytes | None = None
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            async for part in reader:
                if isinstance(part, aiohttp.BodyPartReader) and (
                    part.filename or part.name in ("file", "filename")
                ):
                    data = bytes(await part.read())
                    break
        else:
            data = await request.read()
        if not data:
            return web.Response(status=400, text="empty upload")
        pending.record.content = data
        await self.notify()
        # Slack's upload host answers in plain text; slack-sdk only checks for status 200.
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    def _m_files_complete_upload(self, params: JSON) -> JSON:
        files = params.get("files")
        if not isinstance(files, list) or not files:
            raise _ApiError("invalid_arguments")
        records: list[tuple[UploadedFile, str | None]] = []
        for item in files:
            fid = item.get("id") if isinstance(item, dict) else None
            record = self._uploads_by_file.get(str(fid))
            if record is None or record.content is None or record.completed:
                raise _ApiError("file_not_found")
            records.append((record, item.get("title")))
        channels: list[str] = []
        if params.get("channel_id"):
            channels.append(self._writable_channel({"channel": params["channel_id"]}))
        elif params.get("channels"):
            for c in str(params["channels"]).split(","):
                channels.append(self._writable_channel({"channel": c.strip()}))
        thread_ts = _ts_str(params.get("thread_ts"))
        comment = params.get("initial_comment")
        comment = None if comment is None else str(comment)
        if comment is not None and len(comment) > MAX_TEXT_CHARS:
            raise _ApiError("msg_too_long")
        objs: list[JSON] = []
        for record, title in records:
            record.completed = True
            record.title = title or record.filename
            mimetype = mimetypes.guess_type(record.filename)[0] or "application/octet-stream"
            assert record.content is not None
            objs.append(
                self._host_file(
                    record.file_id,
                    record.content,
                    record.filename,
                    mimetype,
                    title=record.title,
                    user=self.bot_user_id,
                )
            )
        for channel in channels:
            _, msg = self._post(
                channel, comment or "", None, thread_ts, params, kind="file_share", files=objs
            )
            for record, _ in records:
                record.channel, record.thread_ts, record.initial_comment = (
                    channel,
                    thread_ts,
                    comment,
                )
            share = {
                "ts": msg["ts"],
                "channel_name": self.channels[channel].get("name", ""),
                "team_id": self.team_id,
                "share_user_id": self.bot_user_id,
            }
            if thread_ts:
                share["thread_ts"] = thread_ts
            visibility = "public" if self.channel_type(channel) == "channel" else "private"
            for obj in objs:
                obj.setdefault("shares", {}).setdefault(visibility, {}).setdefault(
                    channel, []
                ).append(share)
                obj.setdefault("channels" if visibility == "public" else "groups", []).append(
                    channel
                )
        # Like Slack, only id and title come back; callers wanting more use files.info.
        return {"files": [{"id": r.file_id, "title": r.title} for r, _ in records]}

    def _m_files_info(self, params: JSON) -> JSON:
        stored = self._files.get(str(params.get("file")))
        if stored is None:
            raise _ApiError("file_not_found")
        return {"file": stored.obj, "comments": [], "response_metadata": {"next_cursor": ""}}

    _methods: ClassVar[dict[str, Callable[[FakeSlack, JSON], JSON]]] = {
        "api.test": lambda self, params: {"args": params},
        "auth.test": _m_auth_test,
        "apps.connections.open": _m_apps_connections_open,
        "chat.postMessage": _m_chat_post_message,
        "chat.update": _m_chat_update,
        "chat.delete": _m_chat_delete,
        "chat.postEphemeral": _m_chat_post_ephemeral,
        "chat.startStream": _m_chat_start_stream,
        "chat.appendStream": _m_chat_append_stream,
        "chat.stopStream": _m_chat_stop_stream,
        "reactions.add": _m_reactions_add,
        "reactions.remove": _m_reactions_remove,
        "conversations.replies": _m_conversations_replies,
        "conversations.info": _m_conversations_info,
        "conversations.open": _m_conversations_open,
        "users.info": _m_users_info,
        "assistant.threads.setStatus": _m_assistant_set_status,
        "assistant.threads.setTitle": _m_assistant_noop,
        "assistant.threads.setSuggestedPrompts": _m_assistant_noop,
        "files.getUploadURLExternal": _m_files_get_upload_url,
        "files.completeUploadExternal": _m_files_complete_upload,
        "files.info": _m_files_info,
    }

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.Response(status=400, text="invalid_payload")
        self.response_url_posts.append(ResponseUrlPost(request.path, body))
        await self.notify()
        return web.Response(text="ok", content_type="text/plain")

    # ---------------------------------------------------------------- Socket Mode

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid ticket")
        # autoping off so the fake decides whether to answer pings (see answer_pings).
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        conn = _SocketConn(next(self._ids), ws, request)
        # hello goes out before the connection is eligible for envelopes, as on real Slack.
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._connections) + 1,
                "debug_info": {
                    "host": f"fake-applink-{conn.id}",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
                "connection_info": {"app_id": self.app_id},
            }
        )
        self._connections.append(conn)
        self.socket_connects += 1
        try:
            await self.notify()
            pending, self._pending = self._pending, []
            for envelope in pending:
                await self._deliver(envelope)
            async for msg in ws:
                if msg.type == WSMsgType.PING:
                    if self.answer_pings:
                        await ws.pong(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    await self._on_client_message(conn, msg.data)
        finally:
            if conn in self._connections:
                self._connections.remove(conn)
            await self.notify()
        return ws

    async def _on_client_message(self, conn: _SocketConn, data: str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if not isinstance(message, dict) or "envelope_id" not in message:
            return
        envelope_id = str(message["envelope_id"])
        payload = message.get("payload")
        known = envelope_id in self._envelope_event or any(
            d.envelope_id == envelope_id for d in self.deliveries
        )
        self.acks.append(
            Ack(
                envelope_id,
                payload if isinstance(payload, dict) else None,
                time.monotonic(),
                conn.id,
                known,
            )
        )
        self._acked_envelopes.add(envelope_id)
        event_id = self._envelope_event.get(envelope_id)
        if event_id is not None:
            self._events[event_id].acked = True
        await self.notify()

    async def _deliver(self, envelope: JSON) -> Delivery | None:
        """Send to the newest live connection, or queue until one connects."""
        for conn in reversed(self._connections):
            if conn.ws.closed:
                continue
            try:
                await conn.ws.send_str(json.dumps(envelope))
            except (ConnectionError, RuntimeError):
                continue
            delivery = Delivery(envelope, conn.id, time.monotonic())
            self.deliveries.append(delivery)
            if int(envelope.get("retry_attempt") or 0) > 0:
                self.redeliveries.append(delivery)
            self._spawn(self._ack_timer(envelope))
            await self.notify()
            return delivery
        self._pending.append(envelope)
        await self.notify()
        return None

    async def _ack_timer(self, envelope: JSON) -> None:
        await asyncio.sleep(self.ack_timeout)
        envelope_id = envelope["envelope_id"]
        if envelope_id in self._acked_envelopes:
            return
        self.ack_timeouts.append(envelope_id)
        await self.notify()
        event_id = self._envelope_event.get(envelope_id)
        if event_id is None:
            return  # Slack does not retry slash commands or interactions; the user sees an error.
        state = self._events[event_id]
        if state.acked or state.attempts >= self.max_retries:
            return
        await self._send_event_attempt(state, state.attempts + 1, self.retry_reason)

    def event_payload(self, event: JSON, event_id: str | None = None) -> JSON:
        """The event_callback body Slack sends for `event` (same for Socket Mode and HTTP)."""
        self._learn(event)
        event_time = int(float(event.get("event_ts") or event.get("ts") or time.time()))
        return {
            "token": self.verification_token,
            "team_id": self.team_id,
            "context_team_id": self.team_id,
            "context_enterprise_id": None,
            "api_app_id": self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or self._next_id("Ev"),
            "event_time": event_time,
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": "4-" + base64.b64encode(secrets.token_bytes(12)).decode(),
        }

    def _learn(self, event: JSON) -> None:
        """Make the channel, user and message of an injected event known to the Web API."""
        channel = event.get("channel")
        if isinstance(channel, str) and channel and channel not in self.channels:
            other = event.get("user") if channel.startswith("D") else None
            self.register_channel(channel, user=other if isinstance(other, str) else None)
        user = event.get("user")
        if isinstance(user, str) and user and user not in self.users:
            self.register_user(user)
        if not isinstance(channel, str) or event.get("type") not in ("message", "app_mention"):
            return
        subtype = event.get("subtype")
        history = self._store.setdefault(channel, {})
        if subtype == "message_changed" and isinstance(event.get("message"), dict):
            inner = event["message"]
            if inner.get("ts") in history:
                history[inner["ts"]].update(inner)
        elif subtype == "message_deleted":
            history.pop(str(event.get("deleted_ts")), None)
        elif isinstance(event.get("ts"), str) and event["ts"] not in history:
            kept = {k: v for k, v in event.items() if k not in ("channel", "event_ts")}
            kept["type"] = "message"
            self._keep(channel, kept)

    async def send_event(self, event: JSON, event_id: str | None = None) -> JSON:
        """Deliver an Events API event over Socket Mode; returns the envelope sent.

        Queued until a socket connects. Not acked within ack_timeout -> redelivered with a new
        envelope_id, the same event_id, retry_attempt + 1 (up to max_retries).
        """
        payload = self.event_payload(event, event_id)
        state = _EventState(payload["event_id"], payload)
        self._events[state.event_id] = state
        return await self._send_event_attempt(state, 0, "")

    async def _send_event_attempt(self, state: _EventState, attempt: int, reason: str) -> JSON:
        state.attempts = max(state.attempts, attempt)
        envelope: JSON = {
            "envelope_id": str(uuid.uuid4()),
            "payload": state.payload,
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": attempt,
            "retry_reason": reason,
        }
        state.envelope_ids.append(envelope["envelope_id"])
        self._envelope_event[envelope["envelope_id"]] = state.event_id
        await self._deliver(envelope)
        return envelope

    async def redeliver(self, event_id: str, reason: str = "timeout") -> JSON:
        """Deliver an event again even though it was acked (Slack's at-least-once duplicates)."""
        state = self._events[event_id]
        return await self._send_event_attempt(state, state.attempts + 1, reason)

    def envelopes_for(self, event_id: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.event_id == event_id]

    async def send_envelope(
        self, type_: str, payload: JSON, *, accepts_response_payload: bool = True
    ) -> JSON:
        """Any other Socket Mode envelope (interactive, block_actions...); never retried."""
        envelope: JSON = {
            "envelope_id": str(uuid.uuid4()),
            "payload": payload,
            "type": type_,
            "accepts_response_payload": accepts_response_payload,
        }
        await self._deliver(envelope)
        return envelope

    def slash_command_payload(
        self,
        command: str,
        text: str = "",
        *,
        user: str = DEFAULT_USER,
        channel: str | None = None,
    ) -> dict[str, str]:
        channel = channel or self.dm_channel(user)
        if channel not in self.channels:
            self.register_channel(channel)
        self.register_user(user)
        info = self.channels[channel]
        cid = self._next_id("C")
        return {
            "token": self.verification_token,
            "team_id": self.team_id,
            "team_domain": "fake-team",
            "channel_id": channel,
            "channel_name": "directmessage" if info.get("is_im") else str(info.get("name")),
            "user_id": user,
            "user_name": str(self.users[user]["name"]),
            "command": command,
            "text": text,
            "api_app_id": self.app_id,
            "is_enterprise_install": "false",
            "response_url": f"{self.url}/commands/{self.team_id}/{cid}/{secrets.token_hex(8)}",
            "trigger_id": f"{cid}.{secrets.token_hex(8)}",
        }

    async def send_slash_command(
        self,
        command: str,
        text: str = "",
        *,
        user: str = DEFAULT_USER,
        channel: str | None = None,
    ) -> JSON:
        payload = self.slash_command_payload(command, text, user=user, channel=channel)
        return await self.send_envelope("slash_commands", dict(payload))

    async def send_disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask every connected client to reconnect (the SDK opens a new socket, drops this one)."""
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-applink"}}
        for conn in list(self._connections):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await conn.ws.send_json(message)

    async def drop_socket_connections(self, *, abrupt: bool = False) -> int:
        """Close every Socket Mode connection; abrupt=True cuts TCP without a close frame."""
        conns = list(self._connections)
        for conn in conns:
            if abrupt:
                transport = conn.request.transport
                if transport is not None:
                    transport.abort()
            else:
                with contextlib.suppress(Exception):
                    await conn.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"dropped")
        return len(conns)

    # ---------------------------------------------------------------- event builders

    def _user_message(
        self,
        text: str,
        *,
        channel: str,
        user: str,
        thread_ts: str | None,
        ts: str | None,
        type_: str = "message",
    ) -> JSON:
        if channel not in self.channels:
            self.register_channel(channel, user=user if channel.startswith("D") else None)
        self.register_user(user)
        ts = ts or self.next_ts()
        event: JSON = {
            "client_msg_id": str(uuid.uuid4()),
            "type": type_,
            "text": text,
            "user": user,
            "ts": ts,
            "blocks": _rich_text(text),
            "team": self.team_id,
            "channel": channel,
            "event_ts": ts,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
            parent = self._store.get(channel, {}).get(thread_ts)
            if parent is not None and parent.get("user"):
                event["parent_user_id"] = parent["user"]
        if type_ == "message":
            event["channel_type"] = self.channel_type(channel)
        return event

    def dm_message(
        self,
        text: str,
        *,
        user: str = DEFAULT_USER,
        channel: str | None = None,
        thread_ts: str | None = None,
        ts: str | None = None,
    ) -> JSON:
        """message.im event: a user writing to the bot in their DM (channel D...)."""
        return self._user_message(
            text, channel=channel or self.dm_channel(user), user=user, thread_ts=thread_ts, ts=ts
        )

    def channel_message(
        self,
        text: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        user: str = DEFAULT_USER,
        thread_ts: str | None = None,
        ts: str | None = None,
    ) -> JSON:
        """message.channels / message.groups event (thread reply when thread_ts is given)."""
        return self._user_message(text, channel=channel, user=user, thread_ts=thread_ts, ts=ts)

    def mention_text(self, text: str) -> str:
        return f"<@{self.bot_user_id}> {text}"

    def app_mention(
        self,
        text: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        user: str = DEFAULT_USER,
        thread_ts: str | None = None,
        ts: str | None = None,
    ) -> JSON:
        """app_mention event; `text` gets the leading <@BOT> unless it already mentions the bot."""
        if f"<@{self.bot_user_id}" not in text:
            text = self.mention_text(text)
        return self._user_message(
            text, channel=channel, user=user, thread_ts=thread_ts, ts=ts, type_="app_mention"
        )

    def mention_pair(
        self,
        text: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        user: str = DEFAULT_USER,
        thread_ts: str | None = None,
    ) -> tuple[JSON, JSON]:
        """The two events Slack sends for one channel mention: message and app_mention, same ts."""
        mention = self.app_mention(text, channel=channel, user=user, thread_ts=thread_ts)
        message = {
            **mention,
            "type": "message",
            "channel_type": self.channel_type(channel),
            "blocks": mention["blocks"],
        }
        return message, mention

    async def send_mention(
        self,
        text: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        user: str = DEFAULT_USER,
        thread_ts: str | None = None,
        app_mention_first: bool = False,
    ) -> tuple[JSON, JSON]:
        """The "double event": deliver both events (different event_ids); returns envelopes."""
        message, mention = self.mention_pair(text, channel=channel, user=user, thread_ts=thread_ts)
        if app_mention_first:
            env_mention = await self.send_event(mention)
            env_message = await self.send_event(message)
        else:
            env_message = await self.send_event(message)
            env_mention = await self.send_event(mention)
        return env_message, env_mention

    def bot_message(
        self,
        text: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        own: bool = False,
        bot_id: str = "B0OTHER",
        username: str = "otherbot",
        thread_ts: str | None = None,
    ) -> JSON:
        """A message from a bot: another integration (subtype bot_message) or this app itself."""
        if channel not in self.channels:
            self.register_channel(channel)
        ts = self.next_ts()
        event: JSON
        if own:
            # Modern apps' own posts carry user + bot_id and no subtype.
            event = self._bot_message(text, ts, None, thread_ts)
        else:
            event = {
                "type": "message",
                "subtype": "bot_message",
                "text": text,
                "ts": ts,
                "bot_id": bot_id,
                "username": username,
            }
            if thread_ts:
                event["thread_ts"] = thread_ts
        event.update(channel=channel, event_ts=ts, channel_type=self.channel_type(channel))
        return event

    def message_changed(self, original: JSON, new_text: str) -> JSON:
        """message_changed for a message built earlier (hidden, new ts, inner message keeps ts)."""
        channel = str(original["channel"])
        ts = self.next_ts()
        previous = {
            k: v for k, v in original.items() if k not in ("channel", "event_ts", "channel_type")
        }
        inner = {
            **previous,
            "text": new_text,
            "blocks": _rich_text(new_text),
            "edited": {"user": original.get("user", ""), "ts": ts},
        }
        return {
            "type": "message",
            "subtype": "message_changed",
            "message": inner,
            "previous_message": previous,
            "channel": channel,
            "hidden": True,
            "ts": ts,
            "event_ts": ts,
            "channel_type": self.channel_type(channel),
        }

    def message_deleted(self, original: JSON) -> JSON:
        channel = str(original["channel"])
        ts = self.next_ts()
        previous = {
            k: v for k, v in original.items() if k not in ("channel", "event_ts", "channel_type")
        }
        return {
            "type": "message",
            "subtype": "message_deleted",
            "hidden": True,
            "deleted_ts": original["ts"],
            "previous_message": previous,
            "channel": channel,
            "ts": ts,
            "event_ts": ts,
            "channel_type": self.channel_type(channel),
        }

    def file_share_message(
        self,
        files: list[JSON],
        text: str = "",
        *,
        user: str = DEFAULT_USER,
        channel: str | None = None,
        thread_ts: str | None = None,
    ) -> JSON:
        """A user sharing files (objects from add_file) in a DM, or in `channel`."""
        event = self._user_message(
            text,
            channel=channel or self.dm_channel(user),
            user=user,
            thread_ts=thread_ts,
            ts=None,
        )
        event.update(subtype="file_share", files=files, upload=False, display_as_bot=False)
        if not text:
            event.pop("blocks", None)
        return event

    # ---------------------------------------------------------------- HTTP (Events API) mode

    @staticmethod
    def sign(
        body: bytes, signing_secret: str, timestamp: int | str | None = None
    ) -> dict[str, str]:
        """X-Slack-Request-Timestamp + X-Slack-Signature (v0, HMAC-SHA256) for `body`."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = b"v0:" + ts.encode() + b":" + body
        digest = hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}

    async def _post_signed(
        self,
        target_url: str,
        body: bytes,
        content_type: str,
        signing_secret: str,
        *,
        timestamp: int | None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> tuple[int, str, Mapping[str, str]]:
        if self._session is None:
            raise RuntimeError("FakeSlack is not started")
        headers = {
            "Content-Type": content_type,
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            **self.sign(body, signing_secret, timestamp),
            **(extra_headers or {}),
        }
        async with self._session.post(target_url, data=body, headers=headers) as resp:
            return resp.status, await resp.text(), dict(resp.headers)

    async def post_event_http(
        self,
        target_url: str,
        event: JSON,
        signing_secret: str,
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        retry_reason: str = "http_timeout",
        timestamp: int | None = None,
    ) -> HttpDelivery:
        """POST an event_callback to a daemon in HTTP mode, signed as Slack signs it."""
        payload = self.event_payload(event, event_id)
        body = json.dumps(payload).encode()
        extra = {}
        if retry_num:
            extra = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason}
        status, text, headers = await self._post_signed(
            target_url,
            body,
            "application/json",
            signing_secret,
            timestamp=timestamp,
            extra_headers=extra,
        )
        return HttpDelivery(status, text, headers, payload)

    async def post_slash_command_http(
        self,
        target_url: str,
        command: str,
        text: str,
        signing_secret: str,
        *,
        user: str = DEFAULT_USER,
        channel: str | None = None,
    ) -> HttpDelivery:
        payload = self.slash_command_payload(command, text, user=user, channel=channel)
        body = urlencode(payload).encode()
        status, resp_text, headers = await self._post_signed(
            target_url, body, "application/x-www-form-urlencoded", signing_secret, timestamp=None
        )
        return HttpDelivery(status, resp_text, headers, dict(payload))

    async def post_url_verification(self, target_url: str, signing_secret: str) -> HttpDelivery:
        payload: JSON = {
            "token": self.verification_token,
            "challenge": secrets.token_urlsafe(24),
            "type": "url_verification",
        }
        status, text, headers = await self._post_signed(
            target_url,
            json.dumps(payload).encode(),
            "application/json",
            signing_secret,
            timestamp=None,
        )
        return HttpDelivery(status, text, headers, payload)
