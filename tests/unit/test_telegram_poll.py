"""The update loop against the fake Bot API, with an in-memory bridge: the offset confirms
only committed updates, albums become one message, failures are retried, 401/409 are fatal."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot, Update
from telegram.request import HTTPXRequest

from picobridge.adapters.common.attachments import AttachmentPolicy
from picobridge.adapters.telegram.intake import Dispatcher, Pipeline
from picobridge.adapters.telegram.normalise import BotIdentity
from picobridge.adapters.telegram.poll import CURSOR, Poller
from picobridge.adapters.telegram.webhook import WebhookReceiver
from picobridge.config.sections import AttachmentSettings
from picobridge.contract import ChatRef
from tests.fakes.server import DOWNLOAD
from tests.fakes.telegram import FakeTelegram
from tests.unit.telegram_memory import MemoryBridge

USER = 42


@dataclass
class Rig:
    fake: FakeTelegram
    bridge: MemoryBridge
    bot: Bot
    dispatcher: Dispatcher
    poller: Poller
    task: asyncio.Task[None]


async def notice(chat: ChatRef, reply_to: str | None, text: str) -> None:
    raise AssertionError(f"unexpected notice {text!r}")


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with FakeTelegram() as fake:
        bridge = MemoryBridge()
        request = HTTPXRequest(read_timeout=5.0)
        bot: Bot = Bot(fake.token, base_url=fake.base_url,
                                  base_file_url=fake.base_file_url, get_updates_request=request)
        await bot.initialize()
        policy = AttachmentPolicy(AttachmentSettings(), tmp_path / "media")
        identity = BotIdentity(bot.bot.id, bot.bot.username or "")
        pipeline = Pipeline(bot, bridge, policy, identity, notice, ("new",), str)
        dispatcher = Dispatcher(pipeline.handle, album_wait=1.0)
        poller = Poller(bot, request, dispatcher, bridge, poll_timeout=1, stall_timeout=1.5,
                        fatal=lambda reason: bridge.fatal("telegram", reason), scrub=str)
        task = asyncio.create_task(poller.run())
        try:
            yield Rig(fake, bridge, bot, dispatcher, poller, task)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await dispatcher.close()
            await bot.shutdown()


async def test_offset_moves_only_after_the_commit(rig: Rig) -> None:
    fake, bridge = rig.fake, rig.bridge
    bridge.gate.clear()
    first = fake.user_message(USER, USER, "one")
    await bridge.wait_for(lambda: bridge.waiting == 1, "submit called")
    fake.user_message(USER, USER, "two")
    # Fetched but not committed: nothing may be confirmed, and no poll may run that would
    # confirm it (python-telegram-bot's Updater would already be polling with offset + 1).
    assert fake.active_polls == 0
    assert all((c.params.get("offset") or 0) <= first["update_id"]
               for c in fake.calls_to("getUpdates"))
    assert fake.confirmed_offset <= first["update_id"]
    assert fake.pending_updates[0]["update_id"] == first["update_id"]
    bridge.gate.set()
    await fake.wait_until_confirmed(first["update_id"] + 1)
    assert [m.text for m in bridge.submitted] == ["one", "two"]
    assert bridge.submitted[0].platform_message_id == f"{USER}:{first['message']['message_id']}"
    assert bridge.connections[0] is True


async def test_saved_offset_is_used_after_a_restart(rig: Rig) -> None:
    fake, bridge = rig.fake, rig.bridge
    update = fake.user_message(USER, USER, "remember where we were")
    await bridge.wait_for(lambda: len(bridge.submitted) == 1, "submit")
    rig.task.cancel()
    await asyncio.gather(rig.task, return_exceptions=True)
    saved = json.loads(bridge.cursors[CURSOR])
    assert saved["offset"] == update["update_id"] + 1
    polls = len(fake.calls_to("getUpdates"))
    fresh = Poller(rig.bot, rig.bot.request, rig.dispatcher, bridge, poll_timeout=1,
                   stall_timeout=1.5, fatal=bridge.fatal_reasons.append, scrub=str)
    task = asyncio.create_task(fresh.run())
    try:
        call = await fake.wait_for_call("getUpdates", count=polls + 1)
        assert call.params.get("offset") == saved["offset"]
    finally:
        # Stopping works even while a request is on the wire (see check_cancelled).
        task.cancel()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 5)


async def test_stale_saved_offset_is_ignored(rig: Rig) -> None:
    rig.task.cancel()
    await asyncio.gather(rig.task, return_exceptions=True)
    week_ago = time.time() - 8 * 86400
    rig.bridge.cursors[CURSOR] = json.dumps({"offset": 123, "saved": week_ago})
    polls = len(rig.fake.calls_to("getUpdates"))
    fresh = Poller(rig.bot, rig.bot.request, rig.dispatcher, rig.bridge, poll_timeout=1,
                   stall_timeout=1.5, fatal=rig.bridge.fatal_reasons.append, scrub=str)
    task = asyncio.create_task(fresh.run())
    try:
        call = await rig.fake.wait_for_call("getUpdates", count=polls + 1)
        assert "offset" not in call.params
    finally:
        task.cancel()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 5)


async def test_album_split_over_two_polls_is_one_message(rig: Rig) -> None:
    fake, bridge = rig.fake, rig.bridge
    photo = fake.add_file(b"\xff\xd8 one", None, "image/jpeg", kind="photo")
    polls = len(fake.calls_to("getUpdates"))
    first = fake.user_message(USER, USER, photo=photo, caption="both", media_group_id="a1")
    # The first part is fetched alone and the poller keeps polling, its offset on that part;
    # the second part comes in a later getUpdates.
    await fake.wait_for_call("getUpdates", lambda c: c.params.get("offset") == first["update_id"])
    assert len(fake.calls_to("getUpdates")) > polls + 1 and rig.bridge.submitted == []
    second = fake.add_file(b"\xff\xd8 two", None, "image/jpeg", kind="photo")
    fake.user_message(USER, USER, photo=second, media_group_id="a1")
    fake.user_message(USER, USER, "after the album")
    await bridge.wait_for(lambda: len(bridge.submitted) == 2, "album and text")
    album, text = bridge.submitted
    assert album.text == "both" and len(album.attachments) == 2
    assert text.text == "after the album"
    # Until the album was committed the offset stayed on its first part.
    offsets = [c.params.get("offset") for c in fake.calls_to("getUpdates")]
    assert all(o is None or o <= first["update_id"] for o in offsets[: offsets.index(
        first["update_id"]) + 1])


async def test_failed_download_is_retried_not_lost(rig: Rig) -> None:
    fake, bridge = rig.fake, rig.bridge
    fake.fail_next(DOWNLOAD, 502)
    update = fake.user_document(USER, USER, b"hello", "a.txt", "text/plain")
    await bridge.wait_for(lambda: len(bridge.submitted) == 1, "submit after retry")
    assert bridge.submitted[0].attachments[0].content == "hello"
    assert len(fake.downloads) == 1
    await fake.wait_until_confirmed(update["update_id"])


async def refused_for_good(rig: Rig) -> str:
    """The fatal reason; the poller then waits to be stopped, neither polling nor ending
    (which a supervisor would count as a crash and start again)."""
    await rig.bridge.wait_for(lambda: rig.bridge.fatal_reasons, "a fatal refusal")
    polls = len(rig.fake.calls_to("getUpdates"))
    await asyncio.sleep(0.5)  # a quiet moment: there is no event for "nothing happened"
    assert not rig.task.done()
    assert len(rig.fake.calls_to("getUpdates")) == polls
    (reason,) = rig.bridge.fatal_reasons
    return reason


async def test_a_store_that_cannot_write_holds_the_update_unconfirmed(rig: Rig) -> None:
    fake, bridge = rig.fake, rig.bridge
    bridge.unavailable = "database is locked"
    update = fake.user_message(USER, USER, "hold me")
    await bridge.wait_for(lambda: bridge.refused >= 3, "three refused submits")
    polls = len(fake.calls_to("getUpdates"))
    await fake.wait_for_call("getUpdates", count=polls + 2)
    assert fake.confirmed_offset <= update["update_id"] and bridge.submitted == []
    assert not rig.task.done()
    bridge.unavailable = None
    await bridge.wait_for(lambda: len(bridge.submitted) == 1, "the held message stored")
    await fake.wait_until_confirmed(update["update_id"])
    assert [m.text for m in bridge.submitted] == ["hold me"]


async def test_revoked_token_is_fatal(rig: Rig) -> None:
    rig.fake.revoke(rig.fake.token)
    rig.fake.user_message(USER, USER, "end the long poll")
    reason = await refused_for_good(rig)
    assert "401 Unauthorized" in reason and "@BotFather" in reason


async def test_conflict_is_fatal(rig: Rig) -> None:
    rig.fake.fail_next("getUpdates", 409)
    rig.fake.user_message(USER, USER, "end the long poll")
    reason = await refused_for_good(rig)
    assert "409 Conflict" in reason


async def test_stalled_poll_reconnects(rig: Rig) -> None:
    fake, bridge = rig.fake, rig.bridge
    await fake.wait_for_poll()
    fake.stall_next("getUpdates")
    fake.user_message(USER, USER, "ends the parked poll; the next one stalls")
    await bridge.wait_for(lambda: rig.poller.reconnects == 1, "a reconnect")
    fake.user_message(USER, USER, "after the stall")
    await bridge.wait_for(lambda: len(bridge.submitted) == 2, "message after the stall")
    assert False in bridge.connections and bridge.connections[-1] is True
    fake.release()


async def test_webhook_answers_after_commit_and_checks_the_secret(rig: Rig) -> None:
    bridge = rig.bridge
    receiver = WebhookReceiver(rig.dispatcher, "s3cret", lambda: rig.bot, lambda: None)

    class Request:
        def __init__(self, secret: str, body: dict[str, Any]) -> None:
            self.headers = {"X-Telegram-Bot-Api-Secret-Token": secret}
            self._body = body

        async def json(self) -> dict[str, Any]:
            return self._body

    update = rig.fake.user_message(USER, USER, "hooked", enqueue=False)
    wrong = await receiver.handle(Request("guess", update))  # type: ignore[arg-type]
    assert wrong.status == 403 and bridge.submitted == []
    bridge.gate.clear()
    answer = asyncio.create_task(receiver.handle(Request("s3cret", update)))  # type: ignore[arg-type]
    await bridge.wait_for(lambda: bridge.waiting == 1, "submit called")
    assert not answer.done()  # no 200 before the commit
    bridge.gate.set()
    assert (await answer).status == 200
    assert [m.text for m in bridge.submitted] == ["hooked"]
    assert Update.de_json(update, rig.bot) is not None
