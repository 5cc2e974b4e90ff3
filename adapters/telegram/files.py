"""Fetching the files users send: getFile, the download, and saving under the attachment policy.

One file gets `attachments.download_timeout` seconds in all, retries of transient failures
included. A file Telegram does not hand over in that time is left out: the sender is told which
one, and the message goes on without it. Without such a bound, one hanging download would hold
its chat's later messages (which must wait for it, to keep their order) and, once retried,
never end. Other chats never wait for it (see intake.Dispatcher).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from urllib.request import getproxies

import aiohttp
import httpx
from telegram import Bot
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter, TelegramError

from picobridge.adapters.common.attachments import AttachmentPolicy, AttachmentRefused
from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.http import environment_proxy
from picobridge.adapters.telegram.normalise import PLATFORM, MediaRef
from picobridge.adapters.telegram.parse import UNREADABLE
from picobridge.adapters.telegram.storage import StorageWait, disk_outage
from picobridge.contract import Attachment, StorageUnavailable

log = logging.getLogger("picobridge.telegram")

# Bots may download at most 20 MB through getFile, whatever attachments.max_bytes says.
DOWNLOAD_LIMIT = 20 * 1024 * 1024
# Between tries of a failing getFile or download, within the file's time.
RETRY_CAP = 8.0
# Per network step of a download (connecting, then each read); attachments.download_timeout
# bounds the whole.
STREAM_CONNECT = 10.0
STREAM_READ = 20.0


class Fetcher:
    def __init__(self, bot: Bot, policy: AttachmentPolicy, storage: StorageWait,
                 scrub: Callable[[str], str], proxy: str | None = None,
                 platform: str = PLATFORM) -> None:
        self._bot = bot
        self._platform = platform  # the bot's name as the bridge knows it: its media folder
        self._proxy = proxy
        self._policy = policy
        self._storage = storage
        self._scrub = scrub
        # Downloads go over aiohttp, the stack the bot's calls already use (http.py): httpx
        # would load httpcore, anyio and h11 at the first file (about 4 MB resident, for
        # good) and build an SSL context for each download (0.8 MB more each time). With
        # telegram.proxy_url they go through httpx as the calls do (SOCKS).
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def fetch(self, ref: MediaRef) -> Attachment:
        """The file as the agent gets it; AttachmentRefused carries a message for the user."""
        self._policy.check_size(ref.name, ref.size, DOWNLOAD_LIMIT)
        limit = self._policy.download_timeout
        try:
            async with asyncio.timeout(limit):
                data = await self._download(ref)
        except TimeoutError:
            log.warning("a %s was not fetched from Telegram within %.0fs; the message goes on "
                        "without it", ref.kind, limit)
            raise AttachmentRefused(
                f"I could not fetch the file {ref.name!r} from Telegram (no answer within "
                f"{limit:g} s). Please send it again.") from None
        return await self._storage.run("saving a received file", lambda: self._save(ref, data))

    async def _download(self, ref: MediaRef) -> bytes:
        backoff = Backoff(cap=RETRY_CAP)
        while True:
            try:
                file = await self._bot.get_file(ref.file_id)
                self._policy.check_size(ref.name, file.file_size, DOWNLOAD_LIMIT)
                return await self._stream(ref, file.file_path)
            except BadRequest as exc:
                if "too big" in exc.message.lower():
                    raise AttachmentRefused(f"The file {ref.name!r} is over the 20 MB that "
                                            "Telegram lets bots download.") from None
                raise AttachmentRefused(f"Telegram would not hand over the file {ref.name!r} "
                                        f"({self._scrub(exc.message)}).") from None
            except InvalidToken:
                # A download URL Telegram no longer knows answers 404, which the library
                # reports like a bad token; the token itself is checked by getUpdates.
                raise AttachmentRefused(f"The file {ref.name!r} is no longer available on "
                                        "Telegram.") from None
            except RetryAfter as exc:
                check_cancelled()
                await asyncio.sleep(retry_seconds(exc))
                continue
            except TelegramError as exc:
                check_cancelled()
                reason = self._scrub(f"{exc.__class__.__name__}: {exc}")
            except (aiohttp.ClientError, httpx.HTTPError) as exc:
                # Only the class: the message would hold the URL, and the URL the token.
                library = exc.__class__.__module__.partition(".")[0]
                reason = f"{library}.{exc.__class__.__name__}"
            except UNREADABLE as exc:
                # getFile answered something that is not a file (a proxy, an API change).
                reason = f"an answer of the wrong shape ({exc.__class__.__name__})"
            log.warning("fetching a %s failed (%s); trying again in %.0fs", ref.kind, reason,
                        backoff.delay)
            await backoff.wait()

    async def _stream(self, ref: MediaRef, file_path: str | None) -> bytes:
        """The file's bytes, read no further than the limit whatever getFile claimed (a local
        Bot API server or a proxy may claim anything). PTB's own download reads it whole."""
        if not file_path:
            raise AttachmentRefused(f"Telegram would not hand over the file {ref.name!r}.")
        if not file_path.startswith(("http://", "https://")):
            # A local Bot API server (--local) hands over a path on this machine.
            return await asyncio.to_thread(self._read_local, ref, Path(file_path))
        if self._proxy is not None:
            return await self._stream_httpx(ref, file_path)
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        timeout = aiohttp.ClientTimeout(total=None, connect=STREAM_CONNECT,
                                        sock_connect=STREAM_CONNECT, sock_read=STREAM_READ)
        # HTTPS_PROXY / NO_PROXY as the bot's calls take them (http.py), read at each download
        # (rare: not worth the transport's cache).
        proxy = environment_proxy(file_path, getproxies())
        async with self._session.get(file_path, timeout=timeout, proxy=proxy) as resp:
            _check_status(resp.status)
            return bytes(await self._policy.read_capped(
                ref.name, resp.content.iter_chunked(1 << 16), DOWNLOAD_LIMIT))

    async def _stream_httpx(self, ref: MediaRef, file_path: str) -> bytes:
        timeout = httpx.Timeout(STREAM_READ, connect=STREAM_CONNECT)
        async with (httpx.AsyncClient(proxy=self._proxy, timeout=timeout) as client,
                    client.stream("GET", file_path) as resp):
            _check_status(resp.status_code)
            return bytes(await self._policy.read_capped(
                ref.name, resp.aiter_bytes(1 << 16), DOWNLOAD_LIMIT))

    def _read_local(self, ref: MediaRef, path: Path) -> bytes:
        with path.open("rb") as file:
            self._policy.check_size(ref.name, os.fstat(file.fileno()).st_size, DOWNLOAD_LIMIT)
            return file.read()

    async def _save(self, ref: MediaRef, data: bytes) -> Attachment:
        try:
            return await asyncio.to_thread(self._policy.accept, self._platform, ref.name, data,
                                           ref.mime, ref.duration)
        except OSError as exc:
            if disk_outage(exc):
                # Kept in memory and saved once the disk takes writes again.
                raise StorageUnavailable(f"saving a received file: {exc.strerror}") from None
            log.error("cannot save a received file: %s", exc)
            raise AttachmentRefused(f"I could not store the file {ref.name!r}.") from None


def _check_status(status: int) -> None:
    if status in (401, 404):
        raise InvalidToken()  # a download URL Telegram no longer knows
    if status != 200:
        raise NetworkError(f"download answered HTTP {status}")
