"""Files from the REAL pi coding agent (prime-rpc, offline, its model the fake LLM): a file its
bash tool wrote, named in a `MEDIA:` line of the answer, arrives on Telegram; an image a tool
reads goes to the model, not to the chat (pi's final assistant message carries text only:
what was observed is in tests/peers/pi-media.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.media_support import PNG, put
from tests.e2e.prime_rpc_support import ensure_pi, pi_agent_settings, pi_config
from tests.e2e.telegram_support import USER, started, telegram_config
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, run_cli


@pytest.fixture(scope="session")
def pi() -> Path:
    return ensure_pi()


async def test_a_file_pis_bash_tool_wrote_arrives_through_a_media_line(
        tmp_path: Path, pi: Path) -> None:
    source = tmp_path / "made-elsewhere.png"
    source.write_bytes(PNG)
    async with FakeLLM() as llm, FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, agent=pi_agent_settings(tmp_path, llm, pi))
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER,
                              f"RUN cp {source} chart.png && echo copied && echo MEDIA: chart.png")
            photo = await fake.wait_for(lambda: next(
                (m for m in fake.sent_messages(USER) if m.kind == "photo"), None), "the photo",
                timeout=60)
    assert photo.file is not None and photo.file.data == PNG
    assert photo.caption == "ran: copied"  # the MEDIA: line left the text
    assert (tmp_path / "state" / "workspace" / "chart.png").read_bytes() == PNG


async def test_an_image_a_tool_reads_goes_to_the_model_not_to_the_chat(
        tmp_path: Path, pi: Path) -> None:
    put(tmp_path, "seen.png", PNG)
    async with FakeLLM() as llm:
        code, out, err = await run_cli("chat", "--config", str(pi_config(tmp_path, llm, pi)),
                                       stdin=b"READ seen.png\n", timeout=120)
    assert code == 0, err[-3000:]
    # pi gives the model the image as a user message after the tool's result; its answer is
    # text, and nothing of it is a file for the chat.
    assert out.split("\n")[:-1] == ["read: Read image file [image/png] ['text', 'image_url']"]
