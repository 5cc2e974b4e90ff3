"""prime-rpc against the REAL pi coding agent (@mariozechner/pi-coding-agent, pinned in
tests/peers/pi and installed with `npm ci` on first use), offline, its model being the fake LLM
(tests/fakes/fake_llm.py): what a user of `picobridge chat` and of a Telegram bot sees."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.e2e.prime_rpc_support import (
    ensure_pi,
    pi_agent_settings,
    pi_config,
    processes_with,
    session_files,
    session_messages,
    wait_for_processes,
)
from tests.e2e.telegram_support import OTHER_USER, USER, reply_containing, started, telegram_config
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, run_cli

FRESH = "⚠️ The agent could not open this conversation's history, so it starts afresh."


@pytest.fixture(scope="session")
def pi() -> Path:
    return ensure_pi()


async def chat(config: Path, text: str) -> list[str]:
    code, out, err = await run_cli("chat", "--config", str(config), stdin=text.encode(),
                                   timeout=120)
    assert code == 0, err[-3000:]
    return out.split("\n")[:-1]


def agent_marker(tmp: Path) -> str:
    """What pi and everything it starts carry in their environment, unique to the test."""
    return f"PI_CODING_AGENT_DIR={tmp / 'pi-agent'}"


def pi_pid(tmp: Path) -> int:
    (pid,) = [p for p, cmd in processes_with(agent_marker(tmp)).items() if cmd == "pi"]
    return pid


async def test_the_chat_remembers_across_runs_until_new(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm:
        config = pi_config(tmp_path, llm, pi)
        assert await chat(config, "hello\nWhat did I just say?\n") == [
            "you said: hello", "You said: hello"]
        # A new picobridge, a new pi: the session file brings the conversation back.
        assert await chat(config, "What did I just say?\n") == [
            "You said: What did I just say?"]
        assert llm.user_messages(llm.requests[-1]) == [
            "hello", "What did I just say?", "What did I just say?"]
        lines = await chat(config, "/new\nWhat did I just say?\n")
        assert lines[0].startswith("Started a new conversation.")
        assert lines[1:] == ["You said nothing yet."]
    first, second = sorted(session_files(tmp_path), key=lambda p: p.stat().st_mtime)
    assert [m for m in session_messages(first) if m[0] == "user"] == [
        ("user", "hello"), ("user", "What did I just say?"), ("user", "What did I just say?")]
    assert session_messages(second) == [("user", "What did I just say?"),
                                        ("assistant", "You said nothing yet.")]


async def test_a_tool_call_runs_and_its_result_shapes_the_answer(tmp_path: Path,
                                                                 pi: Path) -> None:
    async with FakeLLM() as llm:
        lines = await chat(pi_config(tmp_path, llm, pi), "RUN echo hi-there\n")
        tool_results = [m for r in llm.requests for m in r["messages"] if m["role"] == "tool"]
    assert lines == ["ran: hi-there"]
    assert [m["content"] for m in tool_results] == ["hi-there\n"]


async def test_two_telegram_chats_keep_separate_histories(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, agent=pi_agent_settings(tmp_path, llm, pi))
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "alpha")
            await reply_containing(fake, USER, "you said: alpha", timeout=60)
            fake.user_message(OTHER_USER, OTHER_USER, "beta")
            await reply_containing(fake, OTHER_USER, "you said: beta", timeout=60)
            fake.user_message(USER, USER, "What did I just say?")
            await reply_containing(fake, USER, "You said: alpha", timeout=60)
            fake.user_message(OTHER_USER, OTHER_USER, "What did I just say?")
            await reply_containing(fake, OTHER_USER, "You said: beta", timeout=60)
        assert daemon.returncode == 0
    histories = [llm.user_messages(r) for r in llm.requests[-2:]]
    assert histories == [["alpha", "What did I just say?"], ["beta", "What did I just say?"]]
    assert len(session_files(tmp_path)) == 2


async def test_pi_killed_mid_turn_answers_after_the_restart(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm:
        config = pi_config(tmp_path, llm, pi)
        async with Daemon(config, command="chat") as daemon:
            await daemon.send_stdin(b"hello\n")
            await daemon.wait_until(lambda: daemon.stdout_lines == ["you said: hello"],
                                    timeout=60, what="first reply")
            llm.stall_next()  # the model is thinking: the turn is half way
            asked = len(llm.requests)
            await daemon.send_stdin(b"second\n")
            await llm.wait_for(lambda: len(llm.requests) > asked, "the stalled request", 30)
            os.kill(pi_pid(tmp_path), signal.SIGKILL)
            await daemon.wait_until(lambda: len(daemon.stdout_lines) == 2, timeout=60,
                                    what="the answer after the restart")
            await daemon.send_stdin(b"What did I just say?\n")
            await daemon.wait_until(lambda: len(daemon.stdout_lines) == 3, timeout=60,
                                    what="the recall")
            daemon.close_stdin()
            assert await daemon.wait(60) == 0
    assert daemon.stdout_lines == ["you said: hello", "you said: second", "You said: second"]
    assert "agent exited with code -9" in daemon.log
    # The restarted pi had the chat's history, not just the message sent again.
    retried = llm.user_messages(llm.requests[asked + 1])
    assert retried[0] == "hello" and retried[-1] == "second"


async def test_three_model_errors_then_success_is_just_the_answer(tmp_path: Path,
                                                                   pi: Path) -> None:
    async with FakeLLM() as llm:
        llm.fail_next(times=3, status=500)
        lines = await chat(pi_config(tmp_path, llm, pi), "hello\n")
    assert lines == ["you said: hello"]
    # pi's SDK retried twice by itself, then pi's own retry asked again.
    assert len(llm.requests) == 4


async def test_a_model_that_keeps_failing_is_a_clear_error(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm:
        llm.fail_next(times=None, status=500)  # until cleared
        config = pi_config(tmp_path, llm, pi, max_retries=1)
        async with Daemon(config, command="chat") as daemon:
            await daemon.send_stdin(b"hello\n")
            await daemon.wait_until(lambda: len(daemon.stdout_lines) == 1, timeout=60,
                                    what="the error")
            llm.clear_faults()
            await daemon.send_stdin(b"next\n")
            await daemon.wait_until(lambda: len(daemon.stdout_lines) == 2, timeout=60,
                                    what="the next answer")
            daemon.close_stdin()
            assert await daemon.wait(60) == 0
    error, answer = daemon.stdout_lines
    assert error.startswith("⚠️ The agent could not answer this: 500")
    assert answer == "you said: next"


async def test_a_turn_timeout_while_pi_waits_to_retry_stops_the_turn(tmp_path: Path,
                                                                      pi: Path) -> None:
    async with FakeLLM() as llm:
        llm.fail_next(times=None, status=500)
        # pi's SDK tries three times, pi says it will try again in 20 s; the turn times out
        # meanwhile and is aborted: pi cancels the retry ("Retry cancelled").
        config = pi_config(tmp_path, llm, pi, retry_delay_ms=20000, turn_timeout=4)
        lines = await chat(config, "hello\n")
    assert lines == ["_(stopped)_"]
    assert len(llm.requests) == 3


async def test_a_session_file_pi_refuses_starts_the_chat_afresh(tmp_path: Path,
                                                                pi: Path) -> None:
    async with FakeLLM() as llm:
        old = tmp_path / "old-workdir"
        assert await chat(pi_config(tmp_path, llm, pi, workdir=str(old)), "hello\n") == [
            "you said: hello"]
        shutil.rmtree(old)  # pi recorded it in the session file
        config = pi_config(tmp_path, llm, pi, workdir=str(tmp_path / "new-workdir"))
        lines = await chat(config, "What did I just say?\nagain\n")
        assert lines == [FRESH, "", "You said nothing yet.", "you said: again"]
        assert await chat(config, "What did I just say?\n") == ["You said: again"]
    (path,) = session_files(tmp_path)
    (aside,) = path.parent.glob(f"{path.name}.refused-*")
    assert [m for m in session_messages(aside) if m[0] == "user"] == [("user", "hello")]


async def test_no_pi_or_tool_process_outlives_picobridge(tmp_path: Path, pi: Path) -> None:
    marker = agent_marker(tmp_path)

    def sleeping(found: dict[int, str]) -> list[int]:
        return [p for p, cmd in found.items() if "sleep 300" in cmd and cmd != "pi"]

    async with FakeLLM() as llm:
        config = pi_config(tmp_path, llm, pi, shutdown_timeout=2)
        daemon = await Daemon(config, command="chat").start()
        try:
            await daemon.send_stdin(b"RUN sleep 300\n")
            found = await wait_for_processes(marker, lambda f: bool(sleeping(f)),
                                             "the bash tool's sleep", timeout=60)
            first = sleeping(found)
            # pi starts tools in a session of their own: killing pi alone would orphan them.
            os.kill(pi_pid(tmp_path), signal.SIGKILL)
            await wait_for_processes(marker, lambda f: not set(first) & set(f),
                                     "the orphaned sleep to be killed by picobridge")
            assert daemon.returncode is None
            # The message goes to the restarted pi, which runs the tool again; then SIGTERM.
            await wait_for_processes(marker, lambda f: bool(sleeping(f)), "the second sleep",
                                     timeout=60)
            assert await daemon.stop(60) == 0
        finally:
            if daemon.returncode is None:
                await daemon.kill()
    assert processes_with(marker) == {}
