"""The fake Slack's workspace: users, channels and DMs, and each channel's message history."""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.server import JSON
from tests.fakes.slack.base import SlackBase
from tests.fakes.slack.model import (
    DEFAULT_USER,
    MAX_TEXT_CHARS,
    PostedMessage,
    SlackError,
)


class SlackWorkspace(SlackBase):
    """Who and where: the registry the Web API and the event builders share."""

    def setup(self) -> None:
        super().setup()
        self.users[self.bot_user_id] = self._user_obj(self.bot_user_id, self.bot_name,
                                                      is_bot=True)

    def _user_obj(self, user_id: str, name: str, *, is_bot: bool = False) -> JSON:
        profile: JSON = {
            "real_name": name.title(), "display_name": name, "real_name_normalized": name.title(),
            "display_name_normalized": name, "image_72": f"{self.url}/avatars/{user_id}_72.png",
            "team": self.team_id,
        }
        if is_bot:
            profile["bot_id"] = self.bot_id
        return {
            "id": user_id, "team_id": self.team_id, "name": name, "deleted": False,
            "real_name": name.title(), "tz": "Europe/London", "tz_label": "Greenwich Mean Time",
            "tz_offset": 0, "is_admin": False, "is_owner": False, "is_bot": is_bot,
            "is_app_user": False, "updated": int(time.time()), "profile": profile,
        }

    def register_user(self, user_id: str, name: str | None = None, *, is_bot: bool = False,
                      **extra: Any) -> JSON:
        user = self.users.get(user_id)
        if user is None or name is not None:
            user = self._user_obj(user_id, name or user_id.lower(), is_bot=is_bot)
            user.update(extra)
            self.users[user_id] = user
        return user

    def register_channel(self, channel_id: str, *, name: str | None = None,
                         user: str | None = None, is_member: bool = True,
                         is_private: bool | None = None) -> JSON:
        """Make a channel known. IDs starting with D are DMs (then `user` is the other party)."""
        existing = self.channels.get(channel_id)
        if existing is not None:
            if name is not None and not existing.get("is_im"):
                existing["name"] = name
            if user is not None and existing.get("is_im"):
                existing["user"] = user
            existing["is_member"] = is_member or existing.get("is_member", False)
            return existing
        if channel_id.startswith("D"):
            info = self._dm_info(channel_id, user)
        else:
            private = channel_id.startswith("G") if is_private is None else is_private
            info = self._channel_info(channel_id, name or channel_id.lower(), private, is_member)
        self.channels[channel_id] = info
        self._store.setdefault(channel_id, {})
        return info

    def _dm_info(self, channel_id: str, user: str | None) -> JSON:
        if user:
            self.register_user(user)
        return {"id": channel_id, "created": int(time.time()), "is_im": True,
                "is_org_shared": False, "context_team_id": self.team_id,
                "user": user or DEFAULT_USER, "is_user_deleted": False, "priority": 0}

    def _channel_info(self, channel_id: str, name: str, private: bool, is_member: bool) -> JSON:
        empty = {"value": "", "creator": "", "last_set": 0}
        return {
            "id": channel_id, "name": name, "name_normalized": name, "is_channel": not private,
            "is_group": private, "is_im": False, "is_mpim": False, "is_private": private,
            "created": int(time.time()), "is_archived": False, "is_general": False,
            "is_shared": False, "is_org_shared": False, "is_member": is_member,
            "context_team_id": self.team_id, "topic": dict(empty), "purpose": dict(empty),
        }

    def dm_channel(self, user: str = DEFAULT_USER) -> str:
        """The bot's DM channel with `user` (created on first use, stable per user)."""
        for cid, info in self.channels.items():
            if info.get("is_im") and info.get("user") == user:
                return cid
        cid = "D" + user[1:]
        self.register_channel(cid, user=user)
        return cid

    def channel_type(self, channel_id: str) -> str:
        info = self.channels.get(channel_id) or {}
        if channel_id.startswith("D") or info.get("is_im"):
            return "im"
        if info.get("is_mpim"):
            return "mpim"
        if channel_id.startswith("G") or info.get("is_private"):
            return "group"
        return "channel"

    def resolve_channel(self, value: Any) -> str:
        """Channel argument -> known channel id (IDs, #names and user IDs, as Slack allows)."""
        if not isinstance(value, str) or not value:
            raise SlackError("channel_not_found")
        if value in self.channels:
            return value
        name = value.lstrip("#")
        for cid, info in self.channels.items():
            if info.get("name") == name:
                return cid
        if value[0] in "UW" and value in self.users:
            return self.dm_channel(value)
        raise SlackError("channel_not_found")

    def writable_channel(self, params: JSON) -> str:
        channel = self.resolve_channel(params.get("channel"))
        info = self.channels[channel]
        if info.get("is_archived"):
            raise SlackError("is_archived")
        if not info.get("is_im") and not info.get("is_member", True):
            raise SlackError("not_in_channel")
        return channel

    # ---- the bot's messages -------------------------------------------------------------------

    @staticmethod
    def check_length(text: str | None) -> None:
        if text is not None and len(text) > MAX_TEXT_CHARS:
            raise SlackError("msg_too_long")

    def own_message(self, text: str, ts: str, thread_ts: str | None) -> JSON:
        """A message by this app, as Slack stores it and echoes it in events."""
        msg: JSON = {
            "type": "message", "user": self.bot_user_id, "bot_id": self.bot_id,
            "app_id": self.app_id, "text": text, "ts": ts, "team": self.team_id,
            "bot_profile": {"id": self.bot_id, "app_id": self.app_id, "name": self.bot_name,
                            "deleted": False, "team_id": self.team_id},
        }
        if thread_ts:
            msg["thread_ts"] = thread_ts
            msg["parent_user_id"] = self.parent_user(thread_ts)
        return msg

    def post(self, channel: str, text: str, thread_ts: str | None, params: JSON, *,
             kind: str = "message", files: list[JSON] | None = None) -> tuple[PostedMessage, JSON]:
        """Put a message of the bot's in ``channel``: its history and the record tests read."""
        ts = self.next_ts()
        msg = self.own_message(text, ts, thread_ts)
        if files:
            msg.update(files=files, upload=True, display_as_bot=False)
        self.keep(channel, msg)
        posted = PostedMessage(channel=channel, ts=ts, text=text, thread_ts=thread_ts,
                               files=list(files or []), params=dict(params), kind=kind)
        self.messages.append(posted)
        return posted, msg

    # ---- history -----------------------------------------------------------------------------

    def message(self, channel: str, ts: str) -> JSON | None:
        """A message as Slack stores it (a user's or the bot's)."""
        return self._store.get(channel, {}).get(ts)

    def keep(self, channel: str, msg: JSON) -> None:
        """Put a message in the channel history, keeping the thread metadata of its parent."""
        self._store.setdefault(channel, {})[msg["ts"]] = msg
        thread_ts = msg.get("thread_ts")
        parent = (self._store[channel].get(thread_ts)
                  if isinstance(thread_ts, str) and thread_ts != msg["ts"] else None)
        if parent is None:
            return
        parent["thread_ts"] = thread_ts
        parent["reply_count"] = int(parent.get("reply_count", 0)) + 1
        users = parent.setdefault("reply_users", [])
        who = msg.get("user") or msg.get("bot_id")
        if who and who not in users:
            users.append(who)
        parent["reply_users_count"] = len(users)
        parent["latest_reply"] = msg["ts"]

    def parent_user(self, thread_ts: str) -> str:
        for history in self._store.values():
            parent = history.get(thread_ts)
            if parent is not None:
                return str(parent.get("user") or "")
        return ""
