"""An in-process fake of Discord for tests: the REST API (under ``base_url``), the gateway over
a real websocket (its address answered by ``/gateway/bot``), and attachment downloads.

discord.py talks to it unchanged. It is strict where Discord is for what picobridge does
(2,000 characters, empty messages, component limits, replies to unknown messages, 429s with
``retry_after`` in the body and X-RateLimit-* headers and a second 429 for an early retry,
the 3 s interaction deadline, privileged intents the app was not granted), and scripts
faults with the vocabulary of tests/fakes/server.py (``fail_next``, ``stall_next``,
``disconnect_next``, ``set_flood``) plus ``rate_limit_next`` and the gateway's
``drop_connection``, ``request_reconnect`` and ``invalidate_session``.

Typical use::

    async with FakeDiscord() as fake:
        fake.dm("hello")
        await fake.wait_for_reply(fake.dm_channel(DEFAULT_USER).id, "echo: hello")

Parts, each building on the one before: model (records, payload shapes), base (HTTP, token,
errors, rate limits), rest (the routes), gateway (the websocket), people (what users do).
"""

from tests.fakes.discord.model import Interaction, SentMessage
from tests.fakes.discord.people import DEFAULT_USER, OTHER_USER, STRANGER, DiscordPeople


class FakeDiscord(DiscordPeople):
    """A fake Discord with one bot application, served on 127.0.0.1 (random port)."""


__all__ = ["DEFAULT_USER", "OTHER_USER", "STRANGER", "FakeDiscord", "Interaction",
           "SentMessage"]
