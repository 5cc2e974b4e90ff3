"""Telegram end to end: what the Bot API (or something between it and the daemon) sends that is
not what it promises. Updates that do not parse are logged without their content, confirmed
and skipped, and polling goes on; answers of the wrong shape to getMe, getWebhookInfo and
getUpdates are retried with backoff; webhook bodies that are no update are answered 200; an
error description that echoes the token in lower case does not reach the log."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from tests.e2e.telegram_support import (
    USER,
    assert_no_token,
    reply_containing,
    started,
    telegram_config,
)
from tests.e2e.test_operations import NotifySocket
from tests.fakes.server import JSON
from tests.fakes.telegram import FakeTelegram
from tests.harness import SHORT_BUSY_TIMEOUT, AgentJournal, Daemon
from tests.storage_faults import write_lock

# What the user wrote in the updates that do not parse: it must never reach the log.
PRIVATE = "my bank pin is 7391 pineapple"


def unreadable_updates(fake: FakeTelegram) -> list[JSON]:
    """Queue one update of each shape the red team sent; returns them in queue order."""
    queued = [fake.enqueue_update({"message": {}}),
              fake.enqueue_update({"message": PRIVATE})]
    without_chat = fake.user_message(USER, USER, PRIVATE, enqueue=False)
    del without_chat["message"]["chat"]
    queued.append(fake.enqueue_update(without_chat))
    numeric_text = fake.user_message(USER, USER, PRIVATE, enqueue=False)
    numeric_text["message"]["text"] = 7391
    queued.append(fake.enqueue_update(numeric_text))
    edit_without_chat = fake.user_message(USER, USER, PRIVATE, enqueue=False)
    del edit_without_chat["message"]["chat"]
    queued.append(fake.enqueue_update({"edited_message": edit_without_chat["message"]}))
    return queued


def assert_clean_log(daemon: Daemon, token: str) -> None:
    assert PRIVATE not in daemon.log and "7391" not in daemon.log
    assert "Traceback" not in daemon.log
    # python-telegram-bot's own report of a batch it cannot parse quotes the raw updates.
    assert "CRITICAL" not in daemon.log and "Error while parsing updates" not in daemon.log
    assert_no_token(daemon, token)


async def test_unreadable_updates_are_confirmed_and_skipped_and_never_come_back(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            bad = unreadable_updates(fake)
            good = fake.user_message(USER, USER, "still here")
            await reply_containing(fake, USER, "echo: still here")
            await fake.wait_until_confirmed(good["update_id"])
            for update in bad:
                await daemon.wait_for_log(rf"update {update['update_id']} skipped: .*"
                                          r"\(its content is not logged\)")
            # One more at the very end, and the daemon stops at once after skipping it.
            last = fake.enqueue_update({"message": "hello"})
            await daemon.wait_for_log(rf"update {last['update_id']} skipped")
        assert_clean_log(daemon, fake.token)

        async with Daemon(config) as restarted:
            await started(restarted, fake)
            after = fake.user_message(USER, USER, "after the restart")
            await reply_containing(fake, USER, "echo: after the restart")
            # Confirmed by the poll after its commit, which may come after the answer.
            await fake.wait_until_confirmed(after["update_id"])
        assert "skipped" not in restarted.log
        assert fake.pending_updates == []
        assert_clean_log(restarted, fake.token)
    contents = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
    assert contents == ["still here", "after the restart"]
    assert fake.texts(USER) == ["echo: still here", "echo: after the restart"]


async def test_answers_of_the_wrong_shape_are_retried_until_they_make_sense(
        tmp_path: Path) -> None:
    notify = NotifySocket(tmp_path / "notify.sock")
    try:
        async with FakeTelegram() as fake:
            # A success whose result is `true` (what a confused proxy could answer).
            fake.answer_next("getMe", True, times=2)
            fake.answer_next("getWebhookInfo", True, times=2)
            fake.answer_next("getUpdates", True)
            config = telegram_config(tmp_path, fake)
            async with Daemon(config, env={"NOTIFY_SOCKET": str(notify.path)}) as daemon:
                await notify.until("READY=1", timeout=40)
                # Ready only once Telegram's answers made sense again, each after a backoff.
                assert len(fake.calls_to("getMe")) == 3
                assert len(fake.calls_to("getWebhookInfo")) == 3
                fake.user_message(USER, USER, "hello again")
                await reply_containing(fake, USER, "echo: hello again")
        # Each retry after a longer wait than the one before (the waits are Backoff's).
        assert re.findall(r"Telegram answered getMe with something that is not a bot "
                          r"\(TypeError\); retrying in (\d+)s", daemon.log) == ["1", "2"]
        assert len(re.findall(r"checking the bot's webhook failed \(an answer that is not "
                              r"webhook info", daemon.log)) == 2
        assert "getUpdates failed: its answer is not a list of updates" in daemon.log
        # Nothing died on the way: no supervised restart, no traceback.
        assert "starting it again" not in daemon.log
        assert_clean_log(daemon, fake.token)
    finally:
        notify.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_webhook_bodies_that_are_no_update_are_skipped_and_outages_answer_503(
        tmp_path: Path) -> None:
    port = _free_port()
    async with FakeTelegram() as fake:
        config = telegram_config(
            tmp_path, fake, mode="webhook", webhook_secret="s3cret-hook_value",
            webhook_url=f"http://127.0.0.1:{port}/telegram/webhook",
            sections={"http": {"listen": f"127.0.0.1:{port}"}, **SHORT_BUSY_TIMEOUT})
        async with Daemon(config) as daemon:
            await daemon.wait_for_log(r"webhook set")
            await daemon.wait_for_log(r"http listening")
            without_chat = fake.user_message(USER, USER, PRIVATE, enqueue=False)
            del without_chat["message"]["chat"]
            bodies: list[object] = [[], 42, without_chat, {"update_id": 5, "message": PRIVATE},
                                    PRIVATE]
            for body in bodies:
                assert await fake.post_webhook(body) == 200, body
            assert len(re.findall(r"skipped: .*\(its content is not logged\)",
                                  daemon.log)) == len(bodies)

            fake.user_message(USER, USER, "a real one")
            assert await fake.deliver_webhook() == 1
            await reply_containing(fake, USER, "echo: a real one")

            # Another process holds the database's write lock for longer than the busy
            # timeout: the update is refused with 503 (Telegram sends it again later). The
            # short busy timeout keeps the 503 well inside post_webhook's 10 s: with the
            # default 5 s, a loaded machine let the request time out before the answer.
            async with write_lock(tmp_path / "state" / "picobridge.db"):
                held = fake.user_message(USER, USER, "while locked")
                assert await fake.post_webhook(held) == 503
            assert await fake.deliver_webhook() == 1  # Telegram's next try
            await reply_containing(fake, USER, "echo: while locked")
        assert_clean_log(daemon, fake.token)
    contents = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
    assert contents == ["a real one", "while locked"]


async def test_a_token_echoed_in_lower_case_never_reaches_the_log(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        token = fake.token
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            # python-telegram-bot strips "Bad Request: " / "Error: " from a description and
            # capitalises the rest, which lowers the token's letters.
            fake.fail_next("getUpdates", 400, error=f"Bad Request: no updates for {token}")
            fake.fail_next("sendMessage", 502, error=f"Error: upstream {token} failed")
            fake.user_message(USER, USER, "wake the poll")  # the next poll meets the fault
            await daemon.wait_for_log(r"getUpdates failed: BadRequest: No updates for")
            await reply_containing(fake, USER, "echo: wake the poll")
            await daemon.wait_for_log(r"not delivered \(Telegram unreachable or failing: "
                                      r"Upstream \[token\] failed\)")
        # The fake did echo it (in its own case), so the daemon had something to hide.
        assert any(token in (c.error or "") for c in fake.calls_to("getUpdates"))
        assert any(token in (c.error or "") for c in fake.calls_to("sendMessage"))
        for line in daemon.log_lines:
            assert token.lower() not in line.lower(), line
            assert token.split(":", 1)[1].lower() not in line.lower(), line
        assert_no_token(daemon, token)
