"""The agent's controls with picobot-json (the fake picobot, tests/fakes/fake_picobot.py): its
driver declares no agent commands, so /help and the Telegram menu leave them out and /model is
answered with a word; busy modes fall back to collect, with a note; /sessions and /resume work
(the session ids are the bridge's)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, base_config, run_cli, write_config

FELL_BACK = "ℹ️ This agent cannot take messages while it works (steer)"


async def chat(config: Path, text: str) -> list[str]:
    code, out, err = await run_cli("chat", "--config", str(config), stdin=text.encode(),
                                   timeout=60)
    assert code == 0, err[-3000:]
    return out.split("\n")[:-1]


async def test_help_and_the_agent_commands_say_what_picobot_supports(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    lines = await chat(config, "/help\n/model\n/compact\n/mode\n/mode interrupt\n")
    text = "\n".join(lines)
    assert "/mode" in text and "/sessions" in text and "/resume" in text
    assert "/model" not in text.split("**Mode**")[0].split("/model is not")[0]
    assert "/model is not available with this agent (picobot-json). /help lists what is." in lines
    assert "/compact is not available with this agent (picobot-json). /help lists what is." \
        in lines
    assert "- steer: go into the reply being worked on, at once (not with this agent: works " \
        "as collect)" in lines
    assert any(line.startswith("✓ Mode: interrupt. This agent (picobot-json) cannot do that")
               for line in lines)


async def test_sessions_and_resume_bring_back_an_earlier_picobot_session(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    await chat(config, "alpha words\n/new\nbeta\n")
    lines = await chat(config, "/resume\n/resume 2\nWhat did I just say?\n/new\n/sessions\n")
    assert lines[0].startswith("**Resume** which conversation?")
    assert "“alpha words”, 1 message" in lines[2]
    assert lines[3].startswith("✓ Back to the conversation of")
    assert lines[4] == "You said: alpha words"
    listing = lines[lines.index(next(x for x in lines if x.startswith("**Your conv"))):]
    assert [x.split(": ", 1)[1] for x in listing[1:]] == [
        "(nothing yet), 0 messages ← current", "“beta”, 1 message",
        "“alpha words”, 2 messages"]


async def test_steer_with_picobot_waits_and_says_so_once(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "/mode steer")
            await reply_containing(fake, USER, "This agent (picobot-json) cannot do that")
            fake.user_message(USER, USER, "first #slow=5")
            # The bot shows it is typing once the turn is with the agent.
            await fake.wait_for(lambda: any(a.chat_id == USER for a in fake.chat_actions),
                                "typing in the chat", 15)
            fake.user_message(USER, USER, "second")
            fake.user_message(USER, USER, "third")
            await reply_containing(fake, USER, "echo: second", timeout=30)
            sent = [m.text or "" for m in fake.sent_messages(USER)]
            # One note, the first answer, then the two that waited, together.
            answers = [t for t in sent if t.startswith("echo:")]
            assert answers == ["echo: first #slow=5", "echo: second\n\nthird"]
            assert sum(1 for t in sent if t.startswith(FELL_BACK)) == 1
        commands = next(iter(fake.commands.values()))
        assert "model" not in [c["command"] for c in commands]
        assert "mode" in [c["command"] for c in commands]
