"""Slack's HTTP (Events API) mode seen from the fake: requests signed as Slack signs them
(v0, HMAC-SHA256 over timestamp and body), POSTed to a daemon listening for them."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from urllib.parse import urlencode

from tests.fakes.server import JSON
from tests.fakes.slack.interactive import SlackInteractive
from tests.fakes.slack.model import DEFAULT_USER, HttpDelivery


class SlackHttpMode(SlackInteractive):
    """Events, slash commands, interactivity and URL verification delivered over HTTP."""

    @staticmethod
    def sign(body: bytes, signing_secret: str,
             timestamp: int | str | None = None) -> dict[str, str]:
        """X-Slack-Request-Timestamp + X-Slack-Signature (v0, HMAC-SHA256) for `body`."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = b"v0:" + ts.encode() + b":" + body
        digest = hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}

    async def _post_signed(self, target_url: str, body: bytes, content_type: str,
                           signing_secret: str, payload: JSON, *, timestamp: int | None = None,
                           extra_headers: Mapping[str, str] | None = None) -> HttpDelivery:
        headers = {"Content-Type": content_type,
                   "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
                   **self.sign(body, signing_secret, timestamp), **(extra_headers or {})}
        async with self.session().post(target_url, data=body, headers=headers) as resp:
            return HttpDelivery(resp.status, await resp.text(), dict(resp.headers), payload)

    async def post_event_http(self, target_url: str, event: JSON, signing_secret: str, *,
                              event_id: str | None = None, retry_num: int | None = None,
                              retry_reason: str = "http_timeout",
                              timestamp: int | None = None) -> HttpDelivery:
        """POST an event_callback to a daemon in HTTP mode, signed as Slack signs it."""
        payload = self.event_payload(event, event_id)
        extra = {}
        if retry_num:
            extra = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason}
        return await self._post_signed(target_url, json.dumps(payload).encode(),
                                       "application/json", signing_secret, payload,
                                       timestamp=timestamp, extra_headers=extra)

    async def post_raw_http(self, target_url: str, body: bytes, signing_secret: str | None, *,
                            content_type: str = "application/json") -> HttpDelivery:
        """POST any body (signed when a secret is given), e.g. one that does not parse."""
        headers = {"Content-Type": content_type,
                   **(self.sign(body, signing_secret) if signing_secret is not None else {})}
        async with self.session().post(target_url, data=body, headers=headers) as resp:
            return HttpDelivery(resp.status, await resp.text(), dict(resp.headers), {})

    async def post_slash_command_http(self, target_url: str, command: str, text: str,
                                      signing_secret: str, *, user: str = DEFAULT_USER,
                                      channel: str | None = None) -> HttpDelivery:
        payload = self.slash_command_payload(command, text, user=user, channel=channel)
        return await self._post_signed(target_url, urlencode(payload).encode(),
                                       "application/x-www-form-urlencoded", signing_secret,
                                       dict(payload))

    async def post_interaction_http(self, target_url: str, payload: object,
                                    signing_secret: str) -> HttpDelivery:
        """POST an interactivity payload (a button click) to the app's interactivity URL as
        Slack does: form-encoded, the JSON in one `payload` field, signed."""
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return await self._post_signed(target_url, body, "application/x-www-form-urlencoded",
                                       signing_secret,
                                       payload if isinstance(payload, dict) else {})

    async def post_url_verification(self, target_url: str,
                                    signing_secret: str) -> HttpDelivery:
        payload: JSON = {"token": self.verification_token,
                         "challenge": secrets.token_urlsafe(24), "type": "url_verification"}
        return await self._post_signed(target_url, json.dumps(payload).encode(),
                                       "application/json", signing_secret, payload)
