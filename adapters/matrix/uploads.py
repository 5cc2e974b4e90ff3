"""The files of a reply on Matrix: each uploaded to the media repository and posted as an
m.image, m.audio, m.video or m.file event of its own (one part each, so a retry or a restart
sends each once), with a Markdown image's alt text as its caption (MSC2530: the body differs
from the file name). A file whose stored copy is gone becomes a short note instead."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mautrix.client import ClientAPI

from picobridge.contract import OutboundFile

log = logging.getLogger("picobridge.matrix")

MISSING = "📎 {name} was not sent: the file is no longer there."


@dataclass(frozen=True, slots=True)
class UploadStep:
    file: OutboundFile

    def fingerprint(self) -> str:
        return f"file:{self.file.name}:{self.file.path}:{self.file.size}"


def msgtype(mime: str) -> str:
    major = mime.split("/", 1)[0]
    return {"image": "m.image", "audio": "m.audio", "video": "m.video"}.get(major, "m.file")


async def file_content(client: ClientAPI, file: OutboundFile) -> dict[str, Any]:
    """The event content for one file: uploaded first, or a note when its copy is gone."""
    try:
        data = await asyncio.to_thread(Path(file.path).read_bytes)
    except OSError:
        log.warning("file %s not sent to Matrix: its stored copy %s is gone", file.name,
                    file.path)
        return {"msgtype": "m.notice", "body": MISSING.format(name=file.name)}
    uri = await client.upload_media(data, mime_type=file.mime, filename=file.name,
                                    size=len(data))
    return {"msgtype": msgtype(file.mime), "body": file.caption or file.name,
            "filename": file.name, "url": str(uri),
            "info": {"mimetype": file.mime, "size": len(data)}}
