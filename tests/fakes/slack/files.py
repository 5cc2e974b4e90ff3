"""Files in the fake Slack: hosting (downloads that need the bot token, and answer a sign-in
page without it, as Slack does), and the bot's uploads (files_upload_v2's three steps)."""

from __future__ import annotations

import mimetypes
import secrets
import time
from urllib.parse import quote

import aiohttp
from aiohttp import web

from tests.fakes.server import DOWNLOAD, JSON, UPLOAD
from tests.fakes.slack.base import MethodHandler
from tests.fakes.slack.model import (
    DEFAULT_USER,
    LOGIN_PAGE_HTML,
    FileDownload,
    SlackError,
    StoredFile,
    UploadedFile,
    ts_str,
)
from tests.fakes.slack.workspace import SlackWorkspace


class SlackFiles(SlackWorkspace):
    """The file host and the upload endpoints."""

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        app.router.add_post("/upload/v1/{upload_id}", self._handle_upload)
        app.router.add_get("/files-pri/{team_file}/download/{name}", self._handle_download)
        app.router.add_get("/files-pri/{team_file}/{name}", self._handle_download)

    def methods(self) -> dict[str, MethodHandler]:
        return {**super().methods(), "files.getUploadURLExternal": self._get_upload_url,
                "files.completeUploadExternal": self._complete_upload,
                "files.info": self._files_info}

    def add_file(self, content: bytes, name: str = "file.txt", mimetype: str = "text/plain", *,
                 title: str | None = None, user: str = DEFAULT_USER,
                 filetype: str | None = None) -> JSON:
        """Host a file and return the Slack file object (for files[] in message events)."""
        return self._host_file(self.next_id("F"), content, name, mimetype, title=title,
                               user=user, filetype=filetype)

    def file_info(self, file_id: str) -> JSON:
        """The file object files.info answers with."""
        return dict(self._files[file_id].obj)

    def file_content(self, file_id: str) -> bytes | None:
        stored = self._files.get(file_id)
        return stored.content if stored else None

    def _host_file(self, file_id: str, content: bytes, name: str, mimetype: str, *,
                   title: str | None, user: str, filetype: str | None = None) -> JSON:
        now, quoted = int(time.time()), quote(name)
        ftype = filetype or (name.rsplit(".", 1)[-1].lower() if "." in name else "binary")
        base = f"{self.url}/files-pri/{self.team_id}-{file_id}"
        obj: JSON = {
            "id": file_id, "created": now, "timestamp": now, "name": name,
            "title": title or name, "mimetype": mimetype, "filetype": ftype,
            "pretty_type": ftype.upper(), "user": user, "user_team": self.team_id,
            "editable": False, "size": len(content), "mode": "hosted", "is_external": False,
            "external_type": "", "is_public": False, "public_url_shared": False,
            "display_as_bot": False, "username": "", "url_private": f"{base}/{quoted}",
            "url_private_download": f"{base}/download/{quoted}",
            "permalink": f"https://fake-team.slack.com/files/{user}/{file_id}/{quoted}",
            "permalink_public": f"https://slack-files.com/{self.team_id}-{file_id}-fake",
            "is_starred": False, "has_rich_preview": False, "file_access": "visible",
        }
        self._files[file_id] = StoredFile(obj, content)
        return obj

    async def _handle_download(self, request: web.Request) -> web.StreamResponse:
        team_file = request.match_info["team_file"]
        file_id = team_file.split("-", 1)[-1]
        scripted = await self.guard(DOWNLOAD, request)
        if scripted is not None:
            return scripted
        auth = request.headers.get("Authorization", "")
        authorized = (auth == f"Bearer {self.bot_token}"
                      and self.bot_token not in self.revoked_tokens)
        self.downloads.append(FileDownload(file_id, authorized, time.monotonic()))
        self.notify()
        if not authorized:
            # Real Slack answers an unauthenticated file URL with its sign-in page and 200, so a
            # client that only checks the status saves HTML as the user's file.
            return web.Response(text=LOGIN_PAGE_HTML, content_type="text/html", charset="utf-8")
        stored = self._files.get(file_id)
        if stored is None or not team_file.startswith(f"{self.team_id}-"):
            return web.Response(status=404, text="file not found")
        disposition = f"attachment; filename*=UTF-8''{quote(stored.obj['name'])}"
        return web.Response(body=stored.content, content_type=str(stored.obj["mimetype"]),
                            headers={"Content-Disposition": disposition})

    # ---- uploads -----------------------------------------------------------------------------

    def _get_upload_url(self, params: JSON) -> JSON:
        filename = params.get("filename")
        try:
            length = int(params.get("length"))  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise SlackError("invalid_arguments") from exc
        if not filename or length <= 0:
            raise SlackError("invalid_arguments")
        record = UploadedFile(file_id=self.next_id("F"), filename=str(filename), length=length,
                              alt_txt=params.get("alt_txt"),
                              snippet_type=params.get("snippet_type"))
        upload_id = secrets.token_urlsafe(12)
        self._uploads[upload_id] = record
        self.uploaded_files.append(record)
        return {"upload_url": f"{self.url}/upload/v1/{upload_id}", "file_id": record.file_id}

    async def _handle_upload(self, request: web.Request) -> web.StreamResponse:
        scripted = await self.guard(UPLOAD, request)
        if scripted is not None:
            return scripted
        record = self._uploads.get(request.match_info["upload_id"])
        if record is None:
            return web.Response(status=404, text="upload url not found")
        data: bytes | None = None
        if request.content_type == "multipart/form-data":
            async for part in await request.multipart():
                if isinstance(part, aiohttp.BodyPartReader) and (
                        part.filename or part.name in ("file", "filename")):
                    data = bytes(await part.read())
                    break
        else:
            data = await request.read()
        if not data:
            return web.Response(status=400, text="empty upload")
        if len(data) != record.length:
            # Slack takes exactly the bytes files.getUploadURLExternal was told of.
            return web.Response(status=400, text="upload size does not match length")
        record.content = data
        self.notify()
        # Slack's upload host answers in plain text; slack-sdk only checks for status 200.
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    def _uploaded(self, files: object) -> list[tuple[UploadedFile, str | None]]:
        """The uploads files.completeUploadExternal names, with their titles."""
        if not isinstance(files, list) or not files:
            raise SlackError("invalid_arguments")
        by_id = {r.file_id: r for r in self.uploaded_files}
        records: list[tuple[UploadedFile, str | None]] = []
        for item in files:
            record = by_id.get(str(item.get("id"))) if isinstance(item, dict) else None
            if record is None or record.content is None or record.completed:
                raise SlackError("file_not_found")
            records.append((record, item.get("title")))
        return records

    def _complete_upload(self, params: JSON) -> JSON:
        records = self._uploaded(params.get("files"))
        targets = [params["channel_id"]] if params.get("channel_id") else [
            c.strip() for c in str(params.get("channels") or "").split(",") if c.strip()]
        channels = [self.writable_channel({"channel": c}) for c in targets]
        comment = params.get("initial_comment")
        self.check_length(None if comment is None else str(comment))
        objs: list[JSON] = []
        for record, title in records:
            assert record.content is not None
            record.completed, record.title = True, title or record.filename
            mimetype = mimetypes.guess_type(record.filename)[0] or "application/octet-stream"
            objs.append(self._host_file(record.file_id, record.content, record.filename,
                                        mimetype, title=record.title, user=self.bot_user_id))
        thread_ts = ts_str(params.get("thread_ts"))
        for channel in channels:
            self._share(channel, objs, thread_ts, params)
            for record, _ in records:
                record.channel, record.thread_ts = channel, thread_ts
                record.initial_comment = None if comment is None else str(comment)
        # Like Slack, only id and title come back; callers wanting more use files.info.
        return {"files": [{"id": r.file_id, "title": r.title} for r, _ in records]}

    def _share(self, channel: str, objs: list[JSON], thread_ts: str | None,
               params: JSON) -> None:
        """The file_share message in ``channel``, and the shares the file objects list."""
        comment = params.get("initial_comment")
        _, msg = self.post(channel, "" if comment is None else str(comment), thread_ts, params,
                           kind="file_share", files=objs)
        share: JSON = {"ts": msg["ts"], "channel_name": self.channels[channel].get("name", ""),
                       "team_id": self.team_id, "share_user_id": self.bot_user_id}
        if thread_ts:
            share["thread_ts"] = thread_ts
        public = self.channel_type(channel) == "channel"
        for obj in objs:
            shares = obj.setdefault("shares", {}).setdefault("public" if public else "private",
                                                             {})
            shares.setdefault(channel, []).append(share)
            obj.setdefault("channels" if public else "groups", []).append(channel)

    def _files_info(self, params: JSON) -> JSON:
        stored = self._files.get(str(params.get("file")))
        if stored is None:
            raise SlackError("file_not_found")
        return {"file": stored.obj, "comments": [], "response_metadata": {"next_cursor": ""}}
