"""The files of a reply on Slack: one files_upload_v2 call for all of them (the three steps:
files.getUploadURLExternal per file, the uploads, one files.completeUploadExternal that shares
them together), into the chat's conversation or thread, the reply's text as the initial
comment when it fits one message. A Markdown image's alt text becomes its file's title and
alt text."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from picobridge.contract import ChatRef, OutboundFile

log = logging.getLogger("picobridge.slack.send")


def files_fingerprint(files: tuple[OutboundFile, ...]) -> str:
    """What the upload sends, for the record of a reply's parts (adapters/common/partlog)."""
    return "files:" + "|".join(f"{f.path}:{f.size}" for f in files)


async def upload_files(client: AsyncWebClient, chat: ChatRef, files: tuple[OutboundFile, ...],
                       comment: str | None) -> None:
    uploads: list[dict[str, Any]] = []
    notes = []
    for file in files:
        try:
            data = await asyncio.to_thread(Path(file.path).read_bytes)
        except OSError:
            # Its copy is gone (removed by hand, or kept past attachments.retention_days).
            log.warning("file %s not sent to Slack: its stored copy %s is gone", file.name,
                        file.path)
            notes.append(f"📎 {file.name} was not sent: the file is no longer there.")
            continue
        upload: dict[str, Any] = {"file": data, "filename": file.name,
                                  "title": file.caption or file.name}
        if file.caption:
            upload["alt_txt"] = file.caption[:1000]
        uploads.append(upload)
    text = "\n\n".join(part for part in (comment, "\n".join(notes)) if part) or None
    if not uploads:
        if text:
            await client.chat_postMessage(channel=chat.chat_id, text=text,
                                          thread_ts=chat.thread_id)
        return
    await client.files_upload_v2(channel=chat.chat_id, thread_ts=chat.thread_id,
                                 initial_comment=text, file_uploads=uploads)
