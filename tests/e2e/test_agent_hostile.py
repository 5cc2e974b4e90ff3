"""Hostile agent output and agents that die badly, seen from `picobridge chat`: the user gets
the answer or a clear error, nothing is lost, and the worker never dies silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import AgentJournal, Daemon, base_config, run_cli, write_config
from tests.storage_faults import write_lock

WITHOUT_TEXT = "⚠️ The agent could not answer this: the agent sent an answer without text"


async def converse(tmp: Path, text: str, *flags: str, **agent: Any) -> tuple[list[str], str]:
    config = write_config(tmp, base_config(tmp, *flags, **agent))
    code, out, err = await run_cli("chat", "--config", str(config), stdin=text.encode(),
                                   timeout=90)
    assert code == 0, err[-3000:]
    return out.splitlines(), err


def journal(tmp: Path) -> AgentJournal:
    return AgentJournal(tmp / "agent")


async def test_deeply_nested_json_is_skipped_and_the_answer_still_comes(tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#nested=200000 deep\nnext\n")
    assert lines == ["echo: #nested=200000 deep", "echo: next"]
    assert "nested too deeply" in err and "Traceback" not in err
    assert len(journal(tmp_path).starts()) == 1  # the agent was never restarted for it


async def test_invalid_utf8_in_an_answer_is_shown_with_replacement_characters(
        tmp_path: Path) -> None:
    lines, _ = await converse(tmp_path, "#bad-utf8 hi\n")
    assert lines == ["caf\ufffd \ufffd ok: #bad-utf8 hi"]


async def test_an_answer_without_text_is_an_agent_error_not_none(tmp_path: Path) -> None:
    lines, _ = await converse(
        tmp_path, "#content-null a\n#content-object b\n#content-missing c\nfine\n")
    assert lines == [WITHOUT_TEXT, WITHOUT_TEXT, WITHOUT_TEXT, "echo: fine"]


async def test_an_answer_over_16_mib_is_reported_at_once_not_after_retries(
        tmp_path: Path) -> None:
    lines, err = await converse(tmp_path, "#huge=17000000 big\nsmall\n", turn_timeout=600)
    assert lines == ["⚠️ The agent could not answer this: the agent's answer was too large to "
                     "read (over 16 MiB)", "echo: small"]
    assert [m["content"] for m in journal(tmp_path).messages()] == ["#huge=17000000 big",
                                                                    "small"]
    assert "over 16777216 bytes skipped" in err


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def test_an_agent_whose_grandchild_holds_its_pipes_is_restarted_at_once(
        tmp_path: Path) -> None:
    # With a turn timeout far beyond the test's own, only noticing the exit itself answers.
    lines, err = await converse(tmp_path, "#orphan-exit hello\n", turn_timeout=600)
    assert lines == ["echo: #orphan-exit hello"]
    assert "agent exited with code 3" in err
    [orphan] = [e["orphan_pid"] for e in journal(tmp_path).entries() if "orphan_pid" in e]
    # It left the agent's session (setsid) but carried the marker: killed with its agent.
    assert not _alive(orphan)


async def test_an_agent_that_exits_while_the_database_is_locked_is_restarted(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    db = tmp_path / "state" / "picobridge.db"
    async with Daemon(config, "chat") as chat:
        await chat.send_stdin(b"#crash-after=1 locked out\n")
        await journal(tmp_path).wait_until(
            lambda j: any(m["content"].startswith("#crash-after") for m in j.messages()),
            what="the message reaching the agent")
        # Another process holds the write lock. It waits its turn (write_lock's own busy
        # timeout): the daemon may be committing at this moment, most of all under load.
        async with write_lock(db):
            await journal(tmp_path).wait_until(
                lambda j: any(e.get("event") == "exit" for e in j.entries()),
                what="the agent's crash")
            # Held beyond the daemon's busy timeout (5 s): its bookkeeping writes fail, the
            # lost turn's requeue and then the new dispatch's record.
            await chat.wait_for_log(r"reporting the lost agent failed", timeout=30)
            await chat.wait_for_log(r"agent down \(agent exited with code 3\)", timeout=30)
            await chat.wait_for_log(r"agent ready pid=\d+", timeout=30)
            await chat.wait_for_log(r"recording a dispatch failed \(OperationalError: "
                                    r"database is locked\)", timeout=30)
        await chat.wait_until(lambda: "echo: #crash-after=1 locked out" in chat.stdout_lines,
                              timeout=60, what="the answer after the lock")
        chat.close_stdin()
        assert await chat.wait(60) == 0
    assert len(journal(tmp_path).starts()) == 2
    assert chat.stdout_lines.count("echo: #crash-after=1 locked out") == 1
