"""What (fake) users do in the fake Telegram: write, send files, edit; each becomes an update
shaped as Telegram shapes it."""

from __future__ import annotations

import copy
import time
from typing import Any

from tests.fakes.server import JSON
from tests.fakes.telegram.entities import detect_entities
from tests.fakes.telegram.model import StoredFile
from tests.fakes.telegram.updates import TelegramUpdates


class TelegramUsers(TelegramUpdates):
    """Builders of the updates users cause."""

    def user_message(
        self, chat_id: int, user_id: int | None = None, text: str | None = None, *,
        chat_type: str | None = None, chat_title: str | None = None,
        message_thread_id: int | None = None, is_topic_message: bool = False,
        entities: list[JSON] | None = None, reply_to_message: int | JSON | None = None,
        username: str | None = "tester", first_name: str = "Test", last_name: str | None = None,
        language_code: str | None = "en", media_group_id: str | None = None,
        caption: str | None = None, caption_entities: list[JSON] | None = None,
        document: StoredFile | None = None, photo: StoredFile | None = None,
        voice: StoredFile | None = None, audio: StoredFile | None = None,
        video: StoredFile | None = None, animation: StoredFile | None = None,
        date: int | None = None, enqueue: bool = True,
    ) -> JSON:
        """Build (and by default queue) a ``message`` update from a user; returns the update.

        Without ``entities`` the text gets the entities Telegram detects itself (bot_command,
        mention, url), so e.g. "/new" arrives as a command; pass entities=[] to suppress them.
        The message gets the chat's next message_id (shared with the bot's messages there).
        """
        if user_id is None:
            if chat_id <= 0:
                raise ValueError("user_id is required outside private chats")
            user_id = chat_id
        self._ensure_chat(chat_id, chat_type, chat_title, is_topic_message, username, first_name)
        message: JSON = {
            "message_id": self.new_message_id(chat_id),
            "from": _sender(user_id, username, first_name, last_name, language_code),
            "chat": dict(self.chats[chat_id]), "date": date or int(time.time()),
        }
        if message_thread_id is not None:
            message["message_thread_id"] = message_thread_id
        if is_topic_message:
            message["is_topic_message"] = True
        if reply_to_message is not None:
            message["reply_to_message"] = self._replied(chat_id, reply_to_message)
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        _add_text(message, "text", text, entities)
        media = {"document": document, "photo": photo, "voice": voice, "audio": audio,
                 "video": video, "animation": animation}
        for kind, stored in media.items():
            if stored is not None:
                message.update(self.media_object(kind, stored))
        _add_text(message, "caption", caption, caption_entities)
        self._messages[(chat_id, message["message_id"])] = message
        update: JSON = {"update_id": self._next_update_id, "message": message}
        if enqueue:
            return self.enqueue_update(update)
        self._next_update_id += 1
        self.updates[update["update_id"]] = update
        return update

    def _ensure_chat(self, chat_id: int, chat_type: str | None, title: str | None,
                     is_forum: bool, username: str | None, first_name: str) -> None:
        known = self.chats.get(chat_id)
        if known is None or (chat_type and known["type"] != chat_type) or is_forum:
            self.add_chat(chat_id, chat_type or (known or {}).get("type"), title=title,
                          is_forum=is_forum, username=username, first_name=first_name)

    def _replied(self, chat_id: int, reply_to_message: int | JSON) -> JSON:
        if isinstance(reply_to_message, int):
            replied = self._messages.get((chat_id, reply_to_message))
            if replied is None:
                raise KeyError(f"no message {reply_to_message} in chat {chat_id} to reply to")
        else:
            replied = reply_to_message
        return {k: v for k, v in replied.items() if k != "reply_to_message"}

    def user_document(self, chat_id: int, user_id: int | None, data: bytes,
                      file_name: str = "file.bin", mime_type: str = "application/octet-stream",
                      caption: str | None = None, **kwargs: Any) -> JSON:
        stored = self.add_file(data, file_name, mime_type)
        return self.user_message(chat_id, user_id, caption=caption, document=stored, **kwargs)

    def user_photo(self, chat_id: int, user_id: int | None, data: bytes,
                   caption: str | None = None, *, width: int = 1280, height: int = 960,
                   **kwargs: Any) -> JSON:
        stored = self.add_file(data, None, "image/jpeg", kind="photo", width=width,
                               height=height)
        return self.user_message(chat_id, user_id, caption=caption, photo=stored, **kwargs)

    def user_voice(self, chat_id: int, user_id: int | None, data: bytes, *, duration: int = 3,
                   mime_type: str = "audio/ogg", caption: str | None = None,
                   **kwargs: Any) -> JSON:
        stored = self.add_file(data, None, mime_type, kind="voice", duration=duration)
        return self.user_message(chat_id, user_id, caption=caption, voice=stored, **kwargs)

    def edited_message(self, chat_id: int, message_id: int, text: str | None = None, *,
                       caption: str | None = None, entities: list[JSON] | None = None,
                       edit_date: int | None = None) -> JSON:
        """Queue an ``edited_message`` update for a message a user sent earlier."""
        original = self._messages.get((chat_id, message_id))
        if original is None:
            raise KeyError(f"no message {message_id} in chat {chat_id}")
        edited = copy.deepcopy(original)
        edited["edit_date"] = edit_date or int(time.time())
        if text is not None:
            edited.pop("entities", None)
            _add_text(edited, "text", text, entities)
        if caption is not None:
            edited["caption"] = caption
        self._messages[(chat_id, message_id)] = edited
        return self.enqueue_update({"edited_message": edited})


def _sender(user_id: int, username: str | None, first_name: str, last_name: str | None,
            language_code: str | None) -> JSON:
    sender: JSON = {"id": user_id, "is_bot": False, "first_name": first_name}
    if last_name:
        sender["last_name"] = last_name
    if username:
        sender["username"] = username
    if language_code:
        sender["language_code"] = language_code
    return sender


def _add_text(message: JSON, field: str, text: str | None,
              entities: list[JSON] | None) -> None:
    """Set ``text`` or ``caption`` with its entities (detected as Telegram does when None)."""
    if text is None:
        return
    message[field] = text
    found = entities if entities is not None else detect_entities(text)
    if found:
        message["entities" if field == "text" else "caption_entities"] = found
