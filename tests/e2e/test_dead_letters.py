"""`picobridge failed list|retry|drop` beside a running daemon: a message the agent could
not answer and a reply the platform refused for good, listed, retried without a restart, and
dropped; /metrics counts them."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from tests.e2e.telegram_support import (
    OTHER_USER,
    USER,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, free_port, run_cli


async def _failed(config: Path, *args: str) -> tuple[int, str]:
    code, out, err = await run_cli("failed", *args, "--config", str(config))
    assert "Traceback" not in err, err
    return code, out


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


async def test_failed_messages_and_replies_are_listed_retried_and_dropped(
        tmp_path: Path) -> None:
    port = free_port()
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake,
                                 sections={"http": {"listen": f"127.0.0.1:{port}"}})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "#error please answer")
            await reply_containing(fake, USER, "could not answer")
            fake.block_chat(OTHER_USER)
            fake.user_message(OTHER_USER, OTHER_USER, "hello there")
            await daemon.wait_for_log(r"failed permanently", timeout=30)

            code, out = await _failed(config, "list")
            assert code == 0, out
            lines = out.strip().splitlines()
            message = next(li for li in lines if li.startswith("m"))
            reply = next(li for li in lines if li.startswith("r"))
            assert f"\ttelegram:{USER}\t" in message and "#error please answer" in message
            assert f"\ttelegram:{OTHER_USER}\t" in reply and "echo: hello there" in reply
            assert "blocked" in reply
            m_id, r_id = message.split("\t")[0], reply.split("\t")[0]
            page = await _metrics_async(port)
            assert 'picobridge_dead_letters{kind="message"} 1.0' in page
            assert 'picobridge_dead_letters{kind="reply"} 1.0' in page

            # A reply is sent again once the chat takes it, without a restart.
            fake.unblock_chat(OTHER_USER)
            code, out = await _failed(config, "retry", r_id)
            assert code == 0 and out.startswith("1 to retry"), out
            await reply_containing(fake, OTHER_USER, "echo: hello there")
            # A message goes to the agent again (which fails it again here).
            journal = AgentJournal(tmp_path / "agent")
            code, out = await _failed(config, "retry", m_id)
            assert code == 0, out
            await journal.wait_until(
                lambda j: [m["content"] for m in j.messages()].count("#error please answer")
                == 2, what="the retried message reaching the agent")
            await fake.wait_for(lambda: len(fake.sent_messages(USER)) == 2,
                                "the second error reply")

            code, out = await _failed(config, "list")
            assert re.search(rf"^{m_id}\tmessage\t", out, re.M) and not re.search(
                rf"^{r_id}\t", out, re.M), out
            code, out = await _failed(config, "drop", m_id)
            assert code == 0 and out.strip() == "1 dropped"
            code, out = await _failed(config, "list")
            assert out.strip() == "nothing failed"
            code, out = await _failed(config, "retry", "x1")
            assert code == 2
        assert daemon.returncode == 0


async def _metrics_async(port: int) -> str:
    import asyncio

    return await asyncio.to_thread(_metrics, port)
