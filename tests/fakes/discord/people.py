"""What people do in the fake Discord: write in DMs, guild channels and threads (mentioning
the bot, replying to it, attaching files), run slash commands and click buttons."""

from __future__ import annotations

from typing import Any

from tests.fakes.discord.gateway import DiscordGateway
from tests.fakes.discord.model import (
    CHANNEL_PUBLIC_THREAD,
    CHANNEL_TEXT,
    JSON,
    Channel,
    Interaction,
    SentMessage,
    iso_now,
)

DEFAULT_USER = "400000000000000001"
OTHER_USER = "400000000000000002"
STRANGER = "400000000000000099"


class DiscordPeople(DiscordGateway):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for user_id, name in ((DEFAULT_USER, "alice"), (OTHER_USER, "bob"),
                              (STRANGER, "mallory")):
            self.add_user(user_id, name)

    # ---- guilds --------------------------------------------------------------------------------

    def add_guild(self, name: str = "Fake Guild", channels: tuple[str, ...] = ("general",)
                  ) -> tuple[str, list[str]]:
        """A guild the bot is in, with text channels; returns (guild id, channel ids). Add
        guilds before the daemon connects (they come with READY) or call announce_guild."""
        guild_id = self.ids.next()
        ids = []
        for channel_name in channels:
            channel = Channel(self.ids.next(), CHANNEL_TEXT, guild_id=guild_id,
                              name=channel_name)
            self.channels[channel.id] = channel
            ids.append(channel.id)
        self.guilds[guild_id] = {"id": guild_id, "name": name}
        return guild_id, ids

    def guild_payload(self, guild: JSON) -> JSON:
        guild_id = guild["id"]
        mine = [c for c in self.channels.values() if c.guild_id == guild_id]
        return {
            "id": guild_id, "name": guild["name"], "icon": None, "owner_id": DEFAULT_USER,
            "roles": [{"id": guild_id, "name": "@everyone", "permissions": "1071698660929",
                       "position": 0, "color": 0, "hoist": False, "managed": False,
                       "mentionable": False, "flags": 0}],
            "emojis": [], "stickers": [], "features": [], "member_count": 3, "large": False,
            "unavailable": False, "joined_at": iso_now(), "members": [], "voice_states": [],
            "presences": [], "stage_instances": [], "guild_scheduled_events": [],
            "channels": [c.payload(self.users) for c in mine if c.type == CHANNEL_TEXT],
            "threads": [c.payload(self.users) for c in mine if c.type == CHANNEL_PUBLIC_THREAD],
            "mfa_level": 0, "verification_level": 0, "explicit_content_filter": 0,
            "default_message_notifications": 0, "premium_tier": 0, "nsfw_level": 0,
            "preferred_locale": "en-US", "system_channel_flags": 0, "afk_timeout": 300}

    def open_thread(self, parent_id: str, name: str = "a thread",
                    user: str = DEFAULT_USER) -> str:
        """``user`` opens a thread in a guild channel; returns its id."""
        parent = self.channels[parent_id]
        thread = Channel(self.ids.next(), CHANNEL_PUBLIC_THREAD, guild_id=parent.guild_id,
                         parent_id=parent_id, name=name, owner_id=user)
        self.channels[thread.id] = thread
        self.dispatch("THREAD_CREATE", {**thread.payload(self.users), "newly_created": True})
        return thread.id

    # ---- messages --------------------------------------------------------------------------------

    def dm(self, text: str, user: str = DEFAULT_USER, *,
           files: tuple[tuple[str, bytes, str], ...] = (),
           declared_size: int | None = None) -> JSON:
        """``user`` writes to the bot in their DM."""
        return self.say(self.dm_channel(user).id, text, user, files=files,
                        declared_size=declared_size)

    def say(self, channel_id: str, text: str, user: str = DEFAULT_USER, *,
            mention: bool = False, reply_to: str | None = None,
            files: tuple[tuple[str, bytes, str], ...] = (), deliver: bool = True,
            declared_size: int | None = None) -> JSON:
        """``user`` writes in a channel (``mention``: "@bot " is put in front). With
        ``deliver`` False the message is only in the channel's history (sent while no
        gateway session was up). ``declared_size`` puts another size than the files' in the
        payload (a client must not trust it)."""
        channel = self.channels[channel_id]
        content = f"<@{self.bot_id}> {text}" if mention else text
        attachments = []
        for name, data, mime in files:
            key = f"{self.ids.next()}-{name}"
            self.files[key] = (mime, data)
            size = len(data) if declared_size is None else declared_size
            attachments.append({"id": self.ids.next(), "filename": name, "size": size,
                                "content_type": mime, "url": f"{self.url}/attachments/{key}",
                                "proxy_url": f"{self.url}/attachments/{key}"})
        mentions = [self.bot_id] if mention else []
        payload = self.message_payload(channel, self.ids.next(), user, content,
                                       attachments=attachments, mentions=mentions)
        if reply_to is not None:
            replied = channel.messages[reply_to]
            payload.update(type=19, referenced_message=replied,
                           message_reference={"message_id": reply_to, "channel_id": channel_id})
            if replied["author"]["id"] == self.bot_id:
                payload["mentions"].append(self.users[self.bot_id])
        channel.messages[payload["id"]] = payload
        if deliver:
            self.dispatch("MESSAGE_CREATE", self._as_seen(payload))
        return payload

    def edit(self, channel_id: str, message_id: str, text: str) -> JSON:
        """The author edits their message (a mention stays a mention)."""
        payload = self.channels[channel_id].messages[message_id]
        mention = f"<@{self.bot_id}> " if payload["content"].startswith(f"<@{self.bot_id}>") \
            else ""
        payload.update(content=mention + text, edited_timestamp=iso_now())
        self.dispatch("MESSAGE_UPDATE", self._as_seen(payload))
        return payload

    def _as_seen(self, payload: JSON) -> JSON:
        """A message as the gateway shows it to this bot: without the Message Content intent,
        guild messages that do not mention it come with empty content."""
        if self.content_visible() or "guild_id" not in payload or any(
                m["id"] == self.bot_id for m in payload["mentions"]):
            return payload
        return {**payload, "content": "", "attachments": [], "embeds": [], "components": []}

    def replies_in(self, channel_id: str) -> list[SentMessage]:
        return self.messages_in(channel_id)

    async def wait_for_reply(self, channel_id: str, needle: str,
                             timeout: float = 20.0) -> SentMessage:
        return await self.wait_for(
            lambda: next((m for m in self.messages_in(channel_id) if needle in m.content), None),
            f"a message containing {needle!r} in {channel_id}", timeout)

    # ---- interactions ----------------------------------------------------------------------------

    def slash(self, name: str, channel_id: str, user: str = DEFAULT_USER,
              text: str | None = None) -> Interaction:
        """``user`` runs /name in a channel (a DM channel or a guild's), with ``text`` in
        its option when given."""
        channel = self.channels[channel_id]
        command = next((c for cs in self.commands.values() for c in cs if c["name"] == name),
                       None)
        data: JSON = {"id": command["id"] if command else self.ids.next(), "name": name,
                      "type": 1}
        if text is not None:
            data["options"] = [{"name": "text", "type": 3, "value": text}]
        return self._interact(2, channel, user, data)

    def click(self, message: SentMessage, custom_id: str, user: str = DEFAULT_USER,
              values: list[str] | None = None) -> Interaction:
        """``user`` clicks a button (or picks ``values`` in a select menu) of a bot message."""
        channel = self.channels[message.channel_id]
        data: JSON = {"custom_id": custom_id, "component_type": 2 if values is None else 3}
        if values is not None:
            data["values"] = values
        payload = channel.messages[message.id]
        return self._interact(3, channel, user, data, payload)

    def _interact(self, kind: int, channel: Channel, user: str, data: JSON,
                  message: JSON | None = None) -> Interaction:
        interaction = Interaction(self.ids.next(), f"tok-{self.ids.next()}", kind, channel.id,
                                  user, message_id=None if message is None else message["id"])
        self.interactions[interaction.id] = interaction
        payload: JSON = {
            "id": interaction.id, "application_id": self.app_id, "type": kind, "data": data,
            "channel_id": channel.id, "channel": channel.payload(self.users),
            "token": interaction.token, "version": 1, "app_permissions": "1071698660929",
            "locale": "en-US", "entitlements": [], "authorizing_integration_owners": {},
            "attachment_size_limit": 10 * 1024 * 1024,
            "context": 1 if channel.guild_id is None else 0}
        if channel.guild_id is not None:
            payload["guild_id"] = channel.guild_id
            payload["member"] = {"user": self.users[user], "roles": [], "joined_at": iso_now(),
                                 "deaf": False, "mute": False, "flags": 0,
                                 "permissions": "1071698660929"}
        else:
            payload["user"] = self.users[user]
        if message is not None:
            payload["message"] = message
        self.dispatch("INTERACTION_CREATE", payload)
        return interaction
