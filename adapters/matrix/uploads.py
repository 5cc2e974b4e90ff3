"""The files of a reply on Matrix: each uploaded to the media repository and posted as an
m.image, m.audio, m.video or m.file event of its own (one part each, so a retry or a restart
sends each once), with a Markdown image's alt text as its caption (MSC2530: the body differs
from the file name). A file whose stored copy is gone becomes a short note instead.

Into an encrypted room (matrix.e2ee) a file goes encrypted: the media repository holds only
its ciphertext, and the key travels inside the (encrypted) event, as clients expect."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mautrix.client import Client, ClientAPI
from mautrix.errors import MNotFound
from mautrix.types import EventType, RoomID

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


async def file_content(client: ClientAPI, room: str, file: OutboundFile) -> dict[str, Any]:
    """The event content for one file: uploaded first, or a note when its copy is gone."""
    try:
        data = await asyncio.to_thread(Path(file.path).read_bytes)
    except OSError:
        log.warning("file %s not sent to Matrix: its stored copy %s is gone", file.name,
                    file.path)
        return {"msgtype": "m.notice", "body": MISSING.format(name=file.name)}
    return {"msgtype": msgtype(file.mime), "body": file.caption or file.name,
            "filename": file.name, **await upload(client, room, data, file.mime, file.name),
            "info": {"mimetype": file.mime, "size": len(data)}}


async def upload(client: ClientAPI, room: str, data: bytes, mime: str,
                 name: str) -> dict[str, Any]:
    """`data` in the media repository, as the part of an event that points to it: `url`, or
    `file` (address and key) when the room is encrypted."""
    if not await encrypted_room(client, room):
        uri = await client.upload_media(data, mime_type=mime, filename=name, size=len(data))
        return {"url": str(uri)}
    from mautrix.crypto.attachments import encrypt_attachment

    ciphertext, key = await asyncio.to_thread(encrypt_attachment, data)
    key.url = await client.upload_media(ciphertext, mime_type="application/octet-stream",
                                        filename=name, size=len(ciphertext))
    return {"file": key.serialize()}


async def encrypted_room(client: ClientAPI, room: str) -> bool:
    """Whether what goes into `room` is encrypted (only with matrix.e2ee: the client holds
    the crypto machine), looked up like mautrix does when sending an event."""
    if not isinstance(client, Client) or client.crypto is None or client.state_store is None:
        return False
    known = await client.state_store.is_encrypted(RoomID(room))
    if known is not None:
        return bool(known)
    try:
        await client.get_state_event(RoomID(room), EventType.ROOM_ENCRYPTION)
    except MNotFound:
        return False
    return True
