"""Socket Mode in the fake Slack: apps.connections.open tickets, a real websocket with hello,
envelopes, acks, and the redelivery of events not acked within ``ack_timeout`` (new envelope id,
same event_id, retry_attempt + 1, up to ``max_retries``), as Slack does."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import time
import uuid
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from tests.fakes.server import JSON
from tests.fakes.slack.base import MethodHandler
from tests.fakes.slack.files import SlackFiles
from tests.fakes.slack.model import Ack, Delivery, EventState, SocketConn


class SlackSocketMode(SlackFiles):
    """Delivering events and other envelopes over Socket Mode, and what the client acked."""

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        app.router.add_get("/socket", self._handle_socket)

    def methods(self) -> dict[str, MethodHandler]:
        return {**super().methods(), "apps.connections.open": self._connections_open}

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    @property
    def pending_envelopes(self) -> list[JSON]:
        """Envelopes waiting for a Socket Mode connection (sent when a client connects)."""
        return list(self._pending)

    @property
    def acked_envelope_ids(self) -> list[str]:
        return [a.envelope_id for a in self.acks]

    def envelopes_for(self, event_id: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.event_id == event_id]

    async def wait_for_socket(self, count: int = 1, timeout: float = 30.0) -> None:
        # A daemon's start, on a machine running the suite in parallel, can take over 10 s.
        await self.wait_for(lambda: len(self._connections) >= count,
                            f"{count} Socket Mode connection(s)", timeout)

    async def wait_for_ack(self, envelope_id: str, timeout: float = 10.0) -> Ack:
        return await self.wait_for(
            lambda: next((a for a in self.acks if a.envelope_id == envelope_id), None),
            f"the ack of {envelope_id}", timeout)

    # ---- the websocket -----------------------------------------------------------------------

    def _connections_open(self, params: JSON) -> JSON:
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        return {"url": f"ws://{self.host}:{self.port}/socket?ticket={ticket}&app_id={self.app_id}"}

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("ticket", "") not in self._tickets:
            return web.Response(status=401, text="invalid ticket")
        # Pings are answered here, not by aiohttp, so a silent fake can leave them unanswered.
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        conn = SocketConn(next(self._ids), ws, request)
        if self.silent:
            await self._stay_silent(conn)
            return ws
        # hello goes out before the connection is eligible for envelopes, as on real Slack.
        await ws.send_json({
            "type": "hello", "num_connections": len(self._connections) + 1,
            "debug_info": {"host": f"fake-applink-{conn.id}", "build_number": 1,
                           "approximate_connection_time": 18060},
            "connection_info": {"app_id": self.app_id},
        })
        self._connections.append(conn)
        self.socket_connects += 1
        self.notify()
        try:
            pending, self._pending = self._pending, []
            for envelope in pending:
                await self._deliver(envelope)
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._on_client_message(conn, msg.data)
                elif msg.type == WSMsgType.PING and not self.silent:
                    await ws.pong(msg.data)
        finally:
            if conn in self._connections:
                self._connections.remove(conn)
            self.notify()
        return ws

    async def _stay_silent(self, conn: SocketConn) -> None:
        """The connection is up and carries nothing: no hello, no envelope, no pong (the
        peer bridges' "connected but receiving nothing")."""
        self.silent_connections += 1
        self.notify()
        async for _ in conn.ws:
            pass  # read (and drop) whatever the client sends until it hangs up

    def _on_client_message(self, conn: SocketConn, data: str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if not isinstance(message, dict) or "envelope_id" not in message:
            return
        envelope_id = str(message["envelope_id"])
        payload = message.get("payload")
        known = envelope_id in self._envelope_event or any(
            d.envelope_id == envelope_id for d in self.deliveries)
        self.acks.append(Ack(envelope_id, payload if isinstance(payload, dict) else None,
                             time.monotonic(), conn.id, known))
        self._acked_envelopes.add(envelope_id)
        event_id = self._envelope_event.get(envelope_id)
        if event_id is not None:
            self._events[event_id].acked = True
        self.notify()

    async def _deliver(self, envelope: JSON) -> Delivery | None:
        """Send to the newest live connection, or queue until one connects."""
        for conn in reversed(self._connections):
            if conn.ws.closed:
                continue
            try:
                await conn.ws.send_str(json.dumps(envelope))
            except (ConnectionError, RuntimeError):
                continue
            delivery = Delivery(envelope, conn.id, time.monotonic())
            self.deliveries.append(delivery)
            if delivery.retry_attempt > 0:
                self.redeliveries.append(delivery)
            self.spawn(self._ack_timer(envelope))
            self.notify()
            return delivery
        self._pending.append(envelope)
        self.notify()
        return None

    async def _ack_timer(self, envelope: JSON) -> None:
        await asyncio.sleep(self.ack_timeout)  # Slack's own timeout, not a wait for an event
        envelope_id = envelope["envelope_id"]
        if envelope_id in self._acked_envelopes:
            return
        self.ack_timeouts.append(envelope_id)
        self.notify()
        event_id = self._envelope_event.get(envelope_id)
        if event_id is None:
            return  # Slack does not retry slash commands or interactions; the user sees an error.
        state = self._events[event_id]
        if state.acked or state.attempts >= self.max_retries:
            return
        await self._send_attempt(state, state.attempts + 1, self.retry_reason)

    # ---- events ------------------------------------------------------------------------------

    def event_payload(self, event: JSON, event_id: str | None = None) -> JSON:
        """The event_callback body Slack sends for `event` (same for Socket Mode and HTTP)."""
        self.learn(event)
        authorization = {"enterprise_id": None, "team_id": self.team_id,
                         "user_id": self.bot_user_id, "is_bot": True,
                         "is_enterprise_install": False}
        return {
            "token": self.verification_token, "team_id": self.team_id,
            "context_team_id": self.team_id, "context_enterprise_id": None,
            "api_app_id": self.app_id, "event": event, "type": "event_callback",
            "event_id": event_id or self.next_id("Ev"),
            "event_time": int(float(event.get("event_ts") or event.get("ts") or time.time())),
            "authorizations": [authorization], "is_ext_shared_channel": False,
            "event_context": "4-" + base64.b64encode(secrets.token_bytes(12)).decode(),
        }

    def learn(self, event: JSON) -> None:
        """Make the channel, user and message of an injected event known to the Web API."""
        channel, user = event.get("channel"), event.get("user")
        if isinstance(channel, str) and channel and channel not in self.channels:
            other = user if channel.startswith("D") and isinstance(user, str) else None
            self.register_channel(channel, user=other)
        if isinstance(user, str) and user and user not in self.users:
            self.register_user(user)
        if not isinstance(channel, str) or event.get("type") not in ("message", "app_mention"):
            return
        history = self._store.setdefault(channel, {})
        if event.get("subtype") == "message_changed" and isinstance(event.get("message"), dict):
            inner = event["message"]
            if inner.get("ts") in history:
                history[inner["ts"]].update(inner)
        elif event.get("subtype") == "message_deleted":
            history.pop(str(event.get("deleted_ts")), None)
        elif isinstance(event.get("ts"), str) and event["ts"] not in history:
            kept = {k: v for k, v in event.items() if k not in ("channel", "event_ts")}
            self.keep(channel, {**kept, "type": "message"})

    async def send_event(self, event: JSON, event_id: str | None = None) -> JSON:
        """Deliver an Events API event over Socket Mode; returns the envelope sent.

        Queued until a socket connects; redelivered while not acked (see the module doc).
        """
        payload = self.event_payload(event, event_id)
        state = EventState(payload["event_id"], payload)
        self._events[state.event_id] = state
        return await self._send_attempt(state, 0, "")

    async def _send_attempt(self, state: EventState, attempt: int, reason: str) -> JSON:
        state.attempts = max(state.attempts, attempt)
        envelope: JSON = {
            "envelope_id": str(uuid.uuid4()), "payload": state.payload, "type": "events_api",
            "accepts_response_payload": False, "retry_attempt": attempt, "retry_reason": reason,
        }
        state.envelope_ids.append(envelope["envelope_id"])
        self._envelope_event[envelope["envelope_id"]] = state.event_id
        await self._deliver(envelope)
        return envelope

    async def send_payload(self, payload: Any) -> JSON:
        """Deliver any Events API payload as is, even one that does not parse (not an
        object, an event without a channel...), redelivered while not acked like any event;
        returns the envelope sent."""
        event_id = payload.get("event_id") if isinstance(payload, dict) else None
        state = EventState(event_id if isinstance(event_id, str) else self.next_id("Ev"),
                           payload)
        self._events[state.event_id] = state
        return await self._send_attempt(state, 0, "")

    async def redeliver(self, event_id: str, reason: str = "timeout") -> JSON:
        """Deliver an event again even though it was acked (Slack's at-least-once duplicates)."""
        state = self._events[event_id]
        return await self._send_attempt(state, state.attempts + 1, reason)

    async def send_envelope(self, type_: str, payload: JSON, *,
                            accepts_response_payload: bool = True) -> JSON:
        """Any other Socket Mode envelope (slash_commands, interactive...); never retried."""
        envelope: JSON = {"envelope_id": str(uuid.uuid4()), "payload": payload, "type": type_,
                          "accepts_response_payload": accepts_response_payload}
        await self._deliver(envelope)
        return envelope

    async def send_raw_frame(self, data: str) -> int:
        """A text frame as is, to every live connection (what a broken proxy or a Slack bug
        might send: not JSON, or JSON that is no envelope); returns how many got it."""
        sent = 0
        for conn in list(self._connections):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await conn.ws.send_str(data)
                sent += 1
        return sent

    # ---- connection trouble ------------------------------------------------------------------

    async def send_disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask every connected client to reconnect (the SDK opens a new socket, drops this one)."""
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-applink"}}
        for conn in list(self._connections):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await conn.ws.send_json(message)

    async def drop_socket_connections(self, *, abrupt: bool = False) -> int:
        """Close every Socket Mode connection; abrupt=True cuts TCP without a close frame."""
        conns = list(self._connections)
        for conn in conns:
            if abrupt:
                if conn.request.transport is not None:
                    conn.request.transport.abort()
            else:
                with contextlib.suppress(Exception):
                    await conn.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"dropped")
        return len(conns)

    async def close_connections(self) -> None:
        for conn in list(self._connections):
            with contextlib.suppress(Exception):
                await conn.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY)
        await super().close_connections()
