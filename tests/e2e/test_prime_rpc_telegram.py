"""prime-rpc through `picobridge run` and the fake Telegram Bot API, against the fake pi RPC
agent: chats in their own session files, files and photos in the prompt, /stop."""

from __future__ import annotations

import base64
from pathlib import Path

from tests.e2e.prime_rpc_support import fake_agent_settings, journal
from tests.e2e.telegram_support import OTHER_USER, USER, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40


async def test_two_chats_files_and_photos(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, agent=fake_agent_settings(tmp_path))
        async with Daemon(config) as daemon:
            await started(daemon, fake)
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
        assert daemon.returncode == 0
    prompts = journal(tmp_path).requests("prompt")
    assert [p["message"] for p in prompts[:4]] == ["alpha", "beta", "What did I just say?",
                                                   "What did I just say?"]
    # Each chat's turn runs in its own file: a switch whenever the chat changes.
    switched = [r["sessionPath"] for r in journal(tmp_path).requests("switch_session")]
    assert len(switched) == 5 and len(set(switched)) == 2
    document, photo = prompts[4:]
    assert document["message"] == ("[Attachment: notes.txt]\nline one\nline two\n\n"
                                   "[/Attachment]\n\nsummarise this")
    assert "images" not in document
    (image,) = photo["images"]
    assert image["type"] == "image" and image["mimeType"] == "image/jpeg"
    assert base64.b64decode(image["data"]) == JPEG
    assert photo["message"] == "what is this?"


async def test_stop_aborts_the_running_turn(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake,
                                 agent=fake_agent_settings(tmp_path, shutdown_timeout=1))
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "#stall think about it")
            await journal(tmp_path).wait_until(lambda j: bool(j.prompts()), what="the prompt")
            fake.user_message(USER, USER, "/stop")
            # The agent is asked to abort; what it had said so far comes back, marked stopped.
            stopped = await reply_containing(fake, USER, "(stopped)", timeout=5)
            assert (stopped.text or "").startswith("Working on it…")
            assert len(journal(tmp_path).requests("abort")) == 1
            fake.user_message(USER, USER, "next")
            await reply_containing(fake, USER, "you said: next")


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


async def test_an_image_label_is_not_enough_the_bytes_decide(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, agent=fake_agent_settings(tmp_path))
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_document(USER, USER, b"not a picture at all\n" * 20, "chart.png",
                               "image/png", caption="the liar")
            await reply_containing(fake, USER, "the liar")
            fake.user_document(USER, USER, PNG, "scan.bin", "application/octet-stream",
                               caption="the real one")
            await reply_containing(fake, USER, "the real one")
    liar, real = journal(tmp_path).requests("prompt")
    assert "images" not in liar
    assert liar["message"].startswith("[Attachment: chart.png] The user sent a file that was "
                                      "saved to ")
    assert "type: image/png" in liar["message"] and liar["message"].endswith("the liar")
    (image,) = real["images"]
    assert image["mimeType"] == "image/png" and base64.b64decode(image["data"]) == PNG
    assert real["message"] == "the real one"
