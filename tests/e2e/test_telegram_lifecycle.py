"""Telegram end to end: start-up and connection failures (401, 409, stalled or failing
getUpdates), webhook mode, and `picobridge check`."""

from __future__ import annotations

import socket
from pathlib import Path

from picobridge import exit_codes
from tests.e2e.telegram_support import (
    OTHER_USER,
    USER,
    assert_no_token,
    replies,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, run_cli


async def test_revoked_token_at_startup_exits_with_a_clear_line(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        fake.token = "5123456789:AAOtherTokenTheBotNowHasInsteadOfOld1"  # ours is revoked
        daemon = await Daemon(config).start()
        code = await daemon.wait(timeout=30)
        assert code == exit_codes.PLATFORM_AUTH == 5
        line = next(li for li in daemon.log_lines if "failed for good" in li)
        assert "401 Unauthorized" in line and "@BotFather" in line
        assert_no_token(daemon, "5123456789:AAFakeTokenForPicobridgeTests_x7Qv0Lk3Zp9")
        assert "AAFakeToken" not in daemon.log


async def test_second_poller_conflict_is_fatal(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            fake.fail_next("getUpdates", 409)
            fake.user_message(USER, USER, "wake the poll")  # ends the parked long poll
            code = await daemon.wait(timeout=30)
        assert code == exit_codes.PLATFORM_AUTH
        assert "409 Conflict" in daemon.log
        assert_no_token(daemon, fake.token)


async def test_watchdog_reconnects_after_stall_and_errors(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, poll_timeout=1, stall_timeout=2)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            polls = len(fake.calls_to("getUpdates"))
            fake.stall_next("getUpdates")
            await fake.wait_for(lambda: len(fake.calls_to("getUpdates")) > polls + 1)
            await daemon.wait_for_log(r"getUpdates gave no answer for \d+s; reconnecting")
            # The fault applies to the next getUpdates call, not to the one already parked:
            # wait until the poller has met it before the user writes.
            fake.fail_next("getUpdates", 502, times=2)
            await daemon.wait_for_log(r"getUpdates failed: NetworkError: Bad Gateway")
            fake.user_message(USER, USER, "after the trouble")
            await reply_containing(fake, USER, "echo: after the trouble")
            fake.release()
        assert_no_token(daemon, fake.token)


async def test_senders_hear_that_their_message_waits_while_the_agent_is_down(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "agent-may-start"
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, "--start-when", str(gate),
                                 agent={"restart_budget": 1})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            # Three failed starts (backoff 0.5 s, then 1 s): down for longer than the budget.
            await daemon.wait_until(
                lambda: sum("agent down" in line for line in daemon.log_lines) >= 3, 20,
                "three failed agent starts")
            first = fake.user_message(USER, USER, "are you there?")
            notice = await reply_containing(fake, USER, "not available right now")
            assert notice.text is not None and "saved" in notice.text
            assert notice.reply_to_message_id == first["message"]["message_id"]
            # Once per chat and outage: the second message waits without another notice.
            second = fake.user_message(USER, USER, "hello?")
            await daemon.wait_for_log(rf"received .* id={USER}:{second['message']['message_id']}")
            fake.user_message(OTHER_USER, OTHER_USER, "me too")
            await reply_containing(fake, OTHER_USER, "not available right now")
            gate.touch()  # the agent can start again: everything queued is answered
            await reply_containing(fake, USER, "echo: are you there?")
            await reply_containing(fake, USER, "hello?")
            await reply_containing(fake, OTHER_USER, "echo: me too")
            texts = [m.text or "" for m in fake.sent_messages(USER)]
            assert len(replies(fake, USER, "not available right now")) == 1
            assert texts[0] == notice.text  # told before anything else reached the chat
        assert_no_token(daemon, fake.token)


async def test_a_chat_that_wrote_before_the_budget_ran_out_is_told_too(tmp_path: Path) -> None:
    gate = tmp_path / "agent-may-start"
    budget = 3
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, "--start-when", str(gate),
                                 agent={"restart_budget": budget})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            # Written while the agent is down but before the budget is spent: no notice yet,
            # and the chat writes nothing more.
            first = fake.user_message(USER, USER, "early bird")
            await daemon.wait_for_log(rf"received .* id={USER}:{first['message']['message_id']}")
            notice = await reply_containing(fake, USER, "not available right now",
                                            timeout=budget + 10)
            assert notice.reply_to_message_id == first["message"]["message_id"]
            gate.touch()
            await reply_containing(fake, USER, "echo: early bird")
            assert len(replies(fake, USER, "not available right now")) == 1
        assert AgentJournal(tmp_path / "agent").messages()[0]["content"] == "early bird"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_webhook_mode(tmp_path: Path) -> None:
    port = _free_port()
    async with FakeTelegram() as fake:
        config = telegram_config(
            tmp_path, fake, mode="webhook", webhook_secret="s3cret-hook_value",
            webhook_url=f"http://127.0.0.1:{port}/telegram/webhook",
            sections={"http": {"listen": f"127.0.0.1:{port}"}})
        async with Daemon(config) as daemon:
            await daemon.wait_for_log(r"webhook set")
            await daemon.wait_for_log(r"http listening")
            assert fake.webhook is not None
            assert fake.webhook["secret_token"] == "s3cret-hook_value"
            assert fake.webhook["allowed_updates"] == ["message", "edited_message",
                                                      "callback_query"]
            first = fake.user_message(USER, USER, "via webhook")
            assert await fake.deliver_webhook() == 1
            await reply_containing(fake, USER, "echo: via webhook")
            # Telegram resending an update (e.g. after a timeout) changes nothing.
            fake.enqueue_update(dict(first))
            assert await fake.deliver_webhook() == 1
            # Someone guessing the URL without the secret gets nothing in.
            fake.webhook["secret_token"] = "wrong"
            fake.user_message(USER, USER, "forged")
            assert await fake.deliver_webhook() == 0
        assert [m["content"] for m in AgentJournal(tmp_path / "agent").messages()] == [
            "via webhook"]
        assert "wrong secret token" in daemon.log
        assert fake.calls_to("getUpdates") == []
        assert_no_token(daemon, fake.token)


async def test_check_shows_the_bot_without_the_token(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        code, out, err = await run_cli("check", "--config", str(config))
        assert code == 0, out + err
        assert "@picobridge_test_bot" in out and "Picobridge Test Bot" in out
        assert fake.token not in out + err and "AAFakeToken" not in out + err
        fake.token = "5123456789:AAOtherTokenTheBotNowHasInsteadOfOld1"
        code, out, err = await run_cli("check", "--config", str(config))
        assert code == 1
        assert "401" in out and "AAFakeToken" not in out + err
