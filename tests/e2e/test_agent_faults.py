"""Every fault of the fake agent, seen from the user's side of `picobridge chat`: a reply or a
clear error for every message, nothing lost, and the bridge itself never gives up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import AgentJournal, Daemon, base_config, run_cli, write_config


async def converse(tmp: Path, text: str, *flags: str, **agent: Any) -> tuple[list[str], str]:
    config = write_config(tmp, base_config(tmp, *flags, **agent))
    code, out, err = await run_cli("chat", "--config", str(config), stdin=text.encode(),
                                   timeout=90)
    assert code == 0, err[-3000:]
    return out.splitlines(), err


def journal(tmp: Path) -> AgentJournal:
    return AgentJournal(tmp / "agent")


async def test_crash_once_is_retried_and_answered(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#crash-once hello\nafter\n")
    assert lines == ["echo: #crash-once hello", "echo: after"]
    assert "agent exited with code 3" in err
    assert len(journal(tmp_path).starts()) == 2
    contents = [m["content"] for m in journal(tmp_path).messages()]
    assert contents == ["#crash-once hello", "#crash-once hello", "after"]


async def test_message_that_always_crashes_fails_after_three_attempts(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#crash boom\nstill there?\n")
    assert len(lines) == 2
    assert lines[0].startswith("⚠️ Sorry, the agent failed 3 times on your message")
    assert "agent exited with code 3" in lines[0]
    # The bridge carried on with a fresh agent for the next message.
    assert lines[1] == "echo: still there?"
    contents = [m["content"] for m in journal(tmp_path).messages()]
    assert contents.count("#crash boom") == 3


async def test_agent_hung_in_a_turn_is_restarted_after_turn_timeout(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#hang-once are you there\n", turn_timeout=2)
    assert lines == ["echo: #hang-once are you there"]
    assert "turn timeout after 2s" in err
    assert len(journal(tmp_path).starts()) == 2


async def test_agent_hung_while_idle_is_restarted_by_ping(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    async with Daemon(config, command="chat") as daemon:
        await daemon.send_stdin(b"#hang-after first\n")
        await daemon.wait_until(lambda: daemon.stdout_lines == ["echo: #hang-after first"],
                                what="first reply")
        # Idle and wedged: ping_interval + ping_timeout (1 s + 1 s) later it is replaced.
        await daemon.wait_for_log("killing agent pid=\\d+: no pong within 1s")
        await daemon.wait_for_log("agent ready pid=", timeout=20)
        await journal(tmp_path).wait_until(lambda j: len(j.starts()) == 2, what="restart")
        await daemon.send_stdin(b"second\n")
        await daemon.wait_until(lambda: len(daemon.stdout_lines) == 2, what="second reply")
        daemon.close_stdin()
        assert await daemon.wait() == 0
    assert daemon.stdout_lines == ["echo: #hang-after first", "echo: second"]


async def test_busy_agent_that_ignores_pings_is_not_killed(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#slow=3 patience\n", "--ignore-pings-while-busy")
    assert lines == ["echo: #slow=3 patience"]
    assert len(journal(tmp_path).starts()) == 1
    assert "killing agent" not in err


async def test_garbage_output_is_skipped(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#garbage x\nnext\n")
    assert lines == ["echo: #garbage x", "echo: next"]
    assert "not JSON, skipped" in err
    assert len(journal(tmp_path).starts()) == 1


async def test_two_responses_to_one_message_are_both_delivered(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#double a\nb\n")
    assert lines == ["echo: #double a", "second answer: #double a", "echo: b"]


async def test_unsolicited_later_response_reaches_the_chat(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    async with Daemon(config, command="chat") as daemon:
        await daemon.send_stdin(b"#later=0.3 a\n")
        # No turn is in flight when it comes: the session alone leads it to this chat.
        await daemon.wait_until(lambda: len(daemon.stdout_lines) == 2, what="later reply")
        daemon.close_stdin()
        assert await daemon.wait() == 0
    assert daemon.stdout_lines == ["echo: #later=0.3 a", "later: #later=0.3 a"]


async def test_stderr_noise_is_drained_into_the_log(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#stderr hi\n")
    assert lines == ["echo: #stderr hi"]
    # All 200 lines (> 64 KiB) were read: a blocked stderr pipe would have hung the agent.
    assert "agent stderr: 199 stderr noise" in err


async def test_agent_error_record_tells_the_user(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#error x\nthen this\n")
    assert lines == ["⚠️ The agent could not answer this: agent exploded", "echo: then this"]


async def test_progress_with_session_and_tools_does_not_disturb_replies(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#tool list files\n", "--progress-session")
    assert lines == ["echo: #tool list files"]


async def test_agent_that_never_starts_is_a_clear_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path, "--crash-on-start"))
    code, out, err = await run_cli("chat", "--config", str(config), stdin=b"hi\n")
    assert code == 6
    assert out == ""
    assert "picobridge: the agent cannot start: agent exited with code 4" in err


async def test_agent_without_ready_is_restarted_then_reported(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path, "--no-ready", ready_timeout=0.5))
    code, _, err = await run_cli("chat", "--config", str(config), stdin=b"hi\n")
    assert code == 6
    assert "no ready within 0.5s" in err
    # The message was kept for when the agent works again.
    good = write_config(tmp_path, base_config(tmp_path), "good.toml")
    code, out, _ = await run_cli("chat", "--config", str(good), stdin=b"")
    assert code == 0
    assert out == ""  # it was never submitted: chat only reads input once the agent is up
