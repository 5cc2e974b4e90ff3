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
from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.discord.parse import PLATFORM
from picobridge.contract import Attachment

log = logging.getLogger("picobridge.discord.files")

ATTEMPTS = 3
RETRY_DELAY = 0.5


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
            data = await self._with_retries(attachment.url, name)
        # A voice message says how long it is.
        return await asyncio.to_thread(self._policy.accept, PLATFORM, name, data, mime,
                                       attachment.duration)

    async def _with_retries(self, url: str, name: str) -> bytes:
        backoff = Backoff(RETRY_DELAY)
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self._download(url, name)
            except (aiohttp.ClientError, _Transient) as exc:
                log.warning("download of a Discord attachment failed (attempt %d/%d): %s",
                            attempt, ATTEMPTS, exc.__class__.__name__)
                if attempt == ATTEMPTS:
                    break
                await backoff.wait()
        raise AttachmentRefused(f"I could not download {name!r} from Discord right now; "
                                "please send it again in a moment.")

    async def _download(self, url: str, name: str) -> bytes:
        async with self._session.get(url) as resp:
            if resp.status == 429 or resp.status >= 500:
                raise _Transient(f"HTTP {resp.status}")
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


class _Transient(Exception):
    """The CDN failed in a way that may pass."""
