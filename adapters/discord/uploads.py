"""The agent's files as Discord attachments: up to 10 on one message (Discord's limit), each
within the upload limit (10 MiB for a bot in a server without boosts); a file too big or gone
is named in the message instead."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Sequence
from pathlib import Path

import discord

from picobridge.contract import OutboundFile

log = logging.getLogger("picobridge.discord.send")

FILES_PER_MESSAGE = 10
MAX_UPLOAD = 10 * 1024 * 1024


def fingerprint(files: Sequence[OutboundFile]) -> str:
    """What a message of files sends, for the record of a reply's parts."""
    return "files:" + "|".join(f"{f.path}:{f.size}" for f in files)


def batches(files: Sequence[OutboundFile]) -> list[tuple[OutboundFile, ...]]:
    return [tuple(files[i:i + FILES_PER_MESSAGE])
            for i in range(0, len(files), FILES_PER_MESSAGE)]


async def send_files(channel: discord.abc.Messageable, files: Sequence[OutboundFile],
                     comment: str | None, nonce: str | None) -> None:
    attached: list[discord.File] = []
    notes: list[str] = []
    for file in files:
        if file.size > MAX_UPLOAD:
            notes.append(f"📎 {file.name} was not sent: it is larger than Discord takes "
                         f"from a bot ({MAX_UPLOAD // (1024 * 1024)} MB).")
            continue
        try:
            data = await asyncio.to_thread(Path(file.path).read_bytes)
        except OSError:
            # Its copy is gone (removed by hand, or kept past attachments.retention_days).
            log.warning("file %s not sent to Discord: its stored copy is gone", file.name)
            notes.append(f"📎 {file.name} was not sent: the file is no longer there.")
            continue
        attached.append(discord.File(io.BytesIO(data), filename=file.name,
                                     description=file.caption[:1024] or None))
    text = "\n\n".join(part for part in (comment, "\n".join(notes)) if part)
    if not attached and not text:
        return
    kwargs: dict[str, object] = {"files": attached} if attached else {}
    if nonce is not None:
        kwargs["nonce"] = nonce
    await channel.send(text or None, **kwargs)  # type: ignore[call-overload]
