"""The homeserver connection: mautrix's client-server API over one aiohttp session, signed in
with the configured access token or with a device login made from the password and kept in
the state directory.

mautrix turns M_LIMIT_EXCEEDED into an error without the wait the server asked for
(`retry_after_ms`, or a Retry-After header); the outbox needs that wait to keep a chat's order
while it waits, so responses are read here first (`MatrixHTTP`).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
from mautrix.api import HTTPAPI, Method
from mautrix.client import ClientAPI
from mautrix.errors import MatrixRequestError, MLimitExceeded, MUnknownToken, make_request_error
from mautrix.types import DeviceID, UserID
from mautrix.util.logging import TraceLogger

from picobridge.adapters.matrix.settings import MatrixSettings

log = logging.getLogger("picobridge.matrix")

SESSION_FILE = "session.json"
# When the server names no wait: long enough not to hammer it, short enough not to stall.
DEFAULT_RETRY_AFTER = 2.0


class LimitExceeded(MLimitExceeded):
    """M_LIMIT_EXCEEDED (or HTTP 429), with the seconds the server asked us to wait."""

    def __init__(self, http_status: int, message: str, retry_after: float) -> None:
        super().__init__(http_status, message)
        self.retry_after = retry_after


class SignInFailed(Exception):
    """The homeserver refused our credentials; the message holds no secret."""


class MatrixHTTP(HTTPAPI):
    async def _send(self, method: Method, url: Any, content: Any, query_params: dict[str, str],
                    headers: dict[str, str]) -> tuple[Any, aiohttp.ClientResponse]:
        request = self.session.request(str(method), url, data=content, params=query_params,
                                       headers=headers)
        async with request as response:
            if 200 <= response.status < 300:
                return await response.json(), response
            text = await response.text()
            body = _json_object(text)
            errcode = body.get("errcode")
            if response.status == 429 or errcode == "M_LIMIT_EXCEEDED":
                raise LimitExceeded(response.status, str(body.get("error") or ""),
                                    _retry_after(body, response.headers.get("Retry-After")))
            raise make_request_error(
                http_status=response.status, text=text,
                errcode=errcode if isinstance(errcode, str) else None,
                message=body.get("error") if isinstance(body.get("error"), str) else None)


def _json_object(text: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _retry_after(body: dict[str, Any], header: str | None) -> float:
    ms = body.get("retry_after_ms")
    if isinstance(ms, int | float) and ms >= 0:
        return float(ms) / 1000
    if header is not None:
        try:
            return max(0.0, float(header))
        except ValueError:
            pass
    return DEFAULT_RETRY_AFTER


def make_client(settings: MatrixSettings, session: aiohttp.ClientSession,
                token: str = "") -> ClientAPI:
    assert settings.homeserver is not None and settings.user_id is not None
    # mautrix logs every request's body at DEBUG (users' messages); our own lines suffice.
    api = MatrixHTTP(settings.homeserver, token, client_session=session,
                     log=cast(TraceLogger, logging.getLogger("mau.picobridge")))
    if settings.e2ee:
        # mautrix's Client (never started: its sync loop is not used) encrypts what is sent
        # into encrypted rooms once e2ee.py gives it the crypto machine.
        from mautrix.client import Client

        return Client(UserID(settings.user_id), DeviceID(settings.device_id or ""), api=api)
    return ClientAPI(UserID(settings.user_id), DeviceID(settings.device_id or ""), api=api)


@dataclass(frozen=True, slots=True)
class Identity:
    user_id: str
    device_id: str | None
    # Names the bot answers to when written in a message (its localpart, its display name).
    names: tuple[str, ...] = ()


class SessionStore:
    """The device login made from the password: access token and device id, file mode 0600,
    so a restart reuses the device instead of making a new one each time."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "matrix" / SESSION_FILE

    def load(self, settings: MatrixSettings) -> tuple[str, str] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("user_id") != settings.user_id \
                or data.get("homeserver") != settings.homeserver:
            return None
        token, device = data.get("access_token"), data.get("device_id")
        return (token, device) if isinstance(token, str) and isinstance(device, str) else None

    def save(self, settings: MatrixSettings, token: str, device_id: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"homeserver": settings.homeserver, "user_id": settings.user_id,
                       "device_id": device_id, "access_token": token}, fh)
        os.replace(tmp, self.path)


async def sign_in(client: ClientAPI, settings: MatrixSettings, store: SessionStore | None
                  ) -> Identity:
    """Use the access token, else the stored device login, else log in with the password
    (keeping the device id); then whoami. Raises SignInFailed when refused."""
    if settings.access_token is not None:
        client.api.token = settings.access_token.get_secret_value()
        return await _whoami(client, settings, "matrix.access_token")
    stored = store.load(settings) if store is not None else None
    if stored is not None:
        client.api.token, client.device_id = stored[0], DeviceID(stored[1])
        try:
            return await _whoami(client, settings, "the stored device login")
        except SignInFailed:
            log.info("the stored Matrix device login is no longer valid; logging in again")
    assert settings.password is not None
    try:
        answer = await client.login(
            password=settings.password.get_secret_value(), device_name=settings.device_name,
            device_id=settings.device_id or (stored[1] if stored else None))
    except MatrixRequestError as exc:
        if getattr(exc, "http_status", 0) in (400, 401, 403):
            raise SignInFailed(f"the homeserver refused matrix.password for "
                               f"{settings.user_id} ({exc.__class__.__name__})") from None
        raise
    if store is not None:
        store.save(settings, answer.access_token, answer.device_id)
    return await _whoami(client, settings, "the new device login")


async def _whoami(client: ClientAPI, settings: MatrixSettings, what: str) -> Identity:
    try:
        me = await client.whoami()
    except MUnknownToken:
        raise SignInFailed(f"the homeserver refused {what} (M_UNKNOWN_TOKEN)") from None
    except MatrixRequestError as exc:
        if getattr(exc, "http_status", 0) in (401, 403):
            raise SignInFailed(f"the homeserver refused {what} "
                               f"({exc.__class__.__name__})") from None
        raise
    if me.user_id != settings.user_id:
        raise SignInFailed(f"{what} belongs to {me.user_id}, not matrix.user_id "
                           f"{settings.user_id}")
    client.device_id = me.device_id or client.device_id
    localpart = me.user_id[1:].split(":", 1)[0]
    names = [localpart]
    try:
        display = await client.get_displayname(me.user_id)
    except MatrixRequestError:
        display = None
    if display and display.lower() != localpart.lower():
        names.append(display)
    return Identity(me.user_id, me.device_id, tuple(names))
