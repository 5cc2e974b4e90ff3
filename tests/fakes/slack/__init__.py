"""An in-process fake of Slack for tests: Web API, Socket Mode, file host, HTTP-mode signing.

The real slack-sdk / slack-bolt clients talk to it unchanged
(``AsyncWebClient(base_url=fake.api_url)``, ``SocketModeClient`` via ``apps.connections.open``),
so the bridge is tested against the protocol rather than against mocks of the SDK. It is strict
where Slack is strict for the requests picobridge makes (token types, revoked tokens, the
message length limit, unknown channels, reactions, acks and redelivery), and scripts failures
with the fault vocabulary of tests/fakes/server.py (fail_next, stall_next, set_flood,
redeliver, revoke...), plus ``drop_socket_connections`` and ``send_disconnect``, ``click``
for a person clicking a button (``post_interaction_http`` in HTTP mode), and for deliveries
that do not parse ``send_payload`` (any Events API payload, redelivered like an event),
``send_raw_frame`` (any websocket text) and ``post_raw_http`` (any HTTP body).

Typical use::

    async with FakeSlack(ack_timeout=0.5) as fake:
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
        await fake.send_event(fake.dm_message("hello"))
        await fake.wait_for_message(channel=fake.dm_channel(DEFAULT_USER))

Parts, each building on the one before: base (HTTP, tokens, errors), workspace (users,
channels, history), files, socket (Socket Mode), chat (the Web API methods, with blocks.py
for Block Kit), events (event builders), interactive (button clicks), http_mode (signed
deliveries to a daemon in HTTP mode).
"""

from tests.fakes.server import Call
from tests.fakes.slack.http_mode import SlackHttpMode
from tests.fakes.slack.model import (
    DEFAULT_CHANNEL,
    DEFAULT_USER,
    LOGIN_PAGE_HTML,
    MAX_TEXT_CHARS,
    PostedMessage,
)


class FakeSlack(SlackHttpMode):
    """A fake Slack workspace with one app installed, served on 127.0.0.1 (random port)."""


__all__ = ["DEFAULT_CHANNEL", "DEFAULT_USER", "LOGIN_PAGE_HTML", "MAX_TEXT_CHARS", "Call",
           "FakeSlack", "PostedMessage"]
