"""Busy modes (what a message does while its chat's turn runs) against the REAL pi, on Telegram:
a turn runs a slow bash tool (the fake LLM's "RUN <command>") and the person writes again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.media_support import PNG
from tests.e2e.prime_rpc_support import ensure_pi, pi_agent_settings, wait_for_processes
from tests.e2e.telegram_support import USER, replies, reply_containing, started, telegram_config
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon


@pytest.fixture(scope="session")
def pi() -> Path:
    return ensure_pi()


class Env:
    def __init__(self, tmp: Path, llm: FakeLLM, fake: FakeTelegram, daemon: Daemon) -> None:
        self.tmp, self.llm, self.fake, self.daemon = tmp, llm, fake, daemon

    @property
    def marker(self) -> str:
        return f"PI_CODING_AGENT_DIR={self.tmp / 'pi-agent'}"

    def texts(self) -> list[str]:
        return [m.text or "" for m in self.fake.sent_messages(USER)]

    async def say(self, text: str, then: str) -> None:
        self.fake.user_message(USER, USER, text)
        await reply_containing(self.fake, USER, then, timeout=60)

    async def tool_running(self, command: str) -> list[int]:
        found = await wait_for_processes(
            self.marker, lambda f: any(command in c and c != "pi" for c in f.values()),
            f"the bash tool's {command!r}", timeout=60)
        return [p for p, c in found.items() if command in c and c != "pi"]


@pytest_asyncio.fixture
async def env(tmp_path: Path, pi: Path) -> AsyncIterator[Env]:
    async with FakeLLM() as llm, FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, agent=pi_agent_settings(tmp_path, llm, pi))
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            yield Env(tmp_path, llm, fake, daemon)
        assert "Traceback" not in daemon.log


async def test_steer_goes_into_the_running_turn_and_gets_one_answer(env: Env) -> None:
    await env.say("/mode steer", "✓ Mode: steer")
    env.fake.user_message(USER, USER, "RUN sleep 3")
    await env.tool_running("sleep 3")
    await env.say("steered text", "↪️ Passed to the agent")
    await reply_containing(env.fake, USER, "you said: steered text", timeout=60)
    await env.say("What did I just say?", "You said: steered text")
    after_tool = [r for r in env.llm.requests if r["messages"][-1]["role"] != "user"
                  or any(m["role"] == "tool" for m in r["messages"])]
    # The request after the tool: ..., assistant(toolCall), tool, user("steered text").
    roles = [m["role"] for m in after_tool[0]["messages"]][-3:]
    assert roles == ["assistant", "tool", "user"]
    assert env.llm.user_messages(after_tool[0])[-1] == "steered text"
    answers = [t for t in env.texts() if t.startswith(("ran:", "you said:"))]
    assert answers == ["you said: steered text"]  # one answer for both, none twice


async def test_a_photo_steers_too_and_reaches_the_model_as_an_image(env: Env) -> None:
    # pi's steer takes images as its prompt does (the program, not the seed, says so).
    await env.say("/mode steer", "✓ Mode: steer")
    env.fake.user_message(USER, USER, "RUN sleep 3")
    await env.tool_running("sleep 3")
    env.fake.user_photo(USER, USER, PNG, caption="look at this")
    await reply_containing(env.fake, USER, "↪️ Passed to the agent", timeout=60)
    await reply_containing(env.fake, USER, "you said: look at this", timeout=60)
    after_tool = next(r for r in env.llm.requests
                      if any(m["role"] == "tool" for m in r["messages"]))
    steered = after_tool["messages"][-1]
    assert steered["role"] == "user"
    parts = steered["content"] if isinstance(steered["content"], list) else []
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[0]["text"] == "look at this"
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    answers = [t for t in env.texts() if t.startswith(("ran:", "you said:"))]
    assert answers == ["you said: look at this"]  # one answer for both, none twice


async def test_followup_gets_its_own_answer_after_the_first(env: Env) -> None:
    await env.say("/mode followup", "✓ Mode: followup")
    env.fake.user_message(USER, USER, "RUN echo first && sleep 2")
    await env.tool_running("sleep 2")
    await env.say("second question", "⏭ Queued")
    await reply_containing(env.fake, USER, "you said: second question", timeout=60)
    answers = [t for t in env.texts() if t.startswith(("ran:", "you said:"))]
    assert answers == ["ran: first", "you said: second question"]
    assert len(replies(env.fake, USER, "ran: first")) == 1


async def test_interrupt_stops_the_tool_and_answers_the_new_message(env: Env) -> None:
    await env.say("/mode interrupt", "✓ Mode: interrupt")
    env.fake.user_message(USER, USER, "RUN sleep 300")
    sleeping = await env.tool_running("sleep 300")
    await env.say("never mind", "⏹ Stopped the reply in progress")
    await reply_containing(env.fake, USER, "you said: never mind", timeout=60)
    await wait_for_processes(env.marker, lambda f: not set(sleeping) & set(f),
                             "the interrupted tool to be gone")
    last = env.llm.requests[-1]
    # pi kept the interrupted message and its aborted tool call; the bridge did not repeat it.
    assert env.llm.user_messages(last) == ["RUN sleep 300", "never mind"]
    assert "_(stopped)_" not in "\n".join(env.texts())
    answers = [t for t in env.texts() if t.startswith(("ran:", "you said:"))]
    assert answers == ["you said: never mind"]


async def test_a_daemon_killed_during_a_steered_turn_answers_everything_once(
        tmp_path: Path, pi: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, agent=pi_agent_settings(tmp_path, llm, pi))
        env = Env(tmp_path, llm, fake, Daemon(config))
        daemon = await env.daemon.start()
        try:
            await started(daemon, fake)
            await env.say("/mode steer", "✓ Mode: steer")
            fake.user_message(USER, USER, "RUN sleep 2")
            await env.tool_running("sleep 2")
            await env.say("steered text", "↪️ Passed to the agent")
        finally:
            await daemon.kill()  # SIGKILL: the turn, the steer and their answer are cut off
        asked = len(llm.requests)
        async with Daemon(config) as again:
            await started(again, fake)
            await reply_containing(fake, USER, "ran:", timeout=60)
            await env.say("ping", "you said: ping")
        assert "Traceback" not in again.log
    # Both messages went to the restarted pi as one turn, and got one answer.
    assert llm.user_messages(llm.requests[asked])[-1] == "RUN sleep 2\n\nsteered text"
    answers = [t for t in env.texts() if t.startswith(("ran:", "you said:"))]
    assert len(answers) == 2 and answers[0].startswith("ran:") and answers[1] == "you said: ping"
