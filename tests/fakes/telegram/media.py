"""The fake Telegram's file-sending methods: sendDocument, sendPhoto, sendVoice, sendAudio and
sendMediaGroup, as multipart uploads, strict where Telegram is (a caption of at most 1,024
characters, an album of 2 to 10 items, 50 MB per file a bot uploads and 10 MB per photo, a
photo that is an image, a voice note that is Ogg), with the bytes recorded."""

from __future__ import annotations

import json
import secrets
from typing import Any

from tests.fakes.server import JSON
from tests.fakes.telegram.api import TelegramBotApi
from tests.fakes.telegram.base import MethodHandler
from tests.fakes.telegram.entities import formatted_text
from tests.fakes.telegram.model import (
    MAX_CAPTION_LENGTH,
    MAX_UPLOAD_SIZE,
    ApiError,
    SentMessage,
    StoredFile,
    UploadedFile,
    bad_request,
)

MAX_PHOTO_SIZE = 10 * 1024 * 1024
ALBUM_SIZES = range(2, 11)
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"RIFF")


class TelegramMedia(TelegramBotApi):
    """What the bot sends as files, and reading them back."""

    FLOOD_METHODS = TelegramBotApi.FLOOD_METHODS | {"sendPhoto", "sendVoice", "sendAudio",
                                                    "sendMediaGroup"}

    def methods(self) -> dict[str, MethodHandler]:
        def single(kind: str) -> MethodHandler:
            async def handler(params: JSON) -> JSON:
                return self._send_file(kind, params)
            return handler

        return {**super().methods(), "sendDocument": single("document"),
                "sendPhoto": single("photo"), "sendVoice": single("voice"),
                "sendAudio": single("audio"), "sendMediaGroup": self._send_media_group}

    # ---- reading back ------------------------------------------------------------------------

    def sent_files(self, chat_id: int | None = None) -> list[SentMessage]:
        """Messages the bot sent with a file (any kind), in sending order."""
        return [m for m in self.sent_messages(chat_id) if m.file is not None]

    # ---- sending -----------------------------------------------------------------------------

    def _upload(self, kind: str, value: Any) -> StoredFile:
        if value is None or value == "":
            raise bad_request(f"there is no {kind} in the request")
        if isinstance(value, str):
            if value in self.files:
                return self.files[value]
            raise bad_request("wrong file identifier/HTTP URL specified")
        if not isinstance(value, UploadedFile):
            raise bad_request(f"can't parse {kind}")
        if not value.data:
            raise bad_request("file must be non-empty")
        if len(value.data) > MAX_UPLOAD_SIZE:
            raise ApiError(413, "Request Entity Too Large")
        if kind == "photo":
            if len(value.data) > MAX_PHOTO_SIZE:
                raise bad_request("PHOTO_INVALID_DIMENSIONS")
            if not value.data.startswith(_IMAGE_MAGIC):
                raise bad_request("IMAGE_PROCESS_FAILED")
        if kind == "voice" and not value.data.startswith(b"OggS"):
            raise bad_request("wrong file type: a voice note must be Ogg/Opus")
        return self.add_file(value.data, value.filename, value.content_type, kind=kind)

    def _caption(self, message: JSON, source: JSON) -> None:
        caption, entities = formatted_text(source.get("caption"), source.get("parse_mode"),
                                           source.get("caption_entities"),
                                           limit=MAX_CAPTION_LENGTH, what="message caption")
        if caption:
            message["caption"] = caption
        if entities:
            message["caption_entities"] = entities

    def _send_file(self, kind: str, params: JSON) -> JSON:
        chat_id = self.target_chat(params)
        stored = self._upload(kind, params.get(kind))
        message = self._bot_message(chat_id, params)
        message.update(self.media_object(kind, stored))
        self._caption(message, params)
        self._record_sent(message, kind, params, stored)
        return message

    async def _send_media_group(self, params: JSON) -> list[JSON]:
        chat_id = self.target_chat(params)
        raw = params.get("media")
        try:
            items = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            raise bad_request("can't parse media JSON object") from None
        if not isinstance(items, list) or len(items) not in ALBUM_SIZES:
            raise bad_request("wrong number of media in the album: must be 2-10")
        kinds = {item.get("type") for item in items if isinstance(item, dict)}
        if not kinds <= {"photo", "video"} and len(kinds) > 1:
            raise bad_request("documents and audio can't be mixed with other media")
        files = []
        for item in items:
            value = item.get("media")
            if isinstance(value, str) and value.startswith("attach://"):
                value = params.get(value[len("attach://"):])
                if value is None:
                    raise bad_request("file for media not found in the request")
            files.append((item, self._upload(str(item.get("type")), value)))
        group = secrets.token_hex(8)
        sent = []
        for item, stored in files:
            message = self._bot_message(chat_id, params)
            message["media_group_id"] = group
            message.update(self.media_object(str(item["type"]), stored))
            self._caption(message, item)
            self._record_sent(message, str(item["type"]), params, stored)
            sent.append(message)
        return sent
