"""Builders of the events Slack sends when people (and bots) act: messages in DMs, channels and
threads, mentions (Slack's "double event"), edits, deletions, file shares, slash commands."""

from __future__ import annotations

import json
import re
import secrets
import time
import uuid

from aiohttp import web

from tests.fakes.server import JSON
from tests.fakes.slack.chat import SlackChat
from tests.fakes.slack.model import DEFAULT_CHANNEL, DEFAULT_USER, CommandResponse

# Slack takes up to five responses to one command's response_url.
RESPONSE_URL_USES = 5

_MENTION = re.compile(r"(<@[UW][A-Z0-9]+(?:\|[^>]*)?>)")
_MENTION_ID = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


def _rich_text(text: str) -> list[JSON]:
    """The rich_text block Slack clients attach to a typed message, mentions included."""
    elements: list[JSON] = []
    for part in filter(None, _MENTION.split(text)):
        mention = _MENTION_ID.fullmatch(part)
        elements.append({"type": "user", "user_id": mention[1]} if mention
                        else {"type": "text", "text": part})
    return [{"type": "rich_text", "block_id": secrets.token_hex(3),
             "elements": [{"type": "rich_text_section", "elements": elements}]}]


def _previous(original: JSON) -> JSON:
    return {k: v for k, v in original.items() if k not in ("channel", "event_ts", "channel_type")}


class SlackEvents(SlackChat):
    """Events to hand to send_event() (Socket Mode) or post_event_http() (HTTP mode), and the
    response_url of the slash commands among them."""

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        app.router.add_post("/commands/{team}/{cid}/{token}", self._handle_response_url)

    async def _handle_response_url(self, request: web.Request) -> web.StreamResponse:
        # As Slack's hooks answer: plain text, an error code for a refused response.
        user = self._response_urls.get(request.path)
        if user is None:
            return web.Response(status=404, text="no_service")
        if self._response_uses.get(request.path, 0) >= RESPONSE_URL_USES:
            return web.Response(status=404, text="used_url")
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.Response(status=400, text="invalid_payload")
        if not isinstance(body, dict) or not (body.get("text") or body.get("blocks")):
            return web.Response(status=400, text="no_text")
        self._response_uses[request.path] = self._response_uses.get(request.path, 0) + 1
        self.command_responses.append(CommandResponse(
            user, str(body.get("text") or ""), str(body.get("response_type") or "ephemeral"),
            time.monotonic()))
        self.notify()
        return web.Response(text="ok")

    def _user_message(self, text: str, *, channel: str, user: str, thread_ts: str | None,
                      ts: str | None, type_: str = "message") -> JSON:
        if channel not in self.channels:
            self.register_channel(channel, user=user if channel.startswith("D") else None)
        self.register_user(user)
        ts = ts or self.next_ts()
        event: JSON = {"client_msg_id": str(uuid.uuid4()), "type": type_, "text": text,
                       "user": user, "ts": ts, "blocks": _rich_text(text), "team": self.team_id,
                       "channel": channel, "event_ts": ts}
        if thread_ts:
            event["thread_ts"] = thread_ts
            parent = self._store.get(channel, {}).get(thread_ts)
            if parent is not None and parent.get("user"):
                event["parent_user_id"] = parent["user"]
        if type_ == "message":
            event["channel_type"] = self.channel_type(channel)
        return event

    def dm_message(self, text: str, *, user: str = DEFAULT_USER, channel: str | None = None,
                   thread_ts: str | None = None, ts: str | None = None) -> JSON:
        """message.im event: a user writing to the bot in their DM (channel D...)."""
        return self._user_message(text, channel=channel or self.dm_channel(user), user=user,
                                  thread_ts=thread_ts, ts=ts)

    def channel_message(self, text: str, *, channel: str = DEFAULT_CHANNEL,
                        user: str = DEFAULT_USER, thread_ts: str | None = None,
                        ts: str | None = None) -> JSON:
        """message.channels / message.groups event (thread reply when thread_ts is given)."""
        return self._user_message(text, channel=channel, user=user, thread_ts=thread_ts, ts=ts)

    def mention_text(self, text: str) -> str:
        return f"<@{self.bot_user_id}> {text}"

    def app_mention(self, text: str, *, channel: str = DEFAULT_CHANNEL, user: str = DEFAULT_USER,
                    thread_ts: str | None = None, ts: str | None = None) -> JSON:
        """app_mention event; `text` gets the leading <@BOT> unless it already mentions the bot."""
        if f"<@{self.bot_user_id}" not in text:
            text = self.mention_text(text)
        return self._user_message(text, channel=channel, user=user, thread_ts=thread_ts, ts=ts,
                                  type_="app_mention")

    def mention_pair(self, text: str, *, channel: str = DEFAULT_CHANNEL,
                     user: str = DEFAULT_USER,
                     thread_ts: str | None = None) -> tuple[JSON, JSON]:
        """The two events Slack sends for one channel mention: message and app_mention, same ts."""
        mention = self.app_mention(text, channel=channel, user=user, thread_ts=thread_ts)
        message = {**mention, "type": "message", "channel_type": self.channel_type(channel)}
        return message, mention

    async def send_mention(self, text: str, *, channel: str = DEFAULT_CHANNEL,
                           user: str = DEFAULT_USER, thread_ts: str | None = None,
                           app_mention_first: bool = False) -> tuple[JSON, JSON]:
        """The "double event": deliver both events (different event_ids); returns envelopes."""
        message, mention = self.mention_pair(text, channel=channel, user=user,
                                             thread_ts=thread_ts)
        if app_mention_first:
            env_mention = await self.send_event(mention)
            return await self.send_event(message), env_mention
        env_message = await self.send_event(message)
        return env_message, await self.send_event(mention)

    def bot_message(self, text: str, *, channel: str = DEFAULT_CHANNEL, own: bool = False,
                    bot_id: str = "B0OTHER", username: str = "otherbot",
                    thread_ts: str | None = None) -> JSON:
        """A message from a bot: another integration (subtype bot_message) or this app itself."""
        if channel not in self.channels:
            self.register_channel(channel)
        ts = self.next_ts()
        if own:
            # Modern apps' own posts carry user + bot_id and no subtype.
            event = self.own_message(text, ts, thread_ts)
        else:
            event = {"type": "message", "subtype": "bot_message", "text": text, "ts": ts,
                     "bot_id": bot_id, "username": username}
            if thread_ts:
                event["thread_ts"] = thread_ts
        event.update(channel=channel, event_ts=ts, channel_type=self.channel_type(channel))
        return event

    def message_changed(self, original: JSON, new_text: str) -> JSON:
        """message_changed for a message built earlier (hidden, new ts, inner message keeps ts)."""
        channel, ts = str(original["channel"]), self.next_ts()
        previous = _previous(original)
        inner = {**previous, "text": new_text, "blocks": _rich_text(new_text),
                 "edited": {"user": original.get("user", ""), "ts": ts}}
        return {"type": "message", "subtype": "message_changed", "message": inner,
                "previous_message": previous, "channel": channel, "hidden": True, "ts": ts,
                "event_ts": ts, "channel_type": self.channel_type(channel)}

    def message_deleted(self, original: JSON) -> JSON:
        channel, ts = str(original["channel"]), self.next_ts()
        return {"type": "message", "subtype": "message_deleted", "hidden": True,
                "deleted_ts": original["ts"], "previous_message": _previous(original),
                "channel": channel, "ts": ts, "event_ts": ts,
                "channel_type": self.channel_type(channel)}

    def file_share_message(self, files: list[JSON], text: str = "", *,
                           user: str = DEFAULT_USER, channel: str | None = None,
                           thread_ts: str | None = None) -> JSON:
        """A user sharing files (objects from add_file) in a DM, or in `channel`."""
        event = self._user_message(text, channel=channel or self.dm_channel(user), user=user,
                                   thread_ts=thread_ts, ts=None)
        event.update(subtype="file_share", files=files, upload=False, display_as_bot=False)
        if not text:
            event.pop("blocks", None)
        return event

    def slash_command_payload(self, command: str, text: str = "", *, user: str = DEFAULT_USER,
                              channel: str | None = None) -> dict[str, str]:
        """The form fields of a slash command (the same over Socket Mode and HTTP)."""
        channel = channel or self.dm_channel(user)
        if channel not in self.channels:
            self.register_channel(channel)
        self.register_user(user)
        info, cid = self.channels[channel], self.next_id("C")
        path = f"/commands/{self.team_id}/{cid}/{secrets.token_hex(8)}"
        self._response_urls[path] = user
        return {
            "token": self.verification_token, "team_id": self.team_id,
            "team_domain": "fake-team", "channel_id": channel,
            "channel_name": "directmessage" if info.get("is_im") else str(info.get("name")),
            "user_id": user, "user_name": str(self.users[user]["name"]), "command": command,
            "text": text, "api_app_id": self.app_id, "is_enterprise_install": "false",
            "response_url": f"{self.url}{path}",
            "trigger_id": f"{cid}.{secrets.token_hex(8)}",
        }

    async def send_slash_command(self, command: str, text: str = "", *,
                                 user: str = DEFAULT_USER, channel: str | None = None) -> JSON:
        payload = self.slash_command_payload(command, text, user=user, channel=channel)
        return await self.send_envelope("slash_commands", dict(payload))
