"""Files in the fake Telegram: what users send and the bot uploads, getFile, and downloads from
the file endpoint (``base_file_url``)."""

from __future__ import annotations

import secrets

from aiohttp import web

from tests.fakes.server import DOWNLOAD, JSON
from tests.fakes.telegram.base import MethodHandler, TelegramBase
from tests.fakes.telegram.model import ApiError, StoredFile, bad_request

_FILE_PATH_DIRS = {
    "document": "documents", "photo": "photos", "audio": "music", "voice": "voice",
    "video": "videos", "animation": "animations",
}
# Real ids are opaque base64url blobs; tests must not be able to guess or parse them.
_ID_PREFIXES = {"document": "BQACAgIAAxk", "photo": "AgACAgIAAxk", "voice": "AwACAgIAAxk"}


class TelegramFiles(TelegramBase):
    """Files users send, files the bot uploads, and getFile with its download endpoint."""

    def methods(self) -> dict[str, MethodHandler]:
        return {**super().methods(), "getFile": self._get_file}

    def add_file(self, data: bytes, file_name: str | None = None, mime_type: str | None = None,
                 *, kind: str = "document", file_size: int | None = None, width: int = 0,
                 height: int = 0, duration: int = 0,
                 streamed_size: int | None = None) -> StoredFile:
        """Store a file as if a user had sent it; ``file_size`` may claim more than len(data),
        or less than ``streamed_size``, the bytes a download then streams."""
        ext = ""
        if file_name and "." in file_name:
            ext = "." + file_name.rsplit(".", 1)[1]
        elif kind in ("photo", "voice"):
            ext = ".jpg" if kind == "photo" else ".oga"
        path = f"{_FILE_PATH_DIRS.get(kind, 'documents')}/file_{len(self.files) + 1}{ext}"
        stored = StoredFile(
            file_id=_ID_PREFIXES.get(kind, "BAACAgIAAxk") + secrets.token_urlsafe(36),
            file_unique_id="AgAD" + secrets.token_urlsafe(9), data=bytes(data),
            file_name=file_name, mime_type=mime_type,
            file_size=len(data) if file_size is None else file_size, file_path=path, kind=kind,
            width=width, height=height, duration=duration, streamed_size=streamed_size)
        self.files[stored.file_id] = stored
        self._files_by_path[path] = stored
        return stored

    def media_object(self, kind: str, stored: StoredFile) -> JSON:
        """The fields a Message carries for a file of this kind (``photo``, ``document``...)."""
        base: JSON = {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
                      "file_size": stored.file_size}
        if kind == "photo":
            return {"photo": [*self._thumbnails(stored), {**base, "width": stored.width or 1280,
                                                          "height": stored.height or 960}]}
        if stored.mime_type:
            base["mime_type"] = stored.mime_type
        if kind in ("document", "audio", "video", "animation") and stored.file_name:
            base["file_name"] = stored.file_name
        if kind in ("voice", "audio", "video", "animation"):
            base["duration"] = stored.duration
        if kind in ("video", "animation"):
            base["width"] = stored.width or 640
            base["height"] = stored.height or 360
        if kind == "animation":
            # Telegram sets both fields for animations, for clients that predate them.
            doc = {k: v for k, v in base.items() if k not in ("duration", "width", "height")}
            return {"animation": base, "document": doc}
        return {kind: base}

    def _thumbnails(self, stored: StoredFile) -> list[JSON]:
        """Telegram sends several sizes of a photo, smallest first; the last is the original."""
        width, height = stored.width or 1280, stored.height or 960
        sizes: list[JSON] = []
        for side in (90, 320):
            if side < max(width, height):
                scale = side / max(width, height)
                thumb = self.add_file(stored.data, None, "image/jpeg", kind="photo")
                sizes.append({"file_id": thumb.file_id, "file_unique_id": thumb.file_unique_id,
                              "file_size": thumb.file_size,
                              "width": max(1, round(width * scale)),
                              "height": max(1, round(height * scale))})
        return sizes

    async def _get_file(self, params: JSON) -> JSON:
        file_id = params.get("file_id")
        if not file_id:
            raise bad_request("file_id is empty")
        stored = self.files.get(str(file_id))
        if stored is None:
            raise bad_request("invalid file_id")
        if stored.file_size > self.max_download_size:
            raise bad_request("file is too big")
        return {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
                "file_size": stored.file_size, "file_path": stored.file_path}

    async def handle_download(self, request: web.Request) -> web.StreamResponse:
        if not self.authorised(request):
            return web.json_response(ApiError(401, "Unauthorized").envelope(), status=401)
        scripted = await self.guard(DOWNLOAD, request)
        if scripted is not None:
            return scripted
        stored = self._files_by_path.get(request.match_info["path"])
        if stored is None:
            return web.json_response(ApiError(404, "Not Found").envelope(), status=404)
        self.downloads.append(stored.file_path)
        self.notify()
        if stored.streamed_size is not None:
            return await self._stream(request, stored.streamed_size)
        return web.Response(body=stored.data, content_type="application/octet-stream")

    async def _stream(self, request: web.Request, size: int) -> web.StreamResponse:
        """`size` bytes without a Content-Length, as a proxy streaming a file would send them;
        stops when the reader hangs up."""
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await response.prepare(request)
        chunk = bytes(range(256)) * 256  # 64 KiB, the only buffer
        sent = 0
        try:
            while sent < size:
                part = chunk[:size - sent]
                await response.write(part)
                sent += len(part)
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the bridge stopped reading, as it should
        finally:  # also when the hang-up cancels this handler
            self.streamed_bytes[request.match_info["path"]] = sent
            self.notify()
        return response
