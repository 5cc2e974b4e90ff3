"""Slack deliveries through bolt, with the acknowledgement decided here.

Bolt acknowledges an event when the adapter's listener returns and withholds the
acknowledgement (no Socket Mode response, HTTP 5xx) when it raises: right for a message the
bridge could not store (StorageUnavailable), which Slack then sends again and which is
stored then. It is wrong for a delivery that can never be read (shapes.py): withheld, Slack
would send the same broken payload again and again. So every delivery is screened before bolt
sees it, and bolt's result is read back through an `Outcome` the listener marks (a context
variable, as bolt awaits the listener inside the dispatch):

- the listener ran and returned: acknowledged (bolt's response goes out);
- the listener raised: not acknowledged; Slack redelivers. StorageUnavailable is the bridge's
  outage, which the bridge logs once, so it is logged here only at debug level;
- the listener never ran because bolt could not make sense of the delivery (no handler,
  a failure inside bolt): logged without the content, acknowledged and skipped.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_internals import send_async_response
from slack_bolt.adapter.socket_mode.internals import build_headers
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest

from picobridge.adapters.slack.shapes import (
    envelope_problem,
    interaction_problem,
    payload_problem,
)
from picobridge.contract import StorageUnavailable

log = logging.getLogger("picobridge.slack")

# Bolt's answer to a request whose signature it refused: passed on as is.
_REFUSED = 401
# How old a signed request may be (Slack's own rule, as bolt applies it).
_SIGNATURE_AGE = 300


@dataclass(slots=True)
class Outcome:
    """What became of one delivery inside bolt."""

    ran: bool = False  # the adapter's listener was called
    error: BaseException | None = None  # what the listener raised
    bolt_error: BaseException | None = None  # bolt failed before any listener ran


_OUTCOME: contextvars.ContextVar[Outcome | None] = contextvars.ContextVar(
    "slack_delivery_outcome", default=None)


class NotYet(Exception):
    """The adapter cannot take this delivery yet (it does not know who it is on Slack):
    not acknowledged, Slack sends it again. Expected for a moment at start, so it is logged
    without a traceback."""


def listening() -> None:
    """Called first by each of the adapter's bolt listeners."""
    outcome = _OUTCOME.get()
    if outcome is not None:
        outcome.ran = True


def _unreadable(where: str, reason: str, acknowledged: bool = True) -> None:
    log.warning("a Slack %s was skipped%s: %s (content not logged)", where,
                " and acknowledged" if acknowledged else "", reason)


class Dispatcher:
    def __init__(self, app: AsyncApp, signing_secret: str | None = None) -> None:
        self._app = app
        self._secret = signing_secret.encode() if signing_secret else None
        app.error(self._on_error)

    async def _on_error(self, error: Exception) -> BoltResponse | None:
        """Bolt's error handler: records the failure for the dispatch to judge, instead of
        bolt's traceback at ERROR for every redelivery of a message waiting for storage."""
        outcome = _OUTCOME.get()
        if outcome is None:
            log.warning("Slack delivery failed: %s", error.__class__.__name__, exc_info=error)
        elif outcome.ran:
            outcome.error = error
        else:
            outcome.bolt_error = error
        if isinstance(error, StorageUnavailable):
            return BoltResponse(status=503, body="")
        return None

    async def _dispatch(self, request: AsyncBoltRequest) -> tuple[BoltResponse, Outcome]:
        outcome = Outcome()
        token = _OUTCOME.set(outcome)
        try:
            return await self._app.async_dispatch(request), outcome
        finally:
            _OUTCOME.reset(token)

    def _withheld(self, outcome: Outcome, what: str) -> bool:
        """Whether the listener refused the delivery (logged here); it is then not
        acknowledged and Slack sends it again."""
        error = outcome.error
        if error is None:
            return False
        if isinstance(error, StorageUnavailable):
            log.debug("%s not acknowledged: the database cannot store it yet", what)
        elif isinstance(error, NotYet):
            log.info("%s not acknowledged: %s", what, error)
        else:
            log.warning("%s not acknowledged (%s); Slack will send it again", what,
                        error.__class__.__name__, exc_info=error)
        return True

    # -- Socket Mode ------------------------------------------------------------------------

    async def screen(self, client: AsyncBaseSocketModeClient, message: dict[str, Any],
                     raw: str | None = None) -> None:
        """The SDK's raw message listener: runs before it makes a request of the envelope.
        An unreadable envelope is acknowledged and its payload taken out of the message, so
        the SDK (which would fail on it) and bolt never see it."""
        envelope_id = message.get("envelope_id")
        if envelope_id is None:
            return  # hello, disconnect: the SDK's own business
        problem = envelope_problem(message) if isinstance(envelope_id, str) and envelope_id \
            else "the envelope id is not text"
        if problem is None:
            return
        ackable = isinstance(envelope_id, str) and bool(envelope_id)
        _unreadable("Socket Mode envelope", problem, acknowledged=ackable)
        message.pop("payload", None)
        if ackable:
            await client.send_socket_mode_response({"envelope_id": envelope_id})

    async def socket_request(self, client: AsyncBaseSocketModeClient,
                             req: SocketModeRequest) -> None:
        """The SDK's request listener: bolt handles the envelope, then the ack is decided."""
        start = time.time()
        try:
            bolt_request = AsyncBoltRequest(mode="socket_mode", body=req.payload,
                                            headers=build_headers(req))
            response, outcome = await self._dispatch(bolt_request)
        except Exception as exc:
            # Bolt itself failed on the payload (screening missed a shape it cannot take).
            response, outcome = BoltResponse(status=500), Outcome(bolt_error=exc)
        if self._withheld(outcome, f"Slack envelope ({req.type})"):
            return
        if response.status != 200:
            reason = outcome.bolt_error.__class__.__name__ if outcome.bolt_error else \
                f"bolt answered {response.status}"
            _unreadable(f"{req.type} envelope", reason)
            response = BoltResponse(status=200, body="")
        await send_async_response(client, req, response, start)

    # -- HTTP mode --------------------------------------------------------------------------

    async def http(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if self._secret is None or not signed(self._secret, raw, request.headers):
            log.warning("refused a request to %s: bad or stale Slack signature", request.path)
            return web.Response(status=_REFUSED)
        problem = _body_problem(raw, request.content_type)
        if problem is not None:
            _unreadable("request", problem)
            return web.Response(status=200)
        try:
            response, outcome = await self._dispatch(_read_form(await to_bolt_request(request)))
        except Exception as exc:
            _unreadable("request", exc.__class__.__name__)
            return web.Response(status=200)
        if self._withheld(outcome, "Slack request"):
            return await to_aiohttp_response(response)
        if not outcome.ran and response.status not in (200, _REFUSED):
            reason = outcome.bolt_error.__class__.__name__ if outcome.bolt_error else \
                f"bolt answered {response.status}"
            _unreadable("request", reason)
            return web.Response(status=200)
        return await to_aiohttp_response(response)


def signed(secret: bytes, raw: bytes, headers: Mapping[str, str]) -> bool:
    """Whether Slack signed this body (v0, HMAC-SHA256 over the timestamp and the bytes as
    sent: slack-sdk's verifier wants text and fails on a body that is not UTF-8)."""
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    try:
        if abs(time.time() - int(timestamp)) > _SIGNATURE_AGE:
            return False
    except ValueError:
        return False
    base = b"v0:" + timestamp.encode() + b":" + raw
    expected = "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace"))


def _read_form(request: AsyncBoltRequest) -> AsyncBoltRequest:
    """bolt takes any form body that contains the word "payload" for an interaction and, with
    no `payload` field in it, reads the body as empty: a slash command whose text (or whose
    sender's name) holds the word would be dropped. Such a form is read as the form it is."""
    raw = request.raw_body
    if request.content_type == "application/json" or raw.startswith("{") or \
            "payload" not in raw:
        return request
    form = dict(parse_qsl(raw, keep_blank_values=True))
    if "payload" not in form:
        request.body = form
        request.context = build_async_context(AsyncBoltContext({}), form)
    return request


def _body_problem(raw: bytes, content_type: str) -> str | None:
    """Why a signed request body cannot be read (form bodies, slash commands, hold only
    strings and are bolt's to parse once they are text; an interaction's form holds its
    JSON in `payload`)."""
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not UTF-8 text"
    if content_type != "application/json":
        form = dict(parse_qsl(body, keep_blank_values=True))
        if "payload" not in form:
            return None
        try:
            return interaction_problem(json.loads(form["payload"]))
        except ValueError:
            return "the interaction payload is not JSON"
    try:
        payload = json.loads(body)
    except ValueError:
        return "the body is not JSON"
    return payload_problem(payload)
