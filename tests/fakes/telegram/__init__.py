"""An in-process fake of the Telegram Bot API for tests.

An aiohttp server on 127.0.0.1 that python-telegram-bot talks to through
``base_url=fake.base_url`` and ``base_file_url=fake.base_file_url``. It is strict where the real
service is strict for the requests picobridge makes (the 4096-UTF-16-unit text limit, entities
checked against the text, long-polling offsets, the 409 of a second poller, error envelopes,
file sizes), and scripts the failures the real service produces with the fault vocabulary of
tests/fakes/server.py (fail_next, stall_next, set_flood, redeliver, revoke...), plus
``block_chat`` for a user who blocked the bot, ``answer_next`` for a success whose result has
the wrong shape, and ``post_webhook`` for a webhook body that is no update at all.

Typical use::

    async with FakeTelegram() as fake:
        bot = telegram.Bot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)
        fake.user_message(42, 42, "hello")
        ...
        await fake.wait_for(lambda: len(fake.sent_messages(42)) >= 1, "a reply")

Parts, each building on the one before: base (HTTP, tokens, chats), files, updates, users
(updates users cause), keyboards, commands (the command lists per scope), api (the methods
the bot calls), media (the files it sends).
"""

from tests.fakes.server import Call
from tests.fakes.telegram.entities import utf16_len
from tests.fakes.telegram.media import TelegramMedia
from tests.fakes.telegram.model import ApiError, ChatAction, SentMessage, StoredFile


class FakeTelegram(TelegramMedia):
    """A fake Telegram Bot API server (see the package docstring)."""


__all__ = ["ApiError", "Call", "ChatAction", "FakeTelegram", "SentMessage", "StoredFile",
           "utf16_len"]
