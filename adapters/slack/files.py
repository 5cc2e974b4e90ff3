"""Fetching the files users share in Slack, under the shared attachment policy.

Slack file URLs need the bot token, so a download is only ever sent to a host on
`slack.file_hosts`: a crafted event pointing elsewhere must not collect the token. Redirects are
followed by hand for the same reason. Slack answers a request it does not authorise with its
sign-in page and HTTP 200 (a missing `files:read` scope looks like this), so an HTML body where
the file is not HTML is refused instead of handed to the agent as the user's file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from picobridge.adapters.common.attachments import AttachmentPolicy, AttachmentRefused
from picobridge.adapters.common.downloads import TransientDownloadError, with_retries
from picobridge.contract import Attachment

log = logging.getLogger("picobridge.slack.files")

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_MAX_REDIRECTS = 3
_LOGIN_MARKERS = (b"signin_form", b"<title>sign in", b"data-qa=\"signin")

FileInfo = Callable[[str], Awaitable[dict[str, Any]]]


def host_allowed(url: str, hosts: list[str]) -> bool:
    """True when `url` may receive the bot token: https to a listed host (plain http only for
    loopback hosts, which tests and local proxies use)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    with_port = f"{host}:{parts.port}" if parts.port else host
    allowed = {h.lower() for h in hosts}
    if host not in allowed and with_port not in allowed:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and host in _LOOPBACK)


def looks_like_login_page(body: bytes, content_type: str, declared_mime: str | None) -> bool:
    if not content_type.startswith("text/html"):
        return False
    if declared_mime is None or not declared_mime.startswith("text/html"):
        return True
    head = body[:4096].lower()
    return any(marker in head for marker in _LOGIN_MARKERS)


class SlackFiles:
    def __init__(self, session: aiohttp.ClientSession, token: str, hosts: list[str],
                 policy: AttachmentPolicy, file_info: FileInfo, *,
                 timeout: float = 60.0, platform: str = "slack") -> None:
        self._session = session
        self._platform = platform  # the app's name as the bridge knows it: its media folder
        self._token = token
        self._hosts = hosts
        self._policy = policy
        self._file_info = file_info
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def fetch(self, file: dict[str, Any]) -> Attachment:
        """Download one shared file; AttachmentRefused carries a message for the user."""
        if file.get("file_access") == "check_file_info" and isinstance(file.get("id"), str):
            # Slack sends only the id for some shares (e.g. Slack Connect): ask for the rest.
            file = await self._file_info(file["id"])
        name = str(file.get("name") or file.get("title") or file.get("id") or "file")
        if file.get("mode") in ("tombstone", "hidden_by_limit") or file.get("is_external"):
            raise AttachmentRefused(f"The file {name!r} is not available to me on Slack.")
        size = file.get("size")
        self._policy.check_size(name, size if isinstance(size, int) else None)
        url = file.get("url_private_download") or file.get("url_private")
        if not isinstance(url, str) or not url:
            raise AttachmentRefused(f"Slack gave me no download link for {name!r}.")
        mime = file.get("mimetype") if isinstance(file.get("mimetype"), str) else None
        data = await with_retries(lambda: self._download(url, name, mime), name, "Slack", log)
        # An audio clip recorded in Slack says its length in milliseconds.
        millis = file.get("duration_ms")
        return await asyncio.to_thread(self._policy.accept, self._platform, name, data, mime,
                                       millis / 1000 if isinstance(millis, int) else None)

    async def _download(self, url: str, name: str, mime: str | None) -> bytes:
        for _ in range(_MAX_REDIRECTS + 1):
            if not host_allowed(url, self._hosts):
                log.warning("refused to send the bot token to %s (not in slack.file_hosts)",
                            urlsplit(url).netloc)
                raise AttachmentRefused(
                    f"The file {name!r} is hosted where I may not fetch it from.")
            headers = {"Authorization": f"Bearer {self._token}"}
            try:
                async with self._session.get(url, headers=headers, allow_redirects=False,
                                             timeout=self._timeout) as resp:
                    if resp.status in (301, 302, 303, 307, 308) and "Location" in resp.headers:
                        url = urljoin(url, resp.headers["Location"])
                        continue
                    if resp.status == 429 or resp.status >= 500:
                        raise TransientDownloadError(f"HTTP {resp.status}")
                    if resp.status != 200:
                        raise AttachmentRefused(
                            f"Slack refused the download of {name!r} (HTTP {resp.status}).")
                    body = await self._read_capped(resp, name)
                    if looks_like_login_page(body, resp.content_type, mime):
                        log.error("Slack served a sign-in page instead of a file: does the app "
                                  "have the files:read scope?")
                        raise AttachmentRefused(
                            f"Slack sent me a sign-in page instead of {name!r}; the operator "
                            "needs to give the app the files:read scope.")
                    return body
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise TransientDownloadError(exc.__class__.__name__) from None
        raise AttachmentRefused(f"Too many redirects while fetching {name!r}.")

    async def _read_capped(self, resp: aiohttp.ClientResponse, name: str) -> bytes:
        # Slack's declared size may be missing or wrong: stop reading past the limit.
        return bytes(await self._policy.read_capped(name, resp.content.iter_chunked(1 << 16)))
