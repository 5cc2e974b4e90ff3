"""Files people send (m.image, m.file, m.audio, m.video), fetched from the media repository
under the shared attachment policy, and files the bot sends, uploaded to it.

Downloads use the authenticated media endpoints (Matrix 1.11, /_matrix/client/v1/media, with
the access token); a homeserver without them answers 404 M_UNRECOGNIZED (or 405), and the
legacy /_matrix/media/v3 endpoint is tried instead. The body is read in chunks and refused as
soon as it passes the size limit: a wrong or missing declared size cannot fill the disk.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from mautrix.client import ClientAPI
from mautrix.types import ContentURI

from picobridge.adapters.common.attachments import AttachmentPolicy, AttachmentRefused
from picobridge.adapters.common.downloads import TransientDownloadError, with_retries
from picobridge.adapters.matrix.normalise import PLATFORM, FileRef
from picobridge.contract import Attachment

log = logging.getLogger("picobridge.matrix.files")

CHUNK = 1 << 16


class _Unsupported(Exception):
    """The endpoint does not exist on this homeserver."""


class MatrixFiles:
    def __init__(self, client: ClientAPI, policy: AttachmentPolicy) -> None:
        self._client = client
        self._policy = policy

    async def fetch(self, ref: FileRef) -> Attachment:
        """Download one file; AttachmentRefused carries a message for the user."""
        self._policy.check_size(ref.name, ref.size)
        if not ref.url.startswith("mxc://"):
            raise AttachmentRefused(f"The file {ref.name!r} has no address I can fetch.")

        async def attempt() -> bytes:
            async with asyncio.timeout(self._policy.download_timeout):
                return await self._download(ref)

        data = await with_retries(attempt, ref.name, "Matrix", log,
                                  transient=(TransientDownloadError, TimeoutError))
        if ref.key is not None:
            data = await asyncio.to_thread(decrypted, ref, data)
        return await asyncio.to_thread(self._policy.accept, PLATFORM, ref.name, data, ref.mime)

    async def _download(self, ref: FileRef) -> bytes:
        api = self._client.api
        uri = ContentURI(ref.url)
        try:
            return await self._get(str(api.get_download_url(uri, authenticated=True)), ref,
                                   {"Authorization": f"Bearer {api.token}"})
        except _Unsupported:
            log.debug("no authenticated media on this homeserver; using the legacy endpoint")
        try:
            return await self._get(str(api.get_download_url(uri)), ref, {})
        except _Unsupported:
            raise AttachmentRefused(f"The homeserver does not serve {ref.name!r}.") from None

    async def _get(self, url: str, ref: FileRef, headers: dict[str, str]) -> bytes:
        session = self._client.api.session
        try:
            async with session.get(url, headers=headers,
                                   params={"allow_redirect": "true"}) as resp:
                if resp.status in (404, 405) and await _unrecognised(resp):
                    raise _Unsupported()
                if resp.status == 429 or resp.status >= 500:
                    raise TransientDownloadError(f"HTTP {resp.status}")
                if resp.status != 200:
                    raise AttachmentRefused(
                        f"The homeserver refused the download of {ref.name!r} "
                        f"(HTTP {resp.status}).")
                return await self._read_capped(resp, ref.name)
        except aiohttp.ClientError as exc:
            raise TransientDownloadError(exc.__class__.__name__) from None

    async def _read_capped(self, resp: aiohttp.ClientResponse, name: str) -> bytes:
        return bytes(await self._policy.read_capped(name, resp.content.iter_chunked(CHUNK)))


def decrypted(ref: FileRef, data: bytes) -> bytes:
    """An encrypted file's bytes (matrix.e2ee), checked against the hash its event names."""
    from mautrix.crypto.attachments import decrypt_attachment
    from mautrix.errors import DecryptionError

    assert ref.key is not None
    try:
        return decrypt_attachment(data, ref.key["key"]["k"], ref.key["hashes"]["sha256"],
                                  ref.key["iv"])
    except (DecryptionError, KeyError, TypeError, ValueError):
        raise AttachmentRefused(f"I could not decrypt {ref.name!r}: the file does not match "
                                "the key it came with.") from None


async def _unrecognised(resp: aiohttp.ClientResponse) -> bool:
    if resp.status == 405:
        return True
    try:
        body = await resp.json(content_type=None)
    except (ValueError, aiohttp.ClientError):
        return False
    return isinstance(body, dict) and body.get("errcode") == "M_UNRECOGNIZED"
