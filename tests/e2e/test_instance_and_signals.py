"""One picobridge per state directory, and signals: a repeated SIGTERM during the orderly stop
is acknowledged (the stop goes on, the reply in flight is delivered), a third forces the exit,
and SIGHUP changes nothing."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from tests.harness import AgentJournal, Daemon, base_config, run_cli, write_config


async def test_a_second_instance_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    async with Daemon(config, "chat") as first:
        await first.wait_for_log(r"agent ready pid=")
        assert first.proc is not None
        code, out, err = await run_cli("chat", "--config", str(config), stdin=b"hello\n")
        assert code == 4
        assert f"another picobridge (pid {first.proc.pid}) is using {tmp_path / 'state'}" in err
        code, _, err = await run_cli("migrate", "--config", str(config))
        assert code == 4 and "another picobridge" in err
        # Commands that only read, or make one write SQLite serialises, work beside it.
        code, out, _ = await run_cli("sessions", "list", "--config", str(config))
        assert code == 0
        code, out, _ = await run_cli("access", "allow", "telegram:42", "--config", str(config))
        assert code == 0 and "allowed" in out
        first.close_stdin()
        assert await first.wait() == 0
    # The lock went with the process: a new instance starts.
    code, out, err = await run_cli("chat", "--config", str(config), stdin=b"again\n")
    assert (code, out) == (0, "echo: again\n"), err


async def test_sigterm_while_stopping_is_acknowledged_and_the_reply_still_arrives(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path, shutdown_timeout=20))
    async with Daemon(config, "chat") as chat:
        await chat.wait_for_log(r"agent ready pid=")
        assert chat.proc is not None
        chat.proc.send_signal(signal.SIGHUP)
        await chat.wait_for_log(r"SIGHUP ignored")
        await chat.send_stdin(b"take your time #slow=3\n")
        await AgentJournal(tmp_path / "agent").wait_until(
            lambda j: len(j.messages()) == 1, what="the turn reaching the agent")
        chat.proc.send_signal(signal.SIGTERM)
        await chat.wait_for_log(r"SIGTERM received: stopping")
        chat.proc.send_signal(signal.SIGTERM)
        await chat.wait_for_log(r"SIGTERM received again: already stopping")
        assert await chat.wait(60) == 0
    assert chat.stdout_lines == ["echo: take your time #slow=3"]


async def test_a_third_signal_forces_the_exit_and_nothing_is_lost(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path, shutdown_timeout=20))
    async with Daemon(config, "chat") as chat:
        await chat.wait_for_log(r"agent ready pid=")
        assert chat.proc is not None
        await chat.send_stdin(b"very slow #slow-once=30\n")
        await AgentJournal(tmp_path / "agent").wait_until(
            lambda j: len(j.messages()) == 1, what="the turn reaching the agent")
        for n in range(3):
            chat.proc.send_signal(signal.SIGINT)
            if n < 2:
                await chat.wait_for_log(r"SIGINT received" + (" again" if n else ": stopping"))
        assert await chat.wait(30) == 1
        assert any(re.search(r"third time: exiting now", line) for line in chat.log_lines)
    # The message was kept: the next run answers it.
    code, out, err = await run_cli("chat", "--config", str(config), stdin=b"")
    assert code == 0, err
    assert out == "echo: very slow #slow-once=30\n"
