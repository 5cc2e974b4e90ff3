"""Slack daemon lifecycle, end to end: crashes, restarts, dropped connections, rejected tokens
and `picobridge check`. Each test runs its own daemon because each ends it in its own way."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.slack_support import (
    SIGNING_SECRET,
    assert_no_secrets,
    http_port,
    reply_to,
    slack_config,
)
from tests.fakes.slack import FakeSlack
from tests.harness import Daemon, run_cli

PLATFORM_AUTH = 5


async def test_sigkill_mid_burst_then_restart_loses_nothing(tmp_path: Path) -> None:
    users = [f"U0BURST{i}" for i in range(8)]
    # A short ack timeout makes Slack's redelivery of unacknowledged events quick.
    async with FakeSlack(ack_timeout=1.0) as fake:
        config = slack_config(tmp_path, fake, allowed_users=users)
        first = await Daemon(config).start()
        await fake.wait_for_socket()
        for i, user in enumerate(users):
            await fake.send_event(fake.dm_message(f"burst {i} #slow=0.3", user=user))
        await fake.wait_for(lambda: len(fake.acks) >= 3)
        await first.kill()
        answered_before = sum(
            1 for m in fake.messages if m.text.startswith("echo: burst"))
        assert answered_before < len(users)  # the kill did interrupt the burst

        async with Daemon(config) as second:
            for i, user in enumerate(users):
                await reply_to(fake, fake.dm_channel(user), f"echo: burst {i} ", timeout=30)
        assert_no_secrets(first, fake)
        assert_no_secrets(second, fake)


async def test_http_200_means_committed_even_if_killed_right_after(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        config = slack_config(tmp_path, fake, "--ready-delay=1", mode="http")
        first = await Daemon(config).start()
        url = f"http://127.0.0.1:{await http_port(first)}/slack/events"
        delivery = await fake.post_event_http(url, fake.dm_message("kept"),
                                              SIGNING_SECRET)
        assert delivery.status == 200
        await first.kill()  # the agent was not even ready: only the store has the message
        assert not fake.posted_messages()

        async with Daemon(config):
            await reply_to(fake, fake.dm_channel(), "echo: kept", timeout=30)


async def test_socket_reconnects_after_the_connection_drops(tmp_path: Path) -> None:
    async with FakeSlack() as fake, Daemon(slack_config(tmp_path, fake)) as daemon:
        await fake.wait_for_socket()
        await fake.send_event(fake.dm_message("before the drop"))
        await reply_to(fake, fake.dm_channel(), "echo: before the drop")
        assert await fake.drop_socket_connections() == 1
        await fake.wait_for(lambda: fake.socket_connects >= 2 and fake.connection_count)
        await fake.send_event(fake.dm_message("after the drop"))
        await reply_to(fake, fake.dm_channel(), "echo: after the drop")
        assert_no_secrets(daemon, fake)


async def test_rejected_bot_token_stops_the_daemon_with_exit_code_5(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        wrong = "xoxb-0-this-token-is-not-valid"
        daemon = await Daemon(slack_config(tmp_path, fake, bot_token=wrong)).start()
        assert await daemon.wait(timeout=30) == PLATFORM_AUTH
        line = await daemon.wait_for_log("invalid_auth")
        assert "slack.bot_token" in line
        assert wrong not in daemon.log
        assert_no_secrets(daemon, fake)


async def test_revoked_app_token_stops_the_daemon_with_exit_code_5(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        fake.revoke(fake.app_token)
        daemon = await Daemon(slack_config(tmp_path, fake)).start()
        assert await daemon.wait(timeout=30) == PLATFORM_AUTH
        line = await daemon.wait_for_log("token_revoked")
        assert "slack.app_token" in line
        assert fake.socket_connects == 0
        assert_no_secrets(daemon, fake)


async def test_check_shows_bot_and_team_without_printing_tokens(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        config = slack_config(tmp_path, fake)
        code, out, err = await run_cli("check", "--config", str(config))
        assert code == 0, out + err
        slack_line = next(line for line in out.splitlines() if " slack " in line)
        assert slack_line.startswith("ok")
        assert "@picobridge (U0BOT)" in slack_line and "Fake Team (T1)" in slack_line
        assert fake.calls_to("auth.test") and fake.calls_to("apps.connections.open")

        bad = slack_config(tmp_path, fake, bot_token="xoxb-0-another-wrong-token")
        code, out, err = await run_cli("check", "--config", str(bad))
        assert code == 1
        assert "FAIL slack" in out and "invalid_auth" in out
        for secret in (fake.bot_token, fake.app_token, "xoxb-0-another-wrong-token"):
            assert secret not in out + err
