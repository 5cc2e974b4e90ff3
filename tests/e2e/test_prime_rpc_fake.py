"""agent.protocol = "prime-rpc" end to end through `picobridge chat`, against the fake pi RPC
agent (tests/fakes/fake_prime_agent.py) and its faults: the user gets the answer or a clear
error for every message, nothing is lost, and the bridge never gives up."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.e2e.prime_rpc_support import (
    fake_config,
    journal,
    session_files,
    session_messages,
)
from tests.harness import Daemon, run_cli

ERROR = "⚠️ The agent could not answer this: "
FRESH = "⚠️ The agent could not open this conversation's history, so it starts afresh."


async def converse(tmp: Path, text: str, *flags: str, timeout: float = 90,
                   **agent: Any) -> tuple[list[str], str]:
    """`picobridge chat` with one message per line; its replies split on LF only (an answer
    may hold U+2028, which str.splitlines would split on)."""
    config = fake_config(tmp, *flags, **agent)
    code, out, err = await run_cli("chat", "--config", str(config), stdin=text.encode(),
                                   timeout=timeout)
    assert code == 0, err[-3000:]
    return out.split("\n")[:-1], err


async def test_turns_keep_the_chat_history_in_its_session_file(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "hello\nWhat did I just say?\n/new\n"
                                        "What did I just say?\n")
    assert lines[:2] == ["you said: hello", "You said: hello"]
    assert lines[2].startswith("Started a new conversation. Session: `console.local.")
    assert lines[3] == "You said nothing yet."
    # One file per picobridge session, named after it, written by the agent at the path given.
    first, second = sorted(session_files(tmp_path), key=lambda p: p.stat().st_mtime)
    assert session_messages(first) == [("user", "hello"), ("assistant", "you said: hello"),
                                       ("user", "What did I just say?"),
                                       ("assistant", "You said: hello")]
    assert second.name == lines[2].split("`")[1] + ".jsonl"
    switched = [r["sessionPath"] for r in journal(tmp_path).requests("switch_session")]
    assert switched == [str(first), str(second)]  # once per session, not per turn

    # A new agent process, a new `chat`: the current session's file is loaded again.
    lines, _ = await converse(tmp_path, "What did I just say?\n")
    assert lines == ["You said: What did I just say?"]
    assert len(journal(tmp_path).starts()) == 2


async def test_a_tool_turn_is_answered_with_the_tools_result(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "RUN echo hi-there\n")
    assert lines == ["ran: hi-there"]


async def test_an_agent_crash_mid_turn_is_retried_and_answered(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "hello\n#crash-once again\nWhat did I just say?\n")
    assert lines == ["you said: hello", "you said: #crash-once again",
                     "You said: #crash-once again"]
    assert "agent exited with code 3" in err
    assert len(journal(tmp_path).starts()) == 2
    # The restarted agent was switched to the chat's file before the message was sent again.
    assert journal(tmp_path).prompts() == ["hello", "#crash-once again", "#crash-once again",
                                           "What did I just say?"]
    assert len(journal(tmp_path).requests("switch_session")) == 2


async def test_a_message_that_always_crashes_fails_after_three_attempts(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#crash boom\nstill there?\n")
    assert lines[0].startswith("⚠️ Sorry, the agent failed 3 times on your message")
    assert lines[1:] == ["you said: still there?"]
    assert journal(tmp_path).prompts().count("#crash boom") == 3


async def test_an_agent_hung_mid_turn_is_restarted_by_its_health_probe(tmp_path: Path) -> None:
    # get_state is answered mid-turn by a healthy pi, so a hung one is caught by the probe
    # (ping_interval + ping_timeout), long before the turn timeout.
    lines, err = await converse(tmp_path, "#hang-once are you there\n", turn_timeout=120)
    assert lines == ["you said: #hang-once are you there"]
    assert "no pong within 1s" in err
    assert "turn timeout" not in err
    assert len(journal(tmp_path).starts()) == 2


async def test_an_agent_that_stops_answering_while_idle_is_replaced(tmp_path: Path) -> None:
    config = fake_config(tmp_path)
    async with Daemon(config, command="chat") as daemon:
        await daemon.send_stdin(b"#mute-after first\n")
        await daemon.wait_until(lambda: daemon.stdout_lines == ["you said: #mute-after first"],
                                what="first reply")
        await daemon.wait_for_log(r"killing agent pid=\d+: no pong within 1s")
        await daemon.wait_for_log(r"agent ready pid=", timeout=20)
        await journal(tmp_path).wait_until(lambda j: len(j.starts()) == 2, what="restart")
        await daemon.send_stdin(b"What did I just say?\n")
        await daemon.wait_until(lambda: len(daemon.stdout_lines) == 2, what="second reply")
        daemon.close_stdin()
        assert await daemon.wait() == 0
    assert daemon.stdout_lines[1] == "You said: #mute-after first"


async def test_an_agent_that_never_answers_get_state_is_a_clear_error(tmp_path: Path) -> None:
    config = fake_config(tmp_path, "--no-state", ready_timeout=0.5)
    code, out, err = await run_cli("chat", "--config", str(config), stdin=b"hi\n")
    assert code == 6
    assert out == ""
    assert "picobridge: the agent cannot start: no ready within 0.5s" in err


async def test_get_state_refused_still_shows_a_live_agent(tmp_path: Path) -> None:
    # An answer is an answer: success false to get_state proves the agent reads and writes.
    lines, err = await converse(tmp_path, "hello\nagain\n", "--refuse-state", timeout=40)
    assert lines == ["you said: hello", "you said: again"]
    assert "killing agent" not in err
    assert len(journal(tmp_path).starts()) == 1


async def test_a_refused_prompt_is_a_clear_error(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#refuse this\nnext\n")
    assert lines == [ERROR + "The model refused this prompt (#refuse)", "you said: next"]
    assert len(journal(tmp_path).starts()) == 1


async def test_responses_without_an_id_answer_no_request(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#no-id hello\nnext\n")
    assert lines == ["you said: #no-id hello", "you said: next"]
    assert "agent response to no request of ours (parse)" in err
    assert "agent response to no request of ours (bogus)" in err


async def test_health_probes_overtaking_slow_responses_are_matched_by_id(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "one\ntwo\n", "--ack-delay=0.5", ping_interval=0.1)
    assert lines == ["you said: one", "you said: two"]
    overtook = [e for e in journal(tmp_path).entries() if e.get("event") == "overtook"]
    assert overtook, "no get_state was answered while a switch or prompt was held back"
    assert "killing agent" not in err
    assert "no request of ours" not in err


async def test_dialogs_are_asked_on_the_console_and_answered_by_the_next_line(
        tmp_path: Path) -> None:
    lines, _ = await converse(
        tmp_path, "#ui=confirm a\nyes\n#ui=select b\n2\n#ui=input c\nsome text\n"
                  "#ui=editor d\ncancel\n#ui=notify e\n", "--startup-ui")
    answers = [line for line in lines if line.startswith("you said: ")]
    assert answers == ['you said: #ui=confirm a [confirm answered {"confirmed": true}]',
                       'you said: #ui=select b [select answered {"value": "Block"}]',
                       'you said: #ui=input c [input answered {"value": "some text"}]',
                       'you said: #ui=editor d [editor answered {"cancelled": true}]',
                       "you said: #ui=notify e [notify sent]"]
    assert [line for line in lines if line.startswith("✓ Answer sent")] == [
        "✓ Answer sent: yes", "✓ Answer sent: Block", "✓ Answer sent: some text",
        "✓ Answer sent: cancelled"]
    sent = journal(tmp_path).requests("extension_ui_response")
    # Status lines, widgets, titles and notifications need no answer and get none.
    assert len(sent) == 4


async def test_a_run_retried_by_the_agent_counts_only_its_last_end(tmp_path: Path) -> None:
    # agent_end (error), auto_retry_start, the retried run, auto_retry_end, agent_end.
    lines, err = await converse(tmp_path, "#retry hello\nnext\n")
    assert lines == ["you said: #retry hello", "you said: next"]
    assert "agent error" not in err


async def test_a_run_that_fails_after_the_agents_retries_is_an_error(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#retry-fail hello\nnext\n")
    assert lines == [ERROR + "500 The server had an error ", "you said: next"]


async def test_an_error_end_without_a_retry_is_an_error(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#error hello\nnext\n")
    assert lines == [ERROR + "500 The server had an error ", "you said: next"]


async def test_an_error_end_then_a_crash_does_not_fail_the_retried_turn(tmp_path: Path) -> None:
    # The first process ends the run in an error and dies before it could retry; the message
    # goes to the next process, which takes a while: the first one's error must not count.
    lines, err = await converse(tmp_path, "#error-crash-once #slow=3 hello\n")
    assert lines == ["Working on it… you said: #error-crash-once #slow=3 hello"]
    assert "agent exited with code 3" in err
    assert len(journal(tmp_path).starts()) == 2


async def test_unicode_line_separators_stay_inside_the_answer(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#unicode hi\nnext\n")
    assert lines == ["you said: #unicode hi \u2028 \u2029 \U0001f600 mid", "you said: next"]


async def test_a_five_mib_answer_arrives_whole(tmp_path: Path) -> None:
    size = 5 * 1024 * 1024
    lines, _ = await converse(tmp_path, f"#huge={size} big\nnext\n")
    assert len(lines) == 2
    assert len(lines[0]) == size and lines[0].startswith("HUGE:x") and lines[0].endswith(":END")
    assert lines[1] == "you said: next"


async def test_progress_events_do_not_disturb_the_answer(tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#thinking #compact hi\nnext\n")
    assert lines == ["you said: #thinking #compact hi", "you said: next"]


async def test_the_turn_timeout_aborts_the_turn_and_keeps_the_agent(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#stall think forever\nnext\n", turn_timeout=2)
    # What the agent had said so far, marked as stopped; the next message is served.
    assert "\n".join(lines) == "Working on it… \n\n_(stopped)_\nyou said: next"
    assert "turn timeout after 2s" in err
    assert len(journal(tmp_path).requests("abort")) == 1
    assert len(journal(tmp_path).starts()) == 1


async def test_a_turn_that_ignores_the_abort_restarts_the_agent(tmp_path: Path) -> None:
    # The abort is never answered and the turn goes on: after agent.abort_grace the process
    # is restarted and the message sent again.
    lines, err = await converse(tmp_path, "#deaf-abort-once hello\n", turn_timeout=2,
                                abort_grace=1)
    assert lines == ["you said: #deaf-abort-once hello"]
    assert "the turn did not end after an abort" in err
    assert len(journal(tmp_path).starts()) == 2


async def test_a_session_file_the_agent_refuses_is_moved_aside(tmp_path: Path) -> None:
    old_workdir = tmp_path / "old-workdir"
    lines, _ = await converse(tmp_path, "hello\n", workdir=str(old_workdir))
    assert lines == ["you said: hello"]
    (path,) = session_files(tmp_path)
    # The agent recorded its working directory in the file; it is gone now (moved).
    shutil.rmtree(old_workdir)
    lines, err = await converse(tmp_path, "What did I just say?\nagain\n",
                                workdir=str(tmp_path / "new-workdir"))
    assert lines == [FRESH, "", "You said nothing yet.", "you said: again"]
    assert "Stored session working directory does not exist" in err
    (aside,) = path.parent.glob(f"{path.name}.refused-*")
    assert session_messages(aside) == [("user", "hello"), ("assistant", "you said: hello")]
    assert session_messages(path)[:2] == [("user", "What did I just say?"),
                                          ("assistant", "You said nothing yet.")]
    # The fresh file serves the chat from now on.
    lines, _ = await converse(tmp_path, "What did I just say?\n",
                              workdir=str(tmp_path / "new-workdir"))
    assert lines == ["You said: again"]


async def test_a_switch_the_agent_declines_runs_nothing_in_another_session(
        tmp_path: Path) -> None:
    # An extension asks before every switch; nobody can confirm, so the switch is cancelled.
    # The turn must not run in whatever session the agent has open (another chat's).
    lines, _ = await converse(tmp_path, "hello\n", "--confirm-switch")
    # Asked on the console; the input has ended, so nobody confirms and the switch is off.
    assert lines[0] == "❓ **Switch session?**"
    assert lines[-1].startswith(ERROR) and "declined" in lines[-1]
    assert journal(tmp_path).prompts() == []
