"""The fake Discord's gateway: a real websocket with HELLO, IDENTIFY, READY, heartbeats and
their ACKs, RESUME (the events missed since the client's sequence, then RESUMED), zlib-stream
compression when asked, and the faults of a real gateway: a dropped connection, a RECONNECT
request, an invalid session, a close for a bad token or intents the app was not granted.

One bot session lives across connections, as on Discord: events dispatched while no
connection is up are kept for a RESUME; a fresh IDENTIFY starts a new session and the events
before it are gone (the bot has to read them from channel history)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import zlib
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.discord.model import (
    DISPATCH,
    FLAG_MEMBERS,
    FLAG_MESSAGE_CONTENT,
    FLAG_MESSAGE_CONTENT_LIMITED,
    FLAG_PRESENCE,
    HEARTBEAT,
    HEARTBEAT_ACK,
    HELLO,
    IDENTIFY,
    INVALID_SESSION,
    JSON,
    MESSAGE_CONTENT,
    PRIVILEGED,
    RECONNECT,
    RESUME,
    Connection,
)
from tests.fakes.discord.rest import DiscordRest

_GRANTS = {1 << 1: FLAG_MEMBERS, 1 << 8: FLAG_PRESENCE,
           MESSAGE_CONTENT: FLAG_MESSAGE_CONTENT | FLAG_MESSAGE_CONTENT_LIMITED}


class _Link:
    """One connected websocket with its compressor; everything it sends goes in order
    through one queue (a zlib stream must be compressed in the order it is sent)."""

    def __init__(self, ws: web.WebSocketResponse, conn: Connection) -> None:
        self.ws, self.conn = ws, conn
        self.zlib = zlib.compressobj() if conn.query.get("compress") == "zlib-stream" else None
        self.queue: asyncio.Queue[JSON] = asyncio.Queue()

    async def write_forever(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            while True:
                payload = await self.queue.get()
                try:
                    await self._write(payload)
                finally:
                    self.queue.task_done()

    async def close(self, code: int, message: bytes = b"") -> None:
        """Close once what was queued before is sent."""
        self.conn.close_code = code
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self.queue.join()
        await self.ws.close(code=code, message=message)

    async def send(self, payload: JSON) -> None:
        self.queue.put_nowait(payload)

    async def _write(self, payload: JSON) -> None:
        data = json.dumps(payload).encode()
        if self.zlib is not None:
            await self.ws.send_bytes(self.zlib.compress(data) + self.zlib.flush(zlib.Z_SYNC_FLUSH))
        else:
            await self.ws.send_str(data.decode())


class DiscordGateway(DiscordRest):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.session_id: str | None = None
        self.seq = 0
        self._log: list[JSON] = []  # this session's dispatches, for RESUME
        self._link: _Link | None = None
        self.intents = 0
        self.identifies = 0
        self.resumes = 0

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        app.router.add_get("/gateway", self._gateway)

    async def close_connections(self) -> None:
        if self._link is not None:
            with contextlib.suppress(Exception):
                await self._link.ws.close(code=1001)

    @property
    def ready(self) -> bool:
        """A connection is up and identified (or resumed)."""
        return self._link is not None and not self._link.conn.closed and (
            self._link.conn.identified is not None or self._link.conn.resumed is not None)

    async def wait_ready(self, count: int = 1, timeout: float = 20.0) -> None:
        """Wait until ``count`` sessions were opened or resumed and one is up."""
        await self.wait_for(lambda: self.ready and self.identifies + self.resumes >= count,
                            f"{count} gateway session(s)", timeout)

    # ---- dispatching events --------------------------------------------------------------------

    def dispatch(self, event: str, data: JSON) -> None:
        if self.session_id is None:
            return  # no session: Discord has nobody to send it to
        self.seq += 1
        payload = {"op": DISPATCH, "t": event, "s": self.seq, "d": data}
        self._log.append(payload)
        if self.ready and self._link is not None:
            self._link.queue.put_nowait(payload)

    def content_visible(self) -> bool:
        return bool(self.intents & MESSAGE_CONTENT)

    # ---- faults ----------------------------------------------------------------------------------

    async def drop_connection(self, code: int = 4000) -> None:
        """Close the gateway connection (the session stays resumable)."""
        link = self._link
        if link is not None:
            link.conn.closed = True
            await link.close(code)

    async def request_reconnect(self) -> None:
        if self._link is not None:
            await self._link.send({"op": RECONNECT, "d": None})

    async def invalidate_session(self, resumable: bool = False) -> None:
        """OP 9: the session is gone (not resumable: the client must IDENTIFY again)."""
        if not resumable:
            self.session_id = None
            self._log.clear()
        if self._link is not None:
            await self._link.send({"op": INVALID_SESSION, "d": resumable})

    # ---- the websocket ---------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        conn = Connection(dict(request.query))
        self.connections.append(conn)
        if conn.query.get("v") != "10" or conn.query.get("encoding") != "json" or \
                conn.query.get("compress") not in (None, "zlib-stream"):
            await ws.close(code=4012, message=b"Invalid API version")
            return ws
        link = _Link(ws, conn)
        if self._link is not None:
            await self.close_connections()
        self._link = link
        writer = asyncio.ensure_future(link.write_forever())
        await link.send({"op": HELLO, "d": {"heartbeat_interval": self.heartbeat_interval_ms}})
        try:
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                await self._receive(link, json.loads(frame.data))
        finally:
            writer.cancel()
            conn.closed = True
            if conn.close_code is None:
                conn.close_code = ws.close_code
            if self._link is link:
                self._link = None
            self.notify()
        return ws

    async def _receive(self, link: _Link, message: JSON) -> None:
        op, data = message.get("op"), message.get("d")
        if op == HEARTBEAT:
            link.conn.heartbeats += 1
            await link.send({"op": HEARTBEAT_ACK})
            self.notify()
        elif op == IDENTIFY:
            await self._identify(link, data or {})
        elif op == RESUME:
            await self._resume(link, data or {})

    async def _identify(self, link: _Link, data: JSON) -> None:
        if data.get("token") != self.token:
            await link.close(4004, b"Authentication failed.")
            return
        intents = int(data.get("intents", 0))
        missing = [name for bit, name in PRIVILEGED.items()
                   if intents & bit and not self.app_flags & _GRANTS[bit]]
        if missing:
            await link.close(4014, b"Disallowed intent(s).")
            return
        self.intents = intents
        link.conn.identified = data
        self.identifies += 1
        self.session_id = secrets.token_hex(16)
        self._log = []
        self.seq = 0
        self.dispatch("READY", {
            "v": 10, "user": self.users[self.bot_id], "session_id": self.session_id,
            "resume_gateway_url": self.gateway_url, "guilds": [
                {"id": g, "unavailable": True} for g in self.guilds],
            "application": {"id": self.app_id, "flags": self.app_flags},
            "private_channels": [], "relationships": []})
        for guild in self.guilds.values():
            self.dispatch("GUILD_CREATE", self.guild_payload(guild))
        self.notify()  # wakes wait_ready(): without it a waiter slept out its whole timeout

    async def _resume(self, link: _Link, data: JSON) -> None:
        if data.get("token") != self.token:
            await link.close(4004, b"Authentication failed.")
            return
        if self.session_id is None or data.get("session_id") != self.session_id:
            await link.send({"op": INVALID_SESSION, "d": False})
            return
        after = int(data.get("seq") or 0)
        for payload in [p for p in self._log if p["s"] > after]:
            await link.send(payload)
        link.conn.resumed = data
        self.resumes += 1
        self.dispatch("RESUMED", {})
        self.notify()

    def guild_payload(self, guild: JSON) -> JSON:
        raise NotImplementedError  # people.py
