"""The agent's questions on Discord, end to end: `picobridge run` with a prime-rpc agent that
asks (tests/e2e/dialog_agent.py). A confirm comes with buttons, a choice with a select menu;
clicks are acknowledged within Discord's 3 s and reach the agent, then the question shows the
answer without components; a stranger's click changes nothing and they are told, privately;
a question answered by typing loses its components too."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.e2e.discord_support import assert_no_token, discord_config, online
from tests.fakes.discord import DEFAULT_USER, OTHER_USER, STRANGER, FakeDiscord, SentMessage
from tests.harness import Daemon

AGENT = Path(__file__).with_name("dialog_agent.py")
AGENT_SETTINGS = {"protocol": "prime-rpc", "command": [sys.executable, str(AGENT)],
                  "pool_size": 2, "ping_interval": 2, "ping_timeout": 5}
NOT_ALLOWED = "Sorry, only people allowed to talk to the agent can answer its questions."


def got(answer: dict[str, Any]) -> str:
    return "got: " + json.dumps(answer, sort_keys=True)


def custom_id(message: SentMessage, label: str) -> str:
    return next(str(c["custom_id"]) for c in message.buttons if c.get("label") == label)


async def test_buttons_and_menus_answer_the_agents_questions(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        config = discord_config(tmp_path, fake, agent=AGENT_SETTINGS)
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.dm("please confirm the deploy")
            question = await fake.wait_for_reply(dm, "Deploy now?")
            assert [c.get("label") for c in question.buttons] == ["Yes", "No", "Cancel"]
            original = question.content

            # A stranger cannot answer (in a DM they cannot even see, but a click can be
            # forged): told privately, the question stays open.
            forged = fake.click(question, custom_id(question, "Yes"), STRANGER)
            await fake.wait_for(lambda: any(f.content == NOT_ALLOWED and f.ephemeral
                                            for f in fake.followups), "the stranger told")
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
        assert_no_token(daemon, fake)


async def test_a_question_answered_by_typing_loses_its_buttons(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        config = discord_config(tmp_path, fake, agent=AGENT_SETTINGS)
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.dm("confirm by typing")
            question = await fake.wait_for_reply(dm, "Deploy now?")
            yes = custom_id(question, "Yes")
            fake.dm("no")
            await fake.wait_for_reply(dm, got({"confirmed": False}))
            await fake.wait_for(lambda: not question.components, "the buttons gone")
            assert question.content.endswith("✓ Answer: no")
            # A click on it now does not count.
            fake.click(question, yes)
            await fake.wait_for(lambda: len(fake.followups) == 1, "the late click told")
            assert fake.followups[0].content == "This question is closed."
