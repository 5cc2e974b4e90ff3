"""Discord and the operator: `picobridge check` signs in and names a missing Message Content
intent; `run` stops with the reason when Discord refuses the intents or the token."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.discord_support import discord_config
from tests.fakes.discord import FakeDiscord
from tests.harness import Daemon, run_cli


async def test_check_signs_in_and_reports_the_intent(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        code, out, err = await run_cli("check", "--config", str(discord_config(tmp_path, fake)))
        assert code == 0, out + err
        (line,) = [line for line in out.splitlines() if line.startswith("ok   discord")]
        assert "picobot" in line and "Message Content intent granted" in line
        assert fake.token not in out + err

    async with FakeDiscord(app_flags=0) as fake:
        code, out, err = await run_cli("check", "--config", str(discord_config(tmp_path, fake)))
        assert code == 1
        (line,) = [line for line in out.splitlines() if line.startswith("FAIL discord")]
        assert "Message Content intent is not enabled" in line
        assert fake.token not in out + err


async def test_run_stops_with_the_reason_when_discord_refuses_the_intents(
        tmp_path: Path) -> None:
    async with FakeDiscord(app_flags=0) as fake:
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            code = await daemon.wait(60)
        assert code != 0
        assert "Message Content intent is not enabled" in daemon.log
        assert [c.close_code for c in fake.connections] == [4014]
        assert fake.token not in daemon.log


async def test_run_stops_when_the_token_is_refused(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        config = discord_config(tmp_path, fake)
        fake.revoke_bot_token()
        async with Daemon(config) as daemon:
            code = await daemon.wait(60)
        assert code != 0
        assert "Discord refused the bot token" in daemon.log
        assert fake.token not in daemon.log
