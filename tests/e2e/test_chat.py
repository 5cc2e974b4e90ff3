"""`picobridge chat` end to end: the real CLI as a subprocess, the fake agent as its agent."""

from __future__ import annotations

from pathlib import Path

from tests.harness import AgentJournal, Daemon, base_config, run_cli, write_config


async def chat(config: Path, text: str, timeout: float = 60) -> tuple[int, str, str]:
    return await run_cli("chat", "--config", str(config), stdin=text.encode(), timeout=timeout)


async def test_replies_to_each_line_and_remembers(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    code, out, err = await chat(config, "hello\nWhat did I just say?\n")
    assert code == 0, err
    assert out.splitlines() == ["echo: hello", "You said: hello"]


async def test_later_run_continues_session_and_new_forgets(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    code, out, _ = await chat(config, "my name is Ada\n")
    assert (code, out) == (0, "echo: my name is Ada\n")

    code, out, _ = await chat(config, "What did I just say?\n")
    assert out == "You said: my name is Ada\n"

    code, out, _ = await chat(config, "/new\nWhat did I just say?\n")
    lines = out.splitlines()
    assert lines[0].startswith("Started a new conversation. Session: `console.local.")
    assert lines[1] == "You have not said anything yet."
    # The agent saw a different session id after /new.
    sessions = [m["session"] for m in AgentJournal(tmp_path / "agent").messages()]
    assert len(set(sessions)) == 2
    assert all(s.startswith("console.local.") for s in sessions)


async def test_status_and_help_are_answered_by_the_bridge(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    code, out, _ = await chat(config, "/status\n/help\n/unknowncmd hi\n")
    assert code == 0
    assert "Agent: ready" in out
    assert "Session: `console.local." in out
    assert "/new: start a fresh conversation" in out
    # Commands the bridge does not know go to the agent untouched.
    assert "echo: /unknowncmd hi" in out
    contents = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
    assert contents == ["/unknowncmd hi"]


async def test_unicode_line_separators_survive_both_ways(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    text = "a\u2028b\u2029c 😀 #unicode"
    code, out, _ = await chat(config, text + "\n")
    assert code == 0
    # The agent got the message whole (not cut at U+2028) ...
    assert [m["content"] for m in AgentJournal(tmp_path / "agent").messages()] == [text]
    # ... and its reply, which carries raw U+2028/U+2029, a CR and a CRLF ending, arrived whole.
    assert out == f"echo: {text} \u2028 \u2029 😀 \r mid\n"


async def test_five_mib_reply_arrives_whole(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    size = 5 * 1024 * 1024
    code, out, err = await chat(config, f"#huge={size}\n")
    assert code == 0, err[-2000:]
    reply = out.removesuffix("\n")
    assert len(reply) == size
    assert reply.startswith("HUGE:") and reply.endswith(":END")


async def test_sigkill_mid_turn_then_restart_answers(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    journal = AgentJournal(tmp_path / "agent")
    daemon = await Daemon(config, command="chat").start()
    await daemon.send_stdin(b"#slow-once=60 remember the milk\n")
    await journal.wait_until(lambda j: len(j.messages()) == 1, what="message reached agent")
    await daemon.kill()
    assert daemon.stdout_lines == []

    # A new run with nothing to say still owes the old message its answer.
    code, out, _ = await chat(config, "")
    assert code == 0
    assert out == "echo: #slow-once=60 remember the milk\n"
    assert [m["content"] for m in journal.messages()] == ["#slow-once=60 remember the milk"] * 2


async def test_chat_reads_a_file_on_stdin(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    script = tmp_path / "lines.txt"
    script.write_text("one\n\n   \ntwo\r\n", encoding="utf-8")
    proc_out = await run_cli("chat", "--config", str(config), stdin=script.read_bytes())
    assert proc_out[0] == 0
    # Blank lines are not messages; a CRLF ending is not part of the text.
    assert proc_out[1].splitlines() == ["echo: one", "echo: two"]
