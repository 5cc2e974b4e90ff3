"""Receiving updates through a webhook on the daemon's HTTP server.

The answer tells Telegram what happened to the update: 200 once the bridge committed it (or it
was given up as unreadable: sending it again would change nothing), 503 while the store cannot
write, so Telegram sends it again later. Nothing is confirmed that was not stored.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from telegram import Bot

from picobridge.adapters.telegram.intake import Dispatcher, IntakeRetry
from picobridge.adapters.telegram.parse import (
    Malformed,
    describe_failure,
    parse_update,
    update_id_of,
)
from picobridge.contract import StorageUnavailable

log = logging.getLogger("picobridge.telegram")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookReceiver:
    def __init__(self, dispatcher: Dispatcher, secret: str,
                 bot: Callable[[], Bot | None], heard: Callable[[], None]) -> None:
        self._dispatcher = dispatcher
        self._heard = heard
        self._secret = secret.encode()
        self._bot = bot

    async def handle(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning("webhook call with a wrong secret token refused")
            return web.Response(status=403)
        bot = self._bot()
        if bot is None:
            return web.Response(status=503)  # not connected yet; Telegram retries
        self._heard()
        try:
            raw: object = await request.json()
        except ValueError:
            log.warning("a webhook body that is not JSON was skipped (its content is not "
                        "logged)")
            return web.json_response({})
        uid = update_id_of(raw)
        try:
            update = parse_update(raw, bot)
        except Malformed as exc:
            log.warning("webhook update %s skipped: %s (its content is not logged)",
                        "without an id" if uid is None else uid, exc)
            return web.json_response({})
        task = self._dispatcher.dispatch(update)
        # Shielded: Telegram closing the connection must not abort a commit half way.
        error = await _outcome(asyncio.shield(task))
        if error is None:
            return web.json_response({})
        if isinstance(error, StorageUnavailable | IntakeRetry):
            # The outage is logged once (storage.StorageWait); each refusal only here.
            log.debug("webhook update %d not stored yet (%s); answering 503", update.update_id,
                      error.__class__.__name__)
            return web.Response(status=503)
        log.error("webhook update %d failed (%s)", update.update_id, describe_failure(error))
        return web.Response(status=500)


async def _outcome(awaitable: Awaitable[None]) -> BaseException | None:
    try:
        await awaitable
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return exc
    return None
