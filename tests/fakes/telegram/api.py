"""The bot's side of the fake Telegram: the Bot API methods picobridge calls to talk to users
(getMe, sendMessage, editMessageText, editMessageReplyMarkup, deleteMessage, sendChatAction,
the command lists in commands.py), and what tests read back from them; files go in media.py."""

from __future__ import annotations

import time

from tests.fakes.server import JSON
from tests.fakes.telegram.base import MethodHandler
from tests.fakes.telegram.commands import TelegramCommands
from tests.fakes.telegram.entities import formatted_text
from tests.fakes.telegram.keyboards import check_markup
from tests.fakes.telegram.model import (
    MAX_TEXT_LENGTH,
    ApiError,
    ChatAction,
    SentMessage,
    StoredFile,
    bad_request,
)

CHAT_ACTIONS = frozenset({
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note",
    "upload_video_note",
})
_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


class TelegramBotApi(TelegramCommands):
    """The sending methods, and the record of what the bot sent."""

    def methods(self) -> dict[str, MethodHandler]:
        return {**super().methods(), "getMe": self._get_me, "sendMessage": self._send_message,
                "editMessageText": self._edit_message_text,
                "editMessageReplyMarkup": self._edit_message_reply_markup,
                "deleteMessage": self._delete_message, "sendChatAction": self._send_chat_action}

    # ---- reading back ------------------------------------------------------------------------

    def sent_messages(self, chat_id: int | None = None, *,
                      include_deleted: bool = False) -> list[SentMessage]:
        """Messages the bot sent (text and documents) in sending order, current state."""
        return [m for m in self._sent if (chat_id is None or m.chat_id == chat_id)
                and (include_deleted or not m.deleted)]

    def texts(self, chat_id: int | None = None) -> list[str]:
        """The visible text (or caption) of each message the bot sent."""
        return [m.text or m.caption or "" for m in self.sent_messages(chat_id)]

    async def wait_for_messages(self, chat_id: int | None = None, count: int = 1,
                                timeout: float = 30.0) -> list[SentMessage]:
        """Wait until the bot has ``count`` visible messages in the chat; return them all."""
        await self.wait_for(lambda: len(self.sent_messages(chat_id)) >= count,
                            f"{count} message(s) in chat {chat_id}", timeout)
        return self.sent_messages(chat_id)

    # ---- sending -----------------------------------------------------------------------------

    async def _get_me(self, params: JSON) -> JSON:
        return dict(self.bot_user)

    def _reply_target(self, chat_id: int, params: JSON) -> JSON | None:
        reply = params.get("reply_parameters")
        allow_missing = bool(params.get("allow_sending_without_reply"))
        if isinstance(reply, dict):
            message_id = reply.get("message_id")
            allow_missing = allow_missing or bool(reply.get("allow_sending_without_reply"))
            reply_chat = reply.get("chat_id", chat_id)
        else:
            message_id, reply_chat = params.get("reply_to_message_id"), chat_id
        if message_id is None:
            return None
        target = self._messages.get((reply_chat, message_id)) if isinstance(reply_chat, int) \
            else None
        if target is None:
            if allow_missing:
                return None
            raise bad_request("message to be replied not found")
        return {k: v for k, v in target.items() if k != "reply_to_message"}

    def _bot_message(self, chat_id: int, params: JSON) -> JSON:
        markup = check_markup(params.get("reply_markup"))
        reply = self._reply_target(chat_id, params)
        message: JSON = {"message_id": self.new_message_id(chat_id), "from": dict(self.bot_user),
                         "chat": dict(self.chat(chat_id)), "date": int(time.time())}
        thread = params.get("message_thread_id")
        if thread is not None:
            message["message_thread_id"] = thread
            if self.chat(chat_id).get("is_forum"):
                message["is_topic_message"] = True
        if reply is not None:
            message["reply_to_message"] = reply
        if markup is not None:
            message["reply_markup"] = markup
        return message

    def _record_sent(self, message: JSON, kind: str, params: JSON,
                     stored: StoredFile | None) -> None:
        reply = message.get("reply_to_message")
        self._messages[(message["chat"]["id"], message["message_id"])] = message
        self._sent.append(SentMessage(
            chat_id=message["chat"]["id"], message_id=message["message_id"], kind=kind,
            text=message.get("text"), caption=message.get("caption"),
            entities=list(message.get("entities") or message.get("caption_entities") or []),
            reply_to_message_id=reply["message_id"] if reply else None,
            message_thread_id=params.get("message_thread_id"), file=stored, params=params,
            date=message["date"], raw=message))

    async def _send_message(self, params: JSON) -> JSON:
        chat_id = self.target_chat(params)
        text, entities = formatted_text(params.get("text"), params.get("parse_mode"),
                                        params.get("entities"), limit=MAX_TEXT_LENGTH,
                                        what="message")
        if not text:
            raise bad_request("message text is empty")
        message = self._bot_message(chat_id, params)
        message["text"] = text
        if entities:
            message["entities"] = entities
        self._record_sent(message, "text", params, None)
        return message

    # ---- changing what was sent --------------------------------------------------------------

    def _editable(self, params: JSON) -> tuple[JSON, SentMessage]:
        if params.get("inline_message_id") is not None:
            raise bad_request("message to edit not found")
        chat_id = self.target_chat(params)
        message_id = params.get("message_id")
        if message_id is None:
            raise bad_request("message identifier is not specified")
        message = self._messages.get((chat_id, message_id))
        if message is None:
            raise bad_request("message to edit not found")
        sent = next((m for m in self._sent if (m.chat_id, m.message_id) == (chat_id, message_id)
                     and not m.deleted), None)
        if sent is None:
            raise bad_request("message can't be edited")
        return message, sent

    async def _edit_message_text(self, params: JSON) -> JSON:
        text, entities = formatted_text(params.get("text"), params.get("parse_mode"),
                                        params.get("entities"), limit=MAX_TEXT_LENGTH,
                                        what="message")
        if not text:
            raise bad_request("message text is empty")
        markup = check_markup(params.get("reply_markup"))
        message, sent = self._editable(params)
        if "text" not in message:
            raise bad_request("there is no text in the message to edit")
        if message.get("text") == text and (message.get("entities") or []) == entities \
                and message.get("reply_markup") == markup:
            raise ApiError(400, _NOT_MODIFIED)
        # An edit without reply_markup takes the inline keyboard away, as on Telegram.
        edited = {k: v for k, v in message.items() if k not in ("entities", "reply_markup")}
        edited["text"] = text
        if entities:
            edited["entities"] = entities
        if markup is not None:
            edited["reply_markup"] = markup
        edited["edit_date"] = int(time.time())
        self._messages[(sent.chat_id, sent.message_id)] = edited
        sent.edits.append(sent.text)
        sent.text, sent.entities, sent.raw = text, list(entities), edited
        return edited

    async def _edit_message_reply_markup(self, params: JSON) -> JSON:
        markup = check_markup(params.get("reply_markup"))
        message, sent = self._editable(params)
        if message.get("reply_markup") == markup:
            raise ApiError(400, _NOT_MODIFIED)
        edited = {k: v for k, v in message.items() if k != "reply_markup"}
        if markup is not None:
            edited["reply_markup"] = markup
        edited["edit_date"] = int(time.time())
        self._messages[(sent.chat_id, sent.message_id)] = edited
        sent.raw = edited
        return edited

    async def _delete_message(self, params: JSON) -> bool:
        chat_id = self.target_chat(params)
        message_id = params.get("message_id")
        if not isinstance(message_id, int) or (chat_id, message_id) not in self._messages:
            raise bad_request("message to delete not found")
        del self._messages[(chat_id, message_id)]
        for sent in self._sent:
            if (sent.chat_id, sent.message_id) == (chat_id, message_id):
                sent.deleted = True
        return True

    async def _send_chat_action(self, params: JSON) -> bool:
        chat_id = self.target_chat(params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise bad_request("wrong parameter action in request")
        self.chat_actions.append(ChatAction(chat_id, str(action),
                                            params.get("message_thread_id"), time.monotonic()))
        return True
