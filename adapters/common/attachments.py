"""What happens to a file a user sends, the same on every platform.

Small UTF-8 text files go to the agent inline; anything else is saved under
state_dir/media/<platform>/ with a name the user cannot steer outside that folder, and the
agent is told the absolute path. Files over the limits are refused with a clear reply.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterable
from pathlib import Path

from picobridge.config.sections import AttachmentSettings
from picobridge.contract import Attachment, human_size, safe_name

__all__ = ["AttachmentPolicy", "AttachmentRefused", "safe_name"]

log = logging.getLogger("picobridge.attachments")

_TEXT_MIMES = ("application/json", "application/xml", "application/x-yaml", "application/yaml",
               "application/toml", "application/javascript", "application/x-sh",
               "application/sql", "application/csv")


class AttachmentRefused(Exception):
    """The file cannot be taken; the message is for the user."""


def _looks_textual(mime: str | None, name: str) -> bool:
    if mime is None or mime == "application/octet-stream":
        return True  # decide by content
    return mime.startswith("text/") or mime in _TEXT_MIMES or name.endswith((".md", ".txt"))


class AttachmentPolicy:
    def __init__(self, settings: AttachmentSettings, media_dir: Path) -> None:
        self._settings = settings
        self._media_dir = media_dir

    @property
    def max_bytes(self) -> int:
        return self._settings.max_bytes

    @property
    def download_timeout(self) -> float:
        """Seconds one file may take to fetch, retries included (attachments.download_timeout)."""
        return self._settings.download_timeout

    def check_size(self, name: str, size: int | None, platform_limit: int | None = None) -> None:
        """Refuse before downloading when the size is known to be over a limit."""
        if size is None:
            return
        limit = self._settings.max_bytes
        if platform_limit is not None and platform_limit < limit:
            limit = platform_limit
        if size > limit:
            raise AttachmentRefused(
                f"The file {name!r} is {human_size(size)}; "
                f"I can take files up to {human_size(limit)}.")

    async def read_capped(self, name: str, chunks: AsyncIterable[bytes],
                          platform_limit: int | None = None) -> bytearray:
        """The downloaded bytes, read no further than the limit: a size the platform (or a
        proxy) claimed proves nothing, and reading first and checking after would hold a
        file of any size in memory."""
        limit = self._settings.max_bytes
        if platform_limit is not None and platform_limit < limit:
            limit = platform_limit
        data = bytearray()
        async for chunk in chunks:
            if len(data) + len(chunk) > limit:
                raise AttachmentRefused(f"The file {name!r} is over {human_size(limit)}, the most "
                                        "I can take.")
            data += chunk
        return data

    def accept(self, platform: str, name: str, data: bytes, mime: str | None,
               duration: float | None = None) -> Attachment:
        """Turn downloaded bytes into what the agent gets: inline text or a saved file
        (`duration`: seconds of audio or video, where the platform said)."""
        self.check_size(name, len(data))
        if len(data) <= self._settings.inline_max_bytes and _looks_textual(mime, name) \
                and b"\x00" not in data:
            try:
                return Attachment(name=safe_name(name), content=data.decode("utf-8"),
                                  size=len(data), mime=mime)
            except UnicodeDecodeError:
                pass
        path = self._save(platform, name, data)
        return Attachment(name=safe_name(name), path=str(path), size=len(data),
                          mime=mime or "application/octet-stream", duration=duration)

    def _save(self, platform: str, name: str, data: bytes) -> Path:
        # One folder per bot: `telegram` for the default bot, `telegram@work` for another.
        folder = (self._media_dir / "@".join(safe_name(part) for part in platform.split("@", 1))
                  ).resolve()
        for level in (folder.parent, folder):
            if not level.is_dir():
                # Private whatever the umask: people's files.
                level.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chmod(level, 0o700)
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{safe_name(name)}"
        for n in range(1000):
            candidate = folder / (stem if n == 0 else f"{n}-{stem}")
            try:
                # O_EXCL: never overwrite, even if two files with one name arrive together.
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return candidate
        raise AttachmentRefused(f"Could not store {name!r}: too many files with that name.")

    def cleanup(self, now: float | None = None) -> int:
        """Delete saved media older than the retention period; returns how many went."""
        cutoff = (time.time() if now is None else now) - self._settings.retention_days * 86400
        removed = 0
        if not self._media_dir.is_dir():
            return 0
        for path in self._media_dir.rglob("*"):
            try:
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError as exc:
                log.warning("cannot remove old media %s: %s", path, exc)
        return removed

    async def cleanup_forever(self, every: float = 3600.0) -> None:
        """Run as a task by an adapter that saves media."""
        while True:
            removed = await asyncio.to_thread(self.cleanup)
            if removed:
                log.info("removed %d media files older than %d days", removed,
                         self._settings.retention_days)
            await asyncio.sleep(every)
