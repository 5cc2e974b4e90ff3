"""The REST routes of the fake Discord that picobridge calls (through discord.py's HTTPClient),
strict where Discord is: 2,000 characters, no empty message, component limits, replies to
messages that exist, edits of the bot's own messages only, the 3 s interaction deadline."""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

from aiohttp import web

from tests.fakes.discord.base import API, DiscordBase, DiscordError
from tests.fakes.discord.model import (
    JSON,
    MAX_CONTENT,
    MAX_CUSTOM_ID,
    MAX_LABEL,
    MAX_ROW_BUTTONS,
    MAX_ROWS,
    MAX_SELECT_OPTIONS,
    FollowUp,
    Reaction,
    SentMessage,
    iso_now,
)
from tests.fakes.server import Call


def invalid_form(field: str, code: str, message: str) -> DiscordError:
    return DiscordError(400, 50035, "Invalid Form Body",
                        {field: {"_errors": [{"code": code, "message": message}]}})


def check_components(rows: list[JSON]) -> None:
    if len(rows) > MAX_ROWS:
        raise invalid_form("components", "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
    for row in rows:
        items = row.get("components", [])
        if row.get("type") != 1 or not 1 <= len(items) <= MAX_ROW_BUTTONS:
            raise invalid_form("components", "COMPONENT_LAYOUT_WIDTH_EXCEEDED",
                               "The specified component exceeds the maximum width")
        for item in items:
            custom_id = item.get("custom_id", "")
            if item.get("type") == 2 and item.get("style") != 5 and not custom_id:
                raise invalid_form("components", "BASE_TYPE_REQUIRED", "custom_id required")
            if len(custom_id) > MAX_CUSTOM_ID or len(item.get("label") or "") > MAX_LABEL:
                raise invalid_form("components", "BASE_TYPE_MAX_LENGTH", "Too long.")
            if item.get("type") == 3 and not 1 <= len(item.get("options", [])) \
                    <= MAX_SELECT_OPTIONS:
                raise invalid_form("components", "BASE_TYPE_BAD_LENGTH", "1 to 25 options.")


NONCE_LIFETIME = 300.0  # Discord checks a nonce's uniqueness over "the past few minutes"


class DiscordRest(DiscordBase):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nonces: dict[tuple[str, str], tuple[str, float]] = {}
        self.deleted: list[str] = []  # ids of the bot's messages it deleted
        self.followups: list[FollowUp] = []  # interaction follow-ups (ephemeral or not)

    def add_routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get(f"{API}/users/@me", self.route("get_me", self._me))
        r.add_get(f"{API}/oauth2/applications/@me", self.route("application_info", self._app))
        r.add_get(f"{API}/gateway/bot", self.route("gateway_bot", self._gateway_bot))
        channel = f"{API}/channels/{{channel_id}}"
        r.add_get(channel, self.route("get_channel", self._get_channel))
        r.add_post(f"{channel}/messages", self.route("create_message", self._create))
        r.add_get(f"{channel}/messages", self.route("history", self._history))
        r.add_patch(f"{channel}/messages/{{message_id}}", self.route("edit_message", self._edit))
        r.add_delete(f"{channel}/messages/{{message_id}}",
                     self.route("delete_message", self._delete))
        r.add_post(f"{channel}/typing", self.route("typing", self._typing))
        r.add_put(f"{channel}/messages/{{message_id}}/reactions/{{emoji}}/@me",
                  self.route("add_reaction", self._react))
        r.add_delete(f"{channel}/messages/{{message_id}}/reactions/{{emoji}}/@me",
                     self.route("remove_reaction", self._unreact))
        commands = f"{API}/applications/{{app_id}}"
        r.add_put(f"{commands}/commands", self.route("bulk_commands", self._put_commands))
        r.add_get(f"{commands}/commands", self.route("get_commands", self._get_commands))
        r.add_put(f"{commands}/guilds/{{guild_id}}/commands",
                  self.route("bulk_commands", self._put_commands))
        r.add_get(f"{commands}/guilds/{{guild_id}}/commands",
                  self.route("get_commands", self._get_commands))
        r.add_post(f"{API}/interactions/{{interaction_id}}/{{token}}/callback",
                   self.route("interaction_callback", self._callback, auth=False,
                              bucket_key="interaction_id"))
        r.add_patch(f"{API}/webhooks/{{app_id}}/{{token}}/messages/@original",
                    self.route("edit_original", self._edit_original, auth=False,
                               bucket_key="token"))
        r.add_post(f"{API}/webhooks/{{app_id}}/{{token}}",
                   self.route("follow_up", self._follow_up, auth=False, bucket_key="token"))
        r.add_get("/attachments/{name}", self._download)

    # ---- who we are ----------------------------------------------------------------------------

    async def _me(self, request: web.Request, call: Call) -> web.Response:
        return self.ok(call, self.users[self.bot_id])

    async def _app(self, request: web.Request, call: Call) -> web.Response:
        return self.ok(call, {
            "id": self.app_id, "name": self.bot_name, "description": "", "icon": None,
            "bot_public": False, "bot_require_code_grant": False, "verify_key": "00" * 32,
            "owner": self.add_user(self.ids.next(), "owner"), "team": None,
            "flags": self.app_flags, "bot": self.users[self.bot_id]})

    async def _gateway_bot(self, request: web.Request, call: Call) -> web.Response:
        return self.ok(call, {"url": self.gateway_url, "shards": 1, "session_start_limit": {
            "total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}})

    async def _get_channel(self, request: web.Request, call: Call) -> web.Response:
        return self.ok(call, self.channel(request.match_info["channel_id"]).payload(self.users))

    # ---- messages ------------------------------------------------------------------------------

    async def _read_body(self, request: web.Request, channel_id: str) -> JSON:
        if not request.content_type.startswith("multipart/"):
            body: JSON = await request.json()
            return body
        payload: JSON = {}
        files: list[JSON] = []
        reader = await request.multipart()
        async for part in reader:
            name = getattr(part, "name", None)
            data = await part.read()  # type: ignore[union-attr]
            if name == "payload_json":
                payload = json.loads(data)
            elif name and name.startswith("files["):
                filename = getattr(part, "filename", None) or "file"
                self.uploads.append((channel_id, filename, bytes(data)))
                self.files[f"{self.ids.next()}-{filename}"] = ("application/octet-stream",
                                                               bytes(data))
                files.append({"filename": filename, "size": len(data)})
        payload["_files"] = files
        return payload

    def _attachments(self, files: list[JSON]) -> list[JSON]:
        return [{"id": self.ids.next(), "filename": f["filename"], "size": f["size"],
                 "url": f"{self.url}/attachments/{f['filename']}",
                 "proxy_url": f"{self.url}/attachments/{f['filename']}"} for f in files]

    def _check_content(self, body: JSON, files: list[JSON]) -> str:
        content = body.get("content") or ""
        if len(content) > MAX_CONTENT:
            raise invalid_form("content", "BASE_TYPE_MAX_LENGTH",
                               f"Must be {MAX_CONTENT} or fewer in length.")
        check_components(body.get("components") or [])
        if not content and not files and not body.get("embeds") and not body.get("components"):
            raise DiscordError(400, 50006, "Cannot send an empty message")
        return str(content)

    async def _create(self, request: web.Request, call: Call) -> web.Response:
        channel = self.channel(request.match_info["channel_id"])
        body = await self._read_body(request, channel.id)
        files = body.pop("_files", [])
        call.params.update(body)
        content = self._check_content(body, files)
        reference = (body.get("message_reference") or {}).get("message_id")
        if reference is not None and str(reference) not in channel.messages and \
                (body["message_reference"].get("fail_if_not_exists", True)):
            raise invalid_form("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                               "Unknown message")
        nonce = body.get("nonce")
        if body.get("enforce_nonce") and nonce is not None:
            earlier = self.nonces.get((channel.id, str(nonce)))
            if earlier is not None and time.monotonic() - earlier[1] < NONCE_LIFETIME:
                return self.ok(call, channel.messages[earlier[0]])
        payload = self.bot_message(channel.id, content, body.get("components") or [],
                                   self._attachments(files),
                                   None if reference is None else str(reference))
        if nonce is not None:
            self.nonces[(channel.id, str(nonce))] = (payload["id"], time.monotonic())
        return self.ok(call, payload)

    def bot_message(self, channel_id: str, content: str, components: list[JSON],
                    attachments: list[JSON], reference: str | None,
                    interaction: bool = False) -> JSON:
        """Store a message of the bot's and tell the gateway, as Discord does."""
        channel = self.channels[channel_id]
        message_id = self.ids.next()
        payload = self.message_payload(channel, message_id, self.bot_id, content,
                                       attachments=attachments, components=components)
        if reference is not None:
            payload["type"] = 19
            payload["message_reference"] = {"message_id": reference, "channel_id": channel_id}
        channel.messages[message_id] = payload
        self.sent.append(SentMessage(message_id, channel_id, content, components, attachments,
                                     reference, via_interaction=interaction))
        self.dispatch("MESSAGE_CREATE", payload)
        return payload

    def message_payload(self, channel: Any, message_id: str, author_id: str, content: str,
                        *, attachments: list[JSON] | None = None,
                        components: list[JSON] | None = None,
                        mentions: list[str] | None = None) -> JSON:
        payload: JSON = {
            "id": message_id, "channel_id": channel.id, "author": self.users[author_id],
            "content": content, "timestamp": iso_now(), "edited_timestamp": None,
            "tts": False, "mention_everyone": False,
            "mentions": [self.users[m] for m in mentions or []], "mention_roles": [],
            "attachments": attachments or [], "embeds": [], "pinned": False, "type": 0,
            "flags": 0, "components": components or []}
        if channel.guild_id is not None:
            payload["guild_id"] = channel.guild_id
            payload["member"] = {"roles": [], "joined_at": iso_now(), "deaf": False,
                                 "mute": False, "flags": 0}
        return payload

    def dispatch(self, event: str, data: JSON) -> None:
        raise NotImplementedError  # the gateway's

    async def _history(self, request: web.Request, call: Call) -> web.Response:
        channel = self.channel(request.match_info["channel_id"])
        limit = int(request.query.get("limit", "50"))
        if not 1 <= limit <= 100:
            raise invalid_form("limit", "NUMBER_TYPE_MAX", "int value should be <= 100.")
        ids = sorted(channel.messages, key=int)
        if "after" in request.query:
            after = int(request.query["after"])
            chosen = [i for i in ids if int(i) > after][:limit]
        elif "before" in request.query:
            before = int(request.query["before"])
            chosen = [i for i in ids if int(i) < before][-limit:]
        else:
            chosen = ids[-limit:]
        return self.ok(call, [channel.messages[i] for i in reversed(chosen)])

    async def _edit(self, request: web.Request, call: Call) -> web.Response:
        channel = self.channel(request.match_info["channel_id"])
        message = channel.messages.get(request.match_info["message_id"])
        if message is None:
            raise DiscordError(404, 10008, "Unknown Message")
        if message["author"]["id"] != self.bot_id:
            raise DiscordError(403, 50005, "Cannot edit a message authored by another user")
        body = await self._read_body(request, channel.id)
        files = body.pop("_files", [])
        call.params.update(body)
        merged = {"content": message["content"], "components": message["components"], **body}
        content = self._check_content(merged, files or message["attachments"])
        self._apply_edit(message, content, merged.get("components") or [], files)
        return self.ok(call, message)

    async def _delete(self, request: web.Request, call: Call) -> web.Response:
        channel = self.channel(request.match_info["channel_id"])
        message = channel.messages.pop(request.match_info["message_id"], None)
        if message is None:
            raise DiscordError(404, 10008, "Unknown Message")
        self.sent = [m for m in self.sent if m.id != message["id"]]
        self.deleted.append(message["id"])
        self.dispatch("MESSAGE_DELETE", {"id": message["id"], "channel_id": channel.id})
        return self.ok(call, None)

    def _apply_edit(self, message: JSON, content: str, components: list[JSON],
                    files: list[JSON]) -> None:
        message.update(content=content, components=components, edited_timestamp=iso_now())
        if files:
            message["attachments"] = self._attachments(files)
        for sent in self.sent:
            if sent.id == message["id"]:
                sent.content, sent.components = content, components
                sent.attachments = message["attachments"]
                sent.edits += 1
        self.dispatch("MESSAGE_UPDATE", message)

    async def _typing(self, request: web.Request, call: Call) -> web.Response:
        channel = self.channel(request.match_info["channel_id"])
        self.typing.append((channel.id, time.monotonic()))
        return self.ok(call, None)

    async def _react(self, request: web.Request, call: Call) -> web.Response:
        return self._reaction(request, call, True)

    async def _unreact(self, request: web.Request, call: Call) -> web.Response:
        return self._reaction(request, call, False)

    def _reaction(self, request: web.Request, call: Call, added: bool) -> web.Response:
        channel = self.channel(request.match_info["channel_id"])
        message_id = request.match_info["message_id"]
        if message_id not in channel.messages:
            raise DiscordError(404, 10008, "Unknown Message")
        emoji = urllib.parse.unquote(request.match_info["emoji"])
        self.reactions.append(Reaction(channel.id, message_id, emoji, added))
        return self.ok(call, None)

    # ---- application commands ------------------------------------------------------------------

    async def _put_commands(self, request: web.Request, call: Call) -> web.Response:
        if request.match_info["app_id"] != self.app_id:
            raise DiscordError(403, 50001, "Missing Access")
        body = await request.json()
        for command in body:
            if not 1 <= len(command.get("description", "")) <= 100:
                raise invalid_form("description", "BASE_TYPE_BAD_LENGTH", "1 to 100.")
        where = request.match_info.get("guild_id", "global")
        self.commands[where] = [{**c, "id": self.ids.next(), "application_id": self.app_id,
                                 "version": self.ids.next(), "type": c.get("type", 1)}
                                for c in body]
        return self.ok(call, self.commands[where])

    async def _get_commands(self, request: web.Request, call: Call) -> web.Response:
        return self.ok(call, self.commands.get(request.match_info.get("guild_id", "global"), []))

    # ---- interactions --------------------------------------------------------------------------

    async def _callback(self, request: web.Request, call: Call) -> web.Response:
        interaction = self.interactions.get(request.match_info["interaction_id"])
        if interaction is None or interaction.token != request.match_info["token"]:
            raise DiscordError(404, 10062, "Unknown interaction")
        body = await request.json()
        call.params.update(body)
        if interaction.callbacks:
            raise DiscordError(400, 40060, "Interaction has already been acknowledged.")
        if time.monotonic() - interaction.created > self.interaction_deadline:
            interaction.late = True
            raise DiscordError(404, 10062, "Unknown interaction")
        interaction.callbacks.append(body)
        data = body.get("data") or {}
        kind = body.get("type")
        if kind == 4:
            self._check_content(data, [])
            message = self.bot_message(interaction.channel_id, data.get("content") or "",
                                       data.get("components") or [], [], None, True)
            interaction.original = message["id"]
        elif kind == 7 and interaction.message_id is not None:
            message = self.channels[interaction.channel_id].messages[interaction.message_id]
            merged = {"content": message["content"], "components": message["components"],
                      **data}
            self._apply_edit(message, self._check_content(merged, []),
                             merged.get("components") or [], [])
        answer = {"interaction": {"id": interaction.id, "type": interaction.kind}}
        if request.query.get("with_response") in ("1", "true"):
            return self.ok(call, answer)
        return self.ok(call, None)

    async def _edit_original(self, request: web.Request, call: Call) -> web.Response:
        found = [i for i in self.interactions.values()
                 if i.token == request.match_info["token"]]
        if not found or not found[0].callbacks:
            raise DiscordError(404, 10015, "Unknown Webhook")
        interaction = found[0]
        body = await request.json()
        call.params.update(body)
        if interaction.original is None:
            message = self.bot_message(interaction.channel_id, self._check_content(body, []),
                                       body.get("components") or [], [], None, True)
            interaction.original = message["id"]
            return self.ok(call, message)
        message = self.channels[interaction.channel_id].messages[interaction.original]
        merged = {"content": message["content"], "components": message["components"], **body}
        self._apply_edit(message, self._check_content(merged, []),
                         merged.get("components") or [], [])
        return self.ok(call, message)

    async def _follow_up(self, request: web.Request, call: Call) -> web.Response:
        found = [i for i in self.interactions.values()
                 if i.token == request.match_info["token"]]
        if not found or not found[0].callbacks:
            raise DiscordError(404, 10015, "Unknown Webhook")
        body = await request.json()
        call.params.update(body)
        self._check_content(body, [])
        interaction = found[0]
        self.followups.append(FollowUp(interaction.user_id, body.get("content") or "",
                                       bool((body.get("flags") or 0) & 64)))
        return self.ok(call, {"id": self.ids.next(), "content": body.get("content") or ""})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        call = self.record(Call("download", dict(request.match_info)))
        fault = await self.guard("download", request, call)
        if fault is not None:
            return fault
        found = self.files.get(request.match_info["name"])
        if found is None:
            call.status = 404
            return web.Response(status=404)
        return web.Response(body=found[1], content_type=found[0])
