"""Fetching the files people attach on Discord, under the shared attachment policy.

Attachment URLs are signed CDN links that need no token, so none is sent with them. The
declared size is checked before the download and the body is read only up to the limit.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import discord

from picobridge.adapters.common.attachments import AttachmentPolicy, AttachmentRefused
from picobridge.adapters.common.downloads import TransientDownloadError, with_retries
from picobridge.adapters.discord.parse import PLATFORM
from picobridge.contract import Attachment

log = logging.getLogger("picobridge.discord.files")


class DiscordFiles:
    def __init__(self, session: aiohttp.ClientSession, policy: AttachmentPolicy) -> None:
        self._session = session
        self._policy = policy

    async def fetch(self, attachment: discord.Attachment) -> Attachment:
        """Download one attachment; AttachmentRefused carries a message for the person."""
        name = attachment.filename or "file"
        self._policy.check_size(name, attachment.size)
        mime = attachment.content_type
        async with asyncio.timeout(self._policy.download_timeout):
            data = await with_retries(lambda: self._download(attachment.url, name), name,
                                      "Discord", log,
                                      transient=(aiohttp.ClientError, TransientDownloadError))
        # A voice message says how long it is.
        return await asyncio.to_thread(self._policy.accept, PLATFORM, name, data, mime,
                                       attachment.duration)

    async def _download(self, url: str, name: str) -> bytes:
        async with self._session.get(url) as resp:
            if resp.status == 429 or resp.status >= 500:
                raise TransientDownloadError(f"HTTP {resp.status}")
            if resp.status != 200:
                raise AttachmentRefused(
                    f"Discord refused the download of {name!r} (HTTP {resp.status}).")
            limit = self._policy.max_bytes
            chunks: list[bytes] = []
            total = 0
            async for chunk in resp.content.iter_chunked(1 << 16):
                total += len(chunk)
                if total > limit:
                    self._policy.check_size(name, total)  # raises: stop reading here
                chunks.append(chunk)
            return b"".join(chunks)

