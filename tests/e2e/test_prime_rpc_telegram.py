"""prime-rpc through `picobridge run` and the fake Telegram Bot API, against the fake pi RPC
agent: chats in their own session files, files and photos in the prompt, /stop.

One daemon (with one fake agent) serves the module; every test talks in its own chats and
judges only the agent's requests made during it."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.prime_rpc_support import PrimeJournal, fake_agent_settings, journal
from tests.e2e.telegram_support import (
    OTHER_USER,
    USER,
    assert_no_token,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, settle

# One worker runs the whole module (xdist would start the module's daemon again in each).
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_prime_rpc_telegram")]

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40
STOPPER, LABELLER = 4501, 4502  # the /stop test's and the image labels test's private chats


@dataclass
class Env:
    fake: FakeTelegram
    daemon: Daemon
    journal: PrimeJournal
    db: Path


class Since:
    """The agent's requests of one kind made from now on (the module's agent is shared)."""

    def __init__(self, env: Env) -> None:
        self.journal = env.journal
        self.start = len(env.journal.entries())

    @classmethod
    async def settled(cls, env: Env) -> Since:
        """Once the daemon has finished what the tests before gave it."""
        await settle(env.db, lambda: not env.fake.pending_updates)
        return cls(env)

    def requests(self, kind: str) -> list[dict[str, Any]]:
        return [e["record"] for e in self.journal.entries()[self.start:]
                if isinstance(e.get("record"), dict) and e["record"].get("type") == kind]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("prime-rpc-telegram")
    async with FakeTelegram() as fake:
        # shutdown_timeout: what the /stop test had; it only shortens the daemon's stop.
        config = telegram_config(tmp, fake,
                                 agent=fake_agent_settings(tmp, shutdown_timeout=1),
                                 allowed_users=[USER, OTHER_USER, STOPPER, LABELLER])
        daemon = Daemon(config)
        async with daemon:
            await started(daemon, fake)
            yield Env(fake, daemon, journal(tmp), tmp / "state" / "picobridge.db")
        assert daemon.returncode == 0
        assert_no_token(daemon, fake.token)
        assert "Traceback" not in daemon.log


async def test_two_chats_files_and_photos(env: Env) -> None:
    fake, since = env.fake, await Since.settled(env)
    fake.user_message(USER, USER, "alpha")
    await reply_containing(fake, USER, "you said: alpha")
    fake.user_message(OTHER_USER, OTHER_USER, "beta")
    await reply_containing(fake, OTHER_USER, "you said: beta")
    fake.user_message(USER, USER, "What did I just say?")
    await reply_containing(fake, USER, "You said: alpha")
    fake.user_message(OTHER_USER, OTHER_USER, "What did I just say?")
    await reply_containing(fake, OTHER_USER, "You said: beta")

    fake.user_document(USER, USER, b"line one\nline two\n", "notes.txt", "text/plain",
                       caption="summarise this")
    await reply_containing(fake, USER, "summarise this")
    fake.user_photo(USER, USER, JPEG, caption="what is this?", width=800, height=600)
    await reply_containing(fake, USER, "what is this?")
    prompts = since.requests("prompt")
    assert [p["message"] for p in prompts[:4]] == ["alpha", "beta", "What did I just say?",
                                                   "What did I just say?"]
    # Each chat's turn runs in its own file: a switch whenever the chat changes (the first
    # one too: the agent's turn before it, if any, was another chat's).
    switched = [r["sessionPath"] for r in since.requests("switch_session")]
    assert len(switched) == 5 and len(set(switched)) == 2
    document, photo = prompts[4:]
    assert document["message"] == ("[Attachment: notes.txt]\nline one\nline two\n\n"
                                   "[/Attachment]\n\nsummarise this")
    assert "images" not in document
    (image,) = photo["images"]
    assert image["type"] == "image" and image["mimeType"] == "image/jpeg"
    assert base64.b64decode(image["data"]) == JPEG
    assert photo["message"] == "what is this?"


async def test_stop_aborts_the_running_turn(env: Env) -> None:
    fake, since, chat = env.fake, await Since.settled(env), STOPPER
    fake.user_message(chat, chat, "#stall think about it")
    await env.journal.wait_until(lambda _: bool(since.requests("prompt")), what="the prompt")
    fake.user_message(chat, chat, "/stop")
    # The agent is asked to abort; what it had said so far comes back, marked stopped.
    stopped = await reply_containing(fake, chat, "(stopped)", timeout=5)
    assert (stopped.text or "").startswith("Working on it…")
    assert len(since.requests("abort")) == 1
    fake.user_message(chat, chat, "next")
    await reply_containing(fake, chat, "you said: next")


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


async def test_an_image_label_is_not_enough_the_bytes_decide(env: Env) -> None:
    fake, since, chat = env.fake, await Since.settled(env), LABELLER
    fake.user_document(chat, chat, b"not a picture at all\n" * 20, "chart.png",
                       "image/png", caption="the liar")
    await reply_containing(fake, chat, "the liar")
    fake.user_document(chat, chat, PNG, "scan.bin", "application/octet-stream",
                       caption="the real one")
    await reply_containing(fake, chat, "the real one")
    liar, real = since.requests("prompt")
    assert "images" not in liar
    assert liar["message"].startswith("[Attachment: chart.png] The user sent a file that was "
                                      "saved to ")
    assert "type: image/png" in liar["message"] and liar["message"].endswith("the liar")
    (image,) = real["images"]
    assert image["mimeType"] == "image/png" and base64.b64decode(image["data"]) == PNG
    assert real["message"] == "the real one"
