"""The agent's controls in chat (/model, /think, /compact, /sessions, /resume) against the REAL
pi coding agent, offline, with two models in its models.json (tests/e2e/prime_rpc_support.py)
and the fake LLM recording which model each request names."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from tests.e2e.prime_rpc_support import TWO_MODELS, ensure_pi, pi_agent_settings, pi_config
from tests.e2e.slack_support import reply_to, slack_config
from tests.e2e.telegram_support import OTHER_USER, USER, reply_containing, started, telegram_config
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.harness import Daemon, run_cli

BETA = "fakellm/fake-beta"


@pytest.fixture(scope="session")
def pi() -> Path:
    return ensure_pi()


async def chat(config: Path, text: str) -> list[str]:
    code, out, err = await run_cli("chat", "--config", str(config), stdin=text.encode(),
                                   timeout=120)
    assert code == 0, err[-3000:]
    return out.split("\n")[:-1]


def labels(message: SentMessage) -> list[str]:
    return [button["text"] for row in message.buttons for button in row]


async def answered(fake: FakeTelegram, llm: FakeLLM, user: int, text: str) -> dict[str, object]:
    """Send `text`, wait for its answer; the LLM request that answered it."""
    asked = len(llm.requests)
    fake.user_message(user, user, text)
    await reply_containing(fake, user, f"you said: {text}", timeout=60)
    return llm.requests[asked]


async def test_model_buttons_on_telegram_choose_the_model_for_this_chat_only_and_for_good(
        tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram() as fake:
        agent = pi_agent_settings(tmp_path, llm, pi, pi_models=TWO_MODELS)
        config = telegram_config(tmp_path, fake, agent=agent)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "/model")  # while pi starts: answered once it is up
            menu = await reply_containing(fake, USER, "Model: choose one", timeout=60)
            assert labels(menu) == ["fakellm/fake-model", BETA, "Cancel"]
            assert "Fake Model (fakellm/fake-model) ✓" in (menu.text or "")
            fake.press_button(USER, menu.message_id, USER, text=BETA)
            await reply_containing(fake, USER, "✓ Model: Fake Beta", timeout=30)
            assert (await answered(fake, llm, USER, "one"))["model"] == "fake-beta"
            # Another chat's turn on the same pi (one worker) in between: its own default.
            assert (await answered(fake, llm, OTHER_USER, "other"))["model"] == "fake-model"
            assert (await answered(fake, llm, USER, "two"))["model"] == "fake-beta"
            # The menu the bot registered holds the agent's commands.
            menu_names = [c["command"] for c in next(iter(fake.commands.values()))]
            assert {"model", "think", "compact", "export", "mode", "sessions"} <= set(menu_names)
        async with Daemon(config) as daemon:  # a new daemon, a new pi
            await started(daemon, fake)
            assert (await answered(fake, llm, USER, "three"))["model"] == "fake-beta"
            assert (await answered(fake, llm, OTHER_USER, "more"))["model"] == "fake-model"
            fake.user_message(USER, USER, "/status")
            status = await reply_containing(fake, USER, "Session:", timeout=30)
    assert f"Model: {BETA}; thinking: the model default" in (status.text or "")


async def test_model_buttons_on_slack_choose_the_model(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm, FakeSlack() as fake:
        agent = pi_agent_settings(tmp_path, llm, pi, pi_models=TWO_MODELS)
        async with Daemon(slack_config(tmp_path, fake, agent=agent)) as daemon:
            await fake.wait_for_socket()
            await fake.send_slash_command("/picobridge", "model")  # answered in the DM
            channel = fake.dm_channel(DEFAULT_USER)
            menu = await reply_to(fake, channel, "choose one", timeout=60)
            labels = [e["text"]["text"] for b in menu.blocks or () if b["type"] == "actions"
                      for e in b["elements"]]
            assert labels == ["fakellm/fake-model", BETA, "Cancel"]
            await fake.click(menu, BETA)
            await reply_to(fake, channel, "✓ Model: Fake Beta", timeout=30)
            asked = len(llm.requests)
            hello = fake.dm_message("hello", channel=channel)
            await fake.send_event(hello)
            await reply_to(fake, channel, "you said: hello", timeout=60)
            assert llm.requests[asked]["model"] == "fake-beta"
        assert "Traceback" not in daemon.log


async def test_think_reaches_pi_and_a_refused_choice_says_why(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm:
        config = pi_config(tmp_path, llm, pi, pi_models=TWO_MODELS)
        lines = await chat(config, "/think\n/model 2\n/think\n/think extreme\n/think high\n"
                                   "hello\n/model nope\n/status\n")
        thought = [r.get("reasoning_effort") for r in llm.requests]
    assert lines[0] == "The model Fake Model has no thinking levels to choose from."
    assert lines[1].startswith("✓ Model: Fake Beta")
    assert lines[2].startswith("**Thinking** of Fake Beta")
    assert lines[3] == ("⚠️ The model takes no thinking level `extreme`. Levels: off, minimal, "
                        "low, medium, high.")
    assert lines[4] == "✓ Thinking: high, from your next message on."
    assert lines[5] == "you said: hello"
    assert lines[6].startswith("⚠️ No model `nope` is offered here.")
    assert f"Model: {BETA}; thinking: high" in lines
    assert thought == ["high"]


async def test_agent_models_restricts_what_is_offered(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm:
        config = pi_config(tmp_path, llm, pi, pi_models=TWO_MODELS, models=["fake-model"])
        lines = await chat(config, "/model\n/model fake-beta\nhello\n")
        used = [r["model"] for r in llm.requests]
    assert "Fake Beta" not in "\n".join(lines[:3])
    assert any(line.startswith("⚠️ No model `fake-beta` is offered here.") for line in lines)
    assert used == ["fake-model"]


async def test_compact_summarises_with_the_sessions_model(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm:
        config = pi_config(tmp_path, llm, pi, pi_models=TWO_MODELS)
        lines = await chat(config, "/model fake-beta\nhello\n/compact keep names\n"
                                   "What did I just say?\n")
        summary_request = llm.requests[1]
    assert lines[2] == "✓ Compacted. The agent's memory of it held 15 tokens before."
    assert summary_request["model"] == "fake-beta"
    system = summary_request["messages"][0]["content"]
    assert "summarization" in str(system)
    assert "keep names" in str(summary_request["messages"])
    assert lines[3] == "You said: hello"


async def test_sessions_and_resume_bring_an_earlier_conversation_back(tmp_path: Path,
                                                                     pi: Path) -> None:
    async with FakeLLM() as llm:
        config = pi_config(tmp_path, llm, pi)
        await chat(config, "first words here\n/new\nsomething else\n")
        lines = await chat(config, "/sessions\n/resume 2\nWhat did I just say?\n/sessions\n")
    listing = lines[:3]
    assert listing[0].startswith("**Your conversations**")
    assert "“something else”, 1 message ← current" in listing[1]
    assert "“first words here”, 1 message" in listing[2]
    assert lines[3].startswith("✓ Back to the conversation of")
    assert lines[4] == "You said: first words here"
    assert "“first words here”, 2 messages ← current" in lines[-1]


def session_data(html: bytes) -> dict[str, object]:
    """The conversation inside pi's HTML export (base64 JSON in a script element)."""
    match = re.search(rb'<script id="session-data" type="application/json">([^<]*)</script>',
                      html)
    assert match is not None, "no session data in the export"
    return dict(json.loads(base64.b64decode(match[1])))


async def test_export_sends_the_conversation_as_an_html_file(tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, agent=pi_agent_settings(tmp_path, llm, pi))
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            await answered(fake, llm, USER, "remember the blue door")
            fake.user_message(USER, USER, "/export")
            await fake.wait_for(lambda: any(m.document for m in fake.sent_messages(USER)),
                                "the export as a document", 60)
        assert "Traceback" not in daemon.log
    (sent,) = [m for m in fake.sent_messages(USER) if m.document]
    assert sent.document is not None
    assert sent.document.file_name is not None and sent.document.file_name.endswith(".html")
    assert "remember the blue door" in json.dumps(session_data(sent.document.data))
    # The scratch copy pi wrote is gone; the bridge's copy is what was sent.
    assert list((tmp_path / "state" / "exports").glob("*.html")) == []
