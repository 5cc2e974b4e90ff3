"""The Web API methods picobridge calls to talk in Slack: auth.test, chat.postMessage / update /
delete / postEphemeral, reactions.add / remove, conversations.replies / open and
assistant.threads.setStatus, with the errors Slack gives for them.

Block Kit: the blocks picobridge sends (sections and buttons, for the agent's questions) are
checked as Slack checks them (blocks.py) and kept on the message; chat.update replaces them
when it is given ``blocks`` and, as Slack documents, drops them when it is given ``text``
alone. Ephemeral messages take text only (picobridge sends nothing else there).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable

from tests.fakes.server import JSON
from tests.fakes.slack.base import MethodHandler
from tests.fakes.slack.blocks import check_blocks
from tests.fakes.slack.model import (
    AssistantStatus,
    EphemeralMessage,
    PostedMessage,
    ReactionChange,
    SlackError,
    truthy,
    ts_str,
)
from tests.fakes.slack.socket import SlackSocketMode

_REACTION_NAME = re.compile(r"^[a-z0-9_+'\-]+(::skin-tone-[2-6])?$")


class SlackChat(SlackSocketMode):
    """Messages, reactions and conversation lookups."""

    def methods(self) -> dict[str, MethodHandler]:
        return {
            **super().methods(), "auth.test": self._auth_test,
            "chat.postMessage": self._post_message, "chat.update": self._update,
            "chat.delete": self._delete, "chat.postEphemeral": self._post_ephemeral,
            "reactions.add": self._reactions_add, "reactions.remove": self._reactions_remove,
            "conversations.replies": self._replies, "conversations.open": self._open,
            "assistant.threads.setStatus": self._set_status,
        }

    def posted_messages(self, channel: str | None = None,
                        thread_ts: str | None = None) -> list[PostedMessage]:
        """Messages the bot posted (not deleted), optionally in one channel / thread."""
        return [m for m in self.messages if not m.deleted
                and (channel is None or m.channel == channel)
                and (thread_ts is None or m.thread_ts == thread_ts)]

    async def wait_for_message(self, channel: str | None = None, thread_ts: str | None = None,
                               predicate: Callable[[PostedMessage], bool] | None = None,
                               timeout: float = 30.0) -> PostedMessage:
        return await self.wait_for(
            lambda: next((m for m in self.posted_messages(channel, thread_ts)
                          if predicate is None or predicate(m)), None),
            f"a message in {channel or 'any channel'}", timeout)

    def reactions_on(self, channel: str, ts: str, user: str | None = None) -> list[str]:
        """Reaction names currently on a message (by the bot unless another user is given)."""
        who = user or self.bot_user_id
        return [n for n, users in self._reactions.get((channel, ts), {}).items() if who in users]

    def _auth_test(self, params: JSON) -> JSON:
        return {"url": "https://fake-team.slack.com/", "team": self.team_name,
                "user": self.bot_name, "team_id": self.team_id, "user_id": self.bot_user_id,
                "bot_id": self.bot_id, "is_enterprise_install": False}

    # ---- messages ----------------------------------------------------------------------------

    def _text(self, params: JSON) -> str:
        if params.get("blocks") not in (None, "", []):
            errors = ["the fake Slack models blocks only on chat.postMessage and chat.update"]
            raise SlackError("invalid_blocks", errors=errors)
        text = "" if params.get("text") is None else str(params["text"])
        self.check_length(text)
        if not text:
            raise SlackError("no_text")
        return text

    def _content(self, params: JSON) -> tuple[str, list[JSON] | None]:
        """The text and the blocks (None: not given) of a message to post or update."""
        blocks = params.get("blocks")
        stored = None if blocks is None or blocks == "" else check_blocks(blocks)
        text = "" if params.get("text") is None else str(params["text"])
        self.check_length(text)
        if not text and not stored:
            raise SlackError("no_text")
        return text, stored

    def _post_message(self, params: JSON) -> JSON:
        channel = self.writable_channel(params)
        text, blocks = self._content(params)
        posted, msg = self.post(channel, text, ts_str(params.get("thread_ts")), params)
        if blocks:
            msg["blocks"] = posted.blocks = blocks
        return {"channel": channel, "ts": msg["ts"], "message": msg}

    def _own(self, params: JSON, verb: str) -> tuple[str, str, PostedMessage, JSON]:
        channel = self.resolve_channel(params.get("channel"))
        ts = ts_str(params.get("ts"))
        stored = self._store.get(channel, {}).get(ts or "")
        if ts is None or stored is None:
            raise SlackError("message_not_found")
        posted = next((m for m in self.messages
                       if (m.channel, m.ts) == (channel, ts) and not m.deleted), None)
        if posted is None:
            raise SlackError(f"cant_{verb}_message")
        return channel, ts, posted, stored

    def _update(self, params: JSON) -> JSON:
        channel, ts, posted, stored = self._own(params, "update")
        text, blocks = self._content(params)
        posted.edits.append({"text": posted.text, "params": posted.params,
                             "blocks": posted.blocks})
        # Given blocks replace the old ones ([] removes them); text alone drops them.
        if blocks is not None or "text" in params:
            posted.blocks = blocks or None
            stored.pop("blocks", None)
            if blocks:
                stored["blocks"] = blocks
        posted.text, posted.params = text or posted.text, dict(params)
        stored["text"] = posted.text
        stored["edited"] = {"user": self.bot_user_id, "ts": self.next_ts()}
        return {"channel": channel, "ts": ts, "text": posted.text,
                "message": {k: v for k, v in stored.items() if k != "ts"}}

    def _delete(self, params: JSON) -> JSON:
        channel, ts, posted, _ = self._own(params, "delete")
        posted.deleted = True
        del self._store[channel][ts]
        return {"channel": channel, "ts": ts}

    def _post_ephemeral(self, params: JSON) -> JSON:
        channel = self.writable_channel(params)
        user = params.get("user")
        if not isinstance(user, str) or user not in self.users:
            raise SlackError("user_not_in_channel")
        text = self._text(params)
        message_ts = self.next_ts()
        self.ephemeral_messages.append(EphemeralMessage(
            channel, user, text, ts_str(params.get("thread_ts")), message_ts))
        return {"message_ts": message_ts}

    # ---- reactions ---------------------------------------------------------------------------

    def _reaction_target(self, params: JSON) -> tuple[str, str, str]:
        channel = self.resolve_channel(params.get("channel"))
        ts = ts_str(params.get("timestamp"))
        name = params.get("name")
        if not isinstance(name, str) or not _REACTION_NAME.match(name):
            raise SlackError("invalid_name")
        if ts is None or ts not in self._store.get(channel, {}):
            raise SlackError("message_not_found")
        return channel, ts, name

    def _reactions_add(self, params: JSON) -> JSON:
        channel, ts, name = self._reaction_target(params)
        users = self._reactions.setdefault((channel, ts), {}).setdefault(name, [])
        if self.bot_user_id in users:
            raise SlackError("already_reacted")
        users.append(self.bot_user_id)
        self.reaction_log.append(ReactionChange("add", channel, ts, name))
        return {}

    def _reactions_remove(self, params: JSON) -> JSON:
        channel, ts, name = self._reaction_target(params)
        on_message = self._reactions.get((channel, ts), {})
        users = on_message.get(name, [])
        if self.bot_user_id not in users:
            raise SlackError("no_reaction")
        users.remove(self.bot_user_id)
        if not users:
            del on_message[name]
        self.reaction_log.append(ReactionChange("remove", channel, ts, name))
        return {}

    # ---- conversations -----------------------------------------------------------------------

    def _public_message(self, channel: str, msg: JSON) -> JSON:
        out = {k: v for k, v in msg.items() if k not in ("channel", "event_ts", "channel_type")}
        reactions = self._reactions.get((channel, msg["ts"]))
        if reactions:
            out["reactions"] = [{"name": n, "users": list(u), "count": len(u)}
                                for n, u in reactions.items() if u]
        return out

    def _replies(self, params: JSON) -> JSON:
        channel = self.resolve_channel(params.get("channel"))
        ts = ts_str(params.get("ts"))
        history = self._store.get(channel, {})
        if ts is None or ts not in history:
            raise SlackError("thread_not_found")
        oldest, latest = ts_str(params.get("oldest")), ts_str(params.get("latest"))
        inclusive = truthy(params.get("inclusive", False))

        def wanted(m: JSON) -> bool:
            t = float(m["ts"])
            return ((oldest is None or t > float(oldest) or (inclusive and m["ts"] == oldest))
                    and (latest is None or t < float(latest)
                         or (inclusive and m["ts"] == latest)))

        thread = sorted((m for m in history.values() if (m["ts"] == ts or m.get("thread_ts")
                                                          == ts) and wanted(m)),
                        key=lambda m: float(m["ts"]))
        start = 0
        if params.get("cursor"):
            try:
                start = int(base64.b64decode(str(params["cursor"])).decode().split(":", 1)[1])
            except (ValueError, IndexError) as exc:
                raise SlackError("invalid_cursor") from exc
        limit = int(params.get("limit") or 1000)
        more = start + limit < len(thread)
        next_cursor = base64.b64encode(f"next:{start + limit}".encode()).decode() if more else ""
        return {"messages": [self._public_message(channel, m)
                             for m in thread[start: start + limit]],
                "has_more": more, "response_metadata": {"next_cursor": next_cursor}}

    def _open(self, params: JSON) -> JSON:
        users = str(params.get("users") or "").split(",")
        if len(users) != 1 or users[0] not in self.users:
            raise SlackError("user_not_found")
        return {"channel": {"id": self.dm_channel(users[0])}}

    def _set_status(self, params: JSON) -> JSON:
        channel_id, thread_ts = params.get("channel_id"), ts_str(params.get("thread_ts"))
        if not channel_id or thread_ts is None or "status" not in params:
            raise SlackError("invalid_arguments")
        channel = self.resolve_channel(channel_id)
        loading = params.get("loading_messages")
        self.assistant_statuses.append(AssistantStatus(
            channel, thread_ts, str(params["status"]),
            list(loading) if isinstance(loading, list) else None))
        return {}
