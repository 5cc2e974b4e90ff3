"""The agent's questions on Discord, end to end: `picobridge run` with a prime-rpc agent that
asks (tests/e2e/dialog_agent.py). A confirm comes with buttons, a choice with a select menu;
clicks are acknowledged within Discord's 3 s and reach the agent, then the question shows the
answer without components; a stranger's click changes nothing and they are told, privately;
a question answered by typing loses its components too.

One daemon serves the module; every test talks as its own people, in their own DMs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.discord_support import add_people, assert_no_token, discord_config, online
from tests.fakes.discord import DEFAULT_USER, OTHER_USER, STRANGER, FakeDiscord, SentMessage
from tests.harness import Daemon

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("discord_buttons")]

AGENT = Path(__file__).with_name("dialog_agent.py")
AGENT_SETTINGS = {"protocol": "prime-rpc", "command": [sys.executable, str(AGENT)],
                  "pool_size": 2, "ping_interval": 2, "ping_timeout": 5}
NOT_ALLOWED = "Sorry, only people allowed to talk to the agent can answer its questions."
TYPIST = "400000000000000103"


@dataclass
class Env:
    fake: FakeDiscord
    daemon: Daemon


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("discord-buttons")
    async with FakeDiscord() as fake:
        add_people(fake, {TYPIST: "tess"})
        config = discord_config(tmp, fake, agent=AGENT_SETTINGS,
                                allowed_users=[DEFAULT_USER, OTHER_USER, TYPIST])
        daemon = Daemon(config)
        async with daemon:
            await online(daemon, fake)
            yield Env(fake, daemon)
        assert_no_token(daemon, fake)
        assert "Traceback" not in daemon.log


def got(answer: dict[str, Any]) -> str:
    return "got: " + json.dumps(answer, sort_keys=True)


def custom_id(message: SentMessage, label: str) -> str:
    return next(str(c["custom_id"]) for c in message.buttons if c.get("label") == label)


async def test_buttons_and_menus_answer_the_agents_questions(env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(DEFAULT_USER).id
    fake.dm("please confirm the deploy")
    question = await fake.wait_for_reply(dm, "Deploy now?")
    assert [c.get("label") for c in question.buttons] == ["Yes", "No", "Cancel"]
    original = question.content

    # A stranger cannot answer (in a DM they cannot even see, but a click can be
    # forged): told privately, the question stays open.
    forged = fake.click(question, custom_id(question, "Yes"), STRANGER)
    await fake.wait_for(lambda: any(f.content == NOT_ALLOWED and f.ephemeral
                                    and f.user_id == STRANGER for f in fake.followups),
                        "the stranger told")
    assert question.buttons and not forged.late

    click = fake.click(question, custom_id(question, "Yes"))
    await fake.wait_for_reply(dm, got({"confirmed": True}))
    await fake.wait_for(lambda: not question.components, "the buttons gone")
    assert question.content == f"{original}\n\n✓ Answer: yes"
    assert click.callbacks == [{"type": 6}] and not click.late

    # A choice: a select menu, its picked option answers.
    other = fake.dm_channel(OTHER_USER).id
    fake.dm("select a colour", OTHER_USER)
    menu = await fake.wait_for_reply(other, "Which colour?")
    (select,) = [c for c in menu.buttons if c["type"] == 3]
    assert [o["label"] for o in select["options"]] == ["red", "green", "blue"]
    green = select["options"][1]["value"]
    fake.click(menu, select["custom_id"], OTHER_USER, values=[green])
    await fake.wait_for_reply(other, got({"value": "green"}))
    await fake.wait_for(lambda: not menu.components, "the menu gone")
    assert menu.content.endswith("✓ Answer: green")


async def test_a_question_answered_by_typing_loses_its_buttons(env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(TYPIST).id
    fake.dm("confirm by typing", TYPIST)
    question = await fake.wait_for_reply(dm, "Deploy now?")
    yes = custom_id(question, "Yes")
    fake.dm("no", TYPIST)
    await fake.wait_for_reply(dm, got({"confirmed": False}))
    await fake.wait_for(lambda: not question.components, "the buttons gone")
    assert question.content.endswith("✓ Answer: no")
    # A click on it now does not count.
    fake.click(question, yes, TYPIST)

    def told() -> list[str]:
        return [f.content for f in fake.followups if f.user_id == TYPIST]

    await fake.wait_for(lambda: len(told()) == 1, "the late click told")
    assert told() == ["This question is closed."]
