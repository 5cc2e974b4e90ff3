"""An agent taken out of the config while messages wait for it: after the restart with the new
config they are answered by the agent their chat's route names now (by user, by kind, else
bridge.default_agent), each chat is told once which agent answers instead, and nothing waits
silently or is answered twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.telegram_support import OTHER_USER, USER, replies, reply_containing, started
from tests.fakes.telegram import FakeTelegram
from tests.harness import (
    AgentJournal,
    Daemon,
    base_config,
    named_agent,
    sessions_by_chat,
    write_config,
)

GROUP = -100700
NOTICE = "is no longer configured"



def config_with(tmp: Path, fake: FakeTelegram, agents: dict[str, dict[str, Any]],
                routes: list[dict[str, Any]]) -> Path:
    config = base_config(tmp)
    config["agent"] = named_agent(tmp, "family")
    config["agents"] = agents
    config["routes"] = routes
    config["telegram"] = {
        "token": fake.token, "base_url": fake.base_url, "base_file_url": fake.base_file_url,
        "allowed_users": [USER, OTHER_USER], "rate_limiter": False,
    }
    return write_config(tmp, config)


def mention(fake: FakeTelegram, text: str) -> str:
    return f"@{fake.bot_user['username']} {text}"


def notices(fake: FakeTelegram, chat: int) -> list[str]:
    return [m.text or "" for m in fake.sent_messages(chat) if NOTICE in (m.text or "")]


async def test_messages_waiting_for_a_removed_agent_go_to_the_chats_agent_now(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        fake.add_chat(GROUP, "group", title="family group")
        # The coder never gets ready: its messages wait.
        coder = named_agent(tmp_path, "coder", "--no-ready")
        before = config_with(tmp_path, fake, {"coder": coder},
                             [{"agent": "coder", "users": [str(OTHER_USER)]},
                              {"agent": "coder", "kind": "group"}])
        async with Daemon(before) as daemon:
            await started(daemon, fake)
            fake.user_message(OTHER_USER, OTHER_USER, "for the coder 1")
            fake.user_message(OTHER_USER, OTHER_USER, "for the coder 2")
            fake.user_message(GROUP, USER, mention(fake, "group question"), first_name="Ann")
            await daemon.wait_until(
                lambda: len([line for line in daemon.log_lines
                             if "agent=coder" in line and "received platform" in line]) == 3,
                what="the three messages stored for the coder")
        assert not replies(fake, OTHER_USER, "echo") and not replies(fake, GROUP, "echo")

        # The coder is gone; groups now go to a helper, the rest to the default agent.
        after = config_with(tmp_path, fake, {"helper": named_agent(tmp_path, "helper")},
                            [{"agent": "helper", "kind": "group"}])
        async with Daemon(after) as daemon:
            await started(daemon, fake)
            await reply_containing(fake, OTHER_USER, "[family] echo: for the coder 1")
            await reply_containing(fake, OTHER_USER, "for the coder 2")
            await reply_containing(fake, GROUP, "[helper] echo: Ann: group question")
            await daemon.wait_for_log(r"agent coder no longer configured: 2 waiting message\(s\)"
                                      rf" of chat telegram:{OTHER_USER} go to agent default")
            fake.user_message(OTHER_USER, OTHER_USER, "what did I just say")
            await reply_containing(fake, OTHER_USER, "[family] You said: for the coder")
        # Once more with the same config: nobody is told again.
        async with Daemon(after) as daemon:
            await started(daemon, fake)
            fake.user_message(GROUP, USER, mention(fake, "still here?"), first_name="Ann")
            await reply_containing(fake, GROUP, "[helper] echo: Ann: still here?")

    told = notices(fake, OTHER_USER)
    assert told == ["The agent “coder” that was to answer is no longer configured: “default” "
                    "answers your waiting 2 messages instead, in a new conversation."]
    assert len(notices(fake, GROUP)) == 1 and "“helper” answers" in notices(fake, GROUP)[0]
    assert notices(fake, USER) == []
    family = [m["content"] for m in AgentJournal(tmp_path / "agent-family").messages()]
    helper = [m["content"] for m in AgentJournal(tmp_path / "agent-helper").messages()]
    assert AgentJournal(tmp_path / "agent-coder").messages() == []
    assert family.count("for the coder 1\n\nfor the coder 2") + family.count(
        "for the coder 1") == 1
    assert helper == ["Ann: group question", "Ann: still here?"]
    lines = await sessions_by_chat(after)
    assert "\tagent default\t" in lines[f"telegram:{OTHER_USER}"]
    assert "\tagent helper\t" in lines[f"telegram:{GROUP}"]
    assert all(line.endswith("\t0 waiting") for line in lines.values()), lines
