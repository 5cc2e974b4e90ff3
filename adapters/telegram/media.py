"""The files of a reply on Telegram: which Bot API method sends each, albums, captions, limits.

Images go as photos, 2 to 10 of them in a row as one album (sendMediaGroup); Ogg/Opus audio
as a voice note, other audio as audio, the rest as documents. The reply's text rides as the
first file's caption when it fits Telegram's 1,024 characters after rendering (the sender
decides, see send.py); a Markdown image's alt text is its photo's own caption. A file over
what a bot may upload (50 MB; 10 MB for a photo, which then goes as a document) becomes a
note in the chat instead of a request Telegram refuses on every retry.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telegram import (
    Bot,
    InputMediaPhoto,
    Message,
)

from picobridge.adapters.telegram.render import TelegramChunk, render_telegram
from picobridge.contract import OGG_OPUS, OutboundFile

log = logging.getLogger("picobridge.telegram")

CAPTION_LIMIT = 1024
ALBUM_MAX = 10
UPLOAD_MAX = 50 * 1024 * 1024
PHOTO_MAX = 10 * 1024 * 1024
_PHOTO_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"})


@dataclass(frozen=True, slots=True)
class MediaStep:
    """One Bot API call carrying files: one file, or an album of photos."""

    method: str  # "photo", "album", "voice", "audio", "document"
    files: tuple[OutboundFile, ...]
    caption: TelegramChunk | None = None  # the reply's text, on the first file

    def fingerprint(self) -> str:
        return f"{self.method}:" + "|".join(f"{f.path}:{f.size}" for f in self.files)


@dataclass(frozen=True, slots=True)
class NoteStep:
    """A file that cannot go: a short line in its place."""

    text: str


def method_for(file: OutboundFile) -> str | None:
    """The way a file goes, or None when a bot may not upload it at all."""
    if file.size > UPLOAD_MAX:
        return None
    if file.mime in _PHOTO_TYPES and file.size <= PHOTO_MAX:
        return "photo"
    if file.mime == OGG_OPUS:
        return "voice"
    if file.mime.startswith("audio/"):
        return "audio"
    return "document"


def caption_for(markdown: str) -> TelegramChunk | None:
    """The reply's text as one caption, or None when it does not fit one."""
    if not markdown.strip():
        return None
    chunks = render_telegram(markdown, CAPTION_LIMIT)
    return chunks[0] if len(chunks) == 1 else None


def media_steps(files: tuple[OutboundFile, ...],
                caption: TelegramChunk | None) -> list[MediaStep | NoteStep]:
    """The calls that send `files` in order; `caption` goes on the first file."""
    steps: list[MediaStep | NoteStep] = []
    photos: list[OutboundFile] = []

    def flush() -> None:
        while photos:
            group = photos[:ALBUM_MAX]
            del photos[:ALBUM_MAX]
            steps.append(MediaStep("album" if len(group) > 1 else "photo", tuple(group)))

    for file in files:
        method = method_for(file)
        if not Path(file.path).is_file():
            # Its copy is gone (removed by hand, or kept past attachments.retention_days).
            log.warning("file %s not sent to Telegram: its stored copy %s is gone", file.name,
                        file.path)
            flush()
            steps.append(NoteStep(f"📎 {file.name} was not sent: the file is no longer "
                                  "there."))
            continue
        if method == "photo":
            photos.append(file)
            continue
        flush()
        if method is None:
            log.warning("file %s not sent to Telegram: %d bytes, over the 50 MB a bot may send",
                        file.name, file.size)
            steps.append(NoteStep(f"📎 {file.name} was not sent: it is "
                                  f"{file.size / 1048576:.0f} MB, and Telegram takes files "
                                  "up to 50 MB from a bot."))
        else:
            steps.append(MediaStep(method, (file,)))
    flush()
    if caption is not None:
        for index, step in enumerate(steps):
            if isinstance(step, MediaStep):
                steps[index] = MediaStep(step.method, step.files, caption)
                break
    return steps


def refused_note(step: MediaStep) -> NoteStep:
    """What goes in place of files Telegram refused: the text they carried, and why."""
    names = ", ".join(f.name for f in step.files)
    them = "them" if len(step.files) > 1 else "it"
    note = f"📎 {names} could not be sent: Telegram refused {them}."
    text = f"{step.caption.text}\n\n{note}" if step.caption is not None else note
    return NoteStep(text[:4096])


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def _caption(step: MediaStep, file: OutboundFile, first: bool) -> dict[str, Any]:
    if first and step.caption is not None:
        return {"caption": step.caption.text, "caption_entities": step.caption.entities or None}
    if file.caption:
        return {"caption": file.caption[:CAPTION_LIMIT]}
    return {}


async def send_media(bot: Bot, chat_id: int, thread: int | None, step: MediaStep,
                     common: dict[str, Any]) -> Message | None:
    """Make the step's call; `common` holds reply_parameters and reply_markup. Returns the
    message that carries the markup (None for an album, which cannot carry any)."""
    data = [await asyncio.to_thread(_read, f.path) for f in step.files]
    if step.method == "album":
        media = [InputMediaPhoto(blob, filename=f.name, **_caption(step, f, i == 0))
                 for i, (f, blob) in enumerate(zip(step.files, data, strict=True))]
        await bot.send_media_group(chat_id, media, message_thread_id=thread,
                                   reply_parameters=common.get("reply_parameters"))
        return None
    file, blob = step.files[0], data[0]
    args: dict[str, Any] = {"message_thread_id": thread, "filename": file.name,
                            **_caption(step, file, True), **common}
    if step.method == "photo":
        return await bot.send_photo(chat_id, blob, **args)
    if step.method == "voice":
        return await bot.send_voice(chat_id, blob, **args)
    if step.method == "audio":
        return await bot.send_audio(chat_id, blob, **args)
    return await bot.send_document(chat_id, blob, **args)
