"""The fake Telegram's HTTP side: routes, tokens, decoding requests, error envelopes, and the
chats and message ids every other part uses."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, ClassVar

from aiohttp import web

from tests.fakes.server import JSON, Call, FakeServer, Fault
from tests.fakes.telegram.model import (
    DEFAULT_TOKEN,
    MAX_DOWNLOAD_SIZE,
    MAX_UPLOAD_SIZE,
    STATUS_DESCRIPTIONS,
    ApiError,
    ChatAction,
    SentMessage,
    StoredFile,
    UploadedFile,
    bad_request,
    decode_param,
)

MethodHandler = Callable[[JSON], Awaitable[Any]]


def _call_key(call: Call) -> str:
    return json.dumps([call.method, call.params], sort_keys=True, default=str)


def _envelope(error: ApiError) -> web.Response:
    return web.json_response(error.envelope(), status=error.status)


class TelegramBase(FakeServer):
    """State shared by the parts of the fake Telegram, and its request plumbing."""

    # Methods a flood applies to: the ones that put something in front of a user.
    FLOOD_METHODS: ClassVar[frozenset[str]] = frozenset(
        {"sendMessage", "sendDocument", "editMessageText"})

    def __init__(self, token: str = DEFAULT_TOKEN, *, bot_username: str = "picobridge_test_bot",
                 bot_first_name: str = "Picobridge Test Bot", host: str = "127.0.0.1",
                 port: int = 0, first_update_id: int = 100_000,
                 max_download_size: int = MAX_DOWNLOAD_SIZE) -> None:
        super().__init__(host=host, port=port, max_body=MAX_UPLOAD_SIZE + 1024 * 1024)
        self.token = token  # assign another (or revoke() it) and every call gets 401
        prefix = token.split(":", 1)[0]
        self.bot_user: JSON = {
            "id": int(prefix) if prefix.isdigit() else 5123456789, "is_bot": True,
            "first_name": bot_first_name, "username": bot_username, "can_join_groups": True,
            "can_read_all_group_messages": False, "supports_inline_queries": False,
        }
        self.max_download_size = max_download_size
        # chats and messages
        self.chats: dict[int, JSON] = {}
        self.chat_actions: list[ChatAction] = []
        # (scope, language) -> the command list set there (commands.py)
        self.commands: dict[tuple[tuple[Any, ...], str], list[JSON]] = {}
        self._messages: dict[tuple[int, int], JSON] = {}
        self._sent: list[SentMessage] = []
        self._next_message_id: dict[int, int] = {}
        self._blocked: dict[int, str] = {}
        # files
        self.files: dict[str, StoredFile] = {}
        self.downloads: list[str] = []  # file paths, in download order
        self.streamed_bytes: dict[str, int] = {}  # file path -> bytes a streamed download sent
        self._files_by_path: dict[str, StoredFile] = {}
        # updates
        self.updates: dict[int, JSON] = {}  # every update ever queued, by id
        self.webhook: JSON | None = None
        self.allowed_updates: list[str] = []
        self.confirmed_offset = 0
        self.active_polls = 0
        self._next_update_id = first_update_id
        self._queue: list[JSON] = []
        self._redelivered: list[JSON] = []
        self._poll_generation = 0
        self._odd_results: dict[str, deque[Any]] = {}
        # flood control: calls repeating one that got 429, and those that came too soon
        self.retries: list[Call] = []
        self.early_retries: list[Call] = []
        self._retry_waits: dict[str, float] = {}  # the 429'd call -> end of its retry_after
        self._methods: dict[str, tuple[str, MethodHandler]] = {
            name.lower(): (name, handler) for name, handler in self.methods().items()}

    def _note_retry(self, call: Call) -> None:
        """A call repeating one that got 429: kept in ``retries``, and in ``early_retries``
        when it came before that 429's retry_after was over (the sender did not wait)."""
        key = _call_key(call)
        until = self._retry_waits.pop(key, None)
        if until is not None:
            self.retries.append(call)
            if call.time < until:
                self.early_retries.append(call)

    def _note_429(self, call: Call) -> None:
        retry_after = (call.response.get("parameters") or {}).get("retry_after")
        if call.status == 429 and isinstance(retry_after, int | float):
            self._retry_waits[_call_key(call)] = call.time + retry_after

    def methods(self) -> dict[str, MethodHandler]:
        """Bot API method name -> handler(params) -> result; each part adds its own."""
        return {}

    def answer_next(self, method: str, result: Any, *, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` succeed (HTTP 200, ``"ok": true``) with
        ``result`` whatever its shape, as a misbehaving proxy or a changed Bot API would answer:
        ``answer_next("getMe", True)`` is a getMe whose result is not a user."""
        self._odd_results.setdefault(method, deque()).extend([result] * times)

    # ---- HTTP --------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """Value for telegram.Bot(base_url=...) and the telegram.base_url setting."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._handle_api)
        app.router.add_get("/file/bot{token}/{path:.+}", self.handle_download)

    async def handle_download(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    def authorised(self, request: web.Request) -> bool:
        token = request.match_info["token"]
        return token == self.token and token not in self.revoked_tokens

    def error_envelope(self, fault: Fault) -> tuple[JSON, dict[str, str]]:
        parameters = dict(fault.extra or {})
        if fault.retry_after is not None:
            parameters["retry_after"] = fault.retry_after
        description = fault.error
        if description is None and fault.status == 429:
            description = f"Too Many Requests: retry after {fault.retry_after}"
        if description is None:
            try:
                default = HTTPStatus(fault.status).phrase
            except ValueError:
                default = "Error"
            description = STATUS_DESCRIPTIONS.get(fault.status, default)
        return ApiError(fault.status, description, parameters or None).envelope(), {}

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        if not self.authorised(request):
            return _envelope(ApiError(401, "Unauthorized"))
        entry = self._methods.get(request.match_info["method"].lower())
        if entry is None:
            return _envelope(ApiError(404, "Not Found"))
        name, handler = entry
        try:
            params = await self._read_params(request)
        except ApiError as exc:
            return _envelope(exc)
        call = self.record(Call(name, params, token=request.match_info["token"]))
        self._note_retry(call)
        scripted = await self.guard(name, request, call)
        if scripted is not None:
            self._note_429(call)
            return scripted
        odd = self._odd_results.get(name)
        if odd:
            call.response = {"ok": True, "result": odd.popleft()}
            self.notify()
            return web.json_response(call.response)
        try:
            body: JSON = {"ok": True, "result": await handler(params)}
        except ApiError as exc:
            body = exc.envelope()
            call.status = exc.status
        call.response = body
        self.notify()
        return web.json_response(body, status=call.status)

    async def _read_params(self, request: web.Request) -> JSON:
        raw: JSON = dict(request.query)
        uploads: dict[str, UploadedFile] = {}
        if request.method == "POST" and request.can_read_body:
            try:
                if request.content_type == "application/json":
                    body = await request.json()
                    if not isinstance(body, dict):
                        raise bad_request("JSON object expected")
                    raw.update(body)
                elif request.content_type in ("application/x-www-form-urlencoded",
                                              "multipart/form-data"):
                    for key, value in (await request.post()).items():
                        if isinstance(value, web.FileField):
                            uploads[key] = UploadedFile(value.file.read(), value.filename,
                                                        value.content_type)
                        else:
                            raw[key] = value
            except web.HTTPRequestEntityTooLarge:
                raise ApiError(413, "Request Entity Too Large") from None
            except ValueError:
                raise bad_request("can't parse request body") from None
        params: JSON = {key: decode_param(key, value) for key, value in raw.items()}
        params.update(uploads)
        # Files may be referenced as attach://<part name>.
        for key, value in list(params.items()):
            if isinstance(value, str) and value.startswith("attach://"):
                part = uploads.get(value[len("attach://"):])
                if part is None:
                    raise bad_request(f"file for {key} not found in the request")
                params[key] = part
        return params

    # ---- chats and messages ------------------------------------------------------------------

    def add_chat(self, chat_id: int, chat_type: str | None = None, *, title: str | None = None,
                 is_forum: bool = False, username: str | None = None,
                 first_name: str | None = None) -> JSON:
        """Register (or update) a chat; chat_type defaults from the id like Telegram's ids."""
        if chat_type is None:
            chat_type = ("private" if chat_id > 0 else
                         "supergroup" if str(chat_id).startswith("-100") else "group")
        chat: JSON = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name or "Test"
            if username:
                chat["username"] = username
        else:
            chat["title"] = title or f"Test {chat_type} {chat_id}"
            if chat_type == "supergroup" and is_forum:
                chat["is_forum"] = True
        if self.chats.get(chat_id, {}).get("is_forum"):
            chat["is_forum"] = True
        self.chats[chat_id] = chat
        return chat

    def chat(self, chat_id: int) -> JSON:
        return self.chats.get(chat_id) or self.add_chat(chat_id)

    def new_message_id(self, chat_id: int) -> int:
        """Message ids count per chat, shared by the users' and the bot's messages."""
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def message(self, chat_id: int, message_id: int) -> JSON | None:
        """The current Message object (user's or bot's), or None when unknown or deleted."""
        return self._messages.get((chat_id, message_id))

    def block_chat(self, chat_id: int,
                   description: str = "Forbidden: bot was blocked by the user") -> None:
        """Sending anything to the chat answers 403 until unblock_chat()."""
        self._blocked[chat_id] = description

    def unblock_chat(self, chat_id: int) -> None:
        self._blocked.pop(chat_id, None)

    def target_chat(self, params: JSON) -> int:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise bad_request("chat_id is empty")
        if not isinstance(chat_id, int):
            # @channelusername targets are not modelled; the bridge only talks to numeric ids.
            raise bad_request("chat not found")
        if chat_id in self._blocked:
            raise ApiError(403, self._blocked[chat_id])
        return chat_id
