"""Two Telegram bots in one daemon (`[telegram]`, the bot "default", and a `[[telegram.bots]]`
named "work"), each on its own fake Bot API, with the same chat ids, routed to different
agents (fake agents that say who they are): every message is answered by its own bot and
agent, each bot keeps its own offset, chats, allow list and sessions, and a SIGKILL in the
middle of a backlog on both loses nothing on either."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.e2e.telegram_support import OTHER_USER, USER, assert_no_token, reply_containing
from tests.fakes.telegram import FakeTelegram
from tests.harness import (
    AgentJournal,
    Daemon,
    base_config,
    free_port,
    named_agent,
    run_cli,
    sessions_by_chat,
    write_config,
)

WORK_TOKEN = "777000:WorkBotSecret_for-tests"
CHATS = [7100 + n for n in range(8)]
PER_CHAT = 8
TAG = re.compile(r"\b(home|work)(\d+)-(\d+)\b")



def bot_keys(fake: FakeTelegram, users: list[int]) -> dict[str, Any]:
    return {"token": fake.token, "base_url": fake.base_url,
            "base_file_url": fake.base_file_url, "allowed_users": users,
            "rate_limiter": False}


def two_bots_config(tmp: Path, home: FakeTelegram, work: FakeTelegram, *,
                    home_users: list[int], work_users: list[int],
                    work_keys: dict[str, Any] | None = None, **extra: Any) -> Path:
    config = base_config(tmp)
    config.update(extra)
    config["agent"] = named_agent(tmp, "family")
    config["agents"] = {"coder": named_agent(tmp, "coder")}
    config["routes"] = [{"agent": "coder", "platform": "telegram", "bot": "work"}]
    config["telegram"] = {**bot_keys(home, home_users),
                          "bots": [{"name": "work", **bot_keys(work, work_users),
                                     **(work_keys or {})}]}
    return write_config(tmp, config)


@asynccontextmanager
async def two_fakes() -> AsyncIterator[tuple[FakeTelegram, FakeTelegram]]:
    async with FakeTelegram() as home, FakeTelegram(
            WORK_TOKEN, bot_username="picobridge_work_bot") as work:
        yield home, work


async def both_started(daemon: Daemon, home: FakeTelegram, work: FakeTelegram) -> None:
    await daemon.wait_for_log(r"connected to Telegram as @picobridge_test_bot")
    await daemon.wait_for_log(r"connected to Telegram as @picobridge_work_bot")
    await home.wait_for_poll(timeout=60)
    await work.wait_for_poll(timeout=60)


def texts(fake: FakeTelegram) -> list[str]:
    return [m.text or m.caption or "" for m in fake.sent_messages()]


def cursors(state_dir: Path) -> dict[str, str]:
    with sqlite3.connect(state_dir / "picobridge.db") as db:
        return dict(db.execute("SELECT name, value FROM cursors WHERE name LIKE '%.offset'"))


async def test_two_bots_same_chat_ids_each_answered_by_its_own_agent(tmp_path: Path) -> None:
    async with two_fakes() as (home, work):
        config = two_bots_config(tmp_path, home, work, home_users=[USER, OTHER_USER],
                                 work_users=[USER])
        async with Daemon(config) as daemon:
            await both_started(daemon, home, work)
            home.user_message(USER, USER, "hello home")
            work.user_message(USER, USER, "hello work")
            await reply_containing(home, USER, "[family] echo: hello home")
            await reply_containing(work, USER, "[coder] echo: hello work")
            # The work bot's own allow list: OTHER_USER is let in by the home bot only.
            work.user_message(OTHER_USER, OTHER_USER, "let me in")
            hint = await reply_containing(work, OTHER_USER, "picobridge access allow")
            assert f"telegram@work:{OTHER_USER}" in (hint.text or "")
            code, out, err = await run_cli("access", "allow", f"telegram@work:{OTHER_USER}",
                                           "--config", str(config))
            assert code == 0, err
            work.user_message(OTHER_USER, OTHER_USER, "now?")
            await reply_containing(work, OTHER_USER, "[coder] echo: now?")
            home.user_message(USER, USER, "what did I just say")
            work.user_message(USER, USER, "what did I just say")
            await reply_containing(home, USER, "[family] You said: hello home")
            await reply_containing(work, USER, "[coder] You said: hello work")
        assert daemon.returncode == 0
        assert_no_token(daemon, WORK_TOKEN)
        assert_no_token(daemon, home.token)

    # No message was answered by the wrong bot or agent.
    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(work))
    family = [m["content"] for m in AgentJournal(tmp_path / "agent-family").messages()]
    coder = [m["content"] for m in AgentJournal(tmp_path / "agent-coder").messages()]
    assert family == ["hello home", "what did I just say"]
    assert coder == ["hello work", "now?", "what did I just say"]
    # Each bot its own chats, offset and grants.
    lines = await sessions_by_chat(config)
    assert "\tagent default\t" in lines[f"telegram:{USER}"]
    assert "\tagent coder\t" in lines[f"telegram@work:{USER}"]
    assert f"telegram:{OTHER_USER}" not in lines
    offsets = cursors(tmp_path / "state")
    assert set(offsets) == {"telegram.offset", "telegram@work.offset"}
    assert offsets["telegram.offset"] != offsets["telegram@work.offset"]
    code, out, _ = await run_cli("access", "list", "--config", str(config))
    assert f"telegram@work:{OTHER_USER}\tallowed\t(granted" in out
    assert f"telegram:{OTHER_USER}\tallowed\t(config)" in out
    assert f"telegram@work:{USER}\tallowed\t(config)" in out


def answered(fake: FakeTelegram, bot: str) -> Counter[tuple[int, int]]:
    seen: Counter[tuple[int, int]] = Counter()
    for message in fake.sent_messages():
        for which, chat, index in TAG.findall(message.text or ""):
            if which == bot and int(chat) == message.chat_id:
                seen[(int(chat), int(index))] += 1
    return seen


async def test_sigkill_mid_backlog_loses_nothing_on_either_bot(tmp_path: Path) -> None:
    everything = {(chat, i) for chat in CHATS for i in range(PER_CHAT)}
    async with two_fakes() as (home, work):
        config = two_bots_config(tmp_path, home, work, home_users=CHATS, work_users=CHATS)
        daemon = await Daemon(config).start()
        await both_started(daemon, home, work)
        wave: dict[str, list[dict[str, Any]]] = {"home": [], "work": []}
        for i in range(PER_CHAT):
            for chat in CHATS:
                wave["home"].append(home.user_message(chat, chat, f"home{chat}-{i}"))
                wave["work"].append(work.user_message(chat, chat, f"work{chat}-{i}"))
        # Killed once the work bot has committed a dozen of its backlog.
        twelfth = wave["work"][12]["message"]
        await daemon.wait_for_log(rf"received platform=telegram@work chat=\S+ "
                                  rf"id={twelfth['chat']['id']}:{twelfth['message_id']} ")
        await daemon.kill()
        before = len(answered(home, "home")) + len(answered(work, "work"))
        assert before < 2 * len(everything), "the kill came too late to test anything"

        restarted = await Daemon(config).start()
        try:
            await home.wait_for(lambda: set(answered(home, "home")) >= everything, timeout=90,
                                what="every home message answered after the restart")
            await work.wait_for(lambda: set(answered(work, "work")) >= everything, timeout=90,
                                what="every work message answered after the restart")
            assert home.pending_updates == [] and work.pending_updates == []
        finally:
            await restarted.stop()

    # Each bot's messages reached its own agent, every one of them; none crossed over.
    family = {(int(c), int(i)) for m in AgentJournal(tmp_path / "agent-family").messages()
              for w, c, i in TAG.findall(m["content"]) if w == "home"}
    coder = {(int(c), int(i)) for m in AgentJournal(tmp_path / "agent-coder").messages()
             for w, c, i in TAG.findall(m["content"]) if w == "work"}
    assert family == everything and coder == everything
    assert not any("work" in m["content"]
                   for m in AgentJournal(tmp_path / "agent-family").messages())
    assert not any("home" in m["content"]
                   for m in AgentJournal(tmp_path / "agent-coder").messages())
    assert not answered(home, "work") and not answered(work, "home")
    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(work))
    print(f"\n{2 * len(everything)} messages on two bots, {before} answered before SIGKILL")


async def test_a_bot_on_a_webhook_of_its_own_beside_a_polling_one(tmp_path: Path) -> None:
    port = free_port()
    async with two_fakes() as (home, work):
        config = two_bots_config(
            tmp_path, home, work, home_users=[USER], work_users=[USER],
            work_keys={"mode": "webhook", "webhook_secret": "work-hook-secret_1",
                       "webhook_url": f"http://127.0.0.1:{port}/telegram/work/webhook"},
            http={"listen": f"127.0.0.1:{port}"})
        async with Daemon(config) as daemon:
            await daemon.wait_for_log(r"webhook set; updates arrive on /telegram/work/webhook")
            await daemon.wait_for_log(r"http listening")
            await home.wait_for_poll(timeout=60)
            assert work.webhook is not None
            assert work.webhook["url"].endswith("/telegram/work/webhook")
            work.user_message(USER, USER, "via the work webhook")
            assert await work.deliver_webhook() == 1
            home.user_message(USER, USER, "via home polling")
            await reply_containing(work, USER, "[coder] echo: via the work webhook")
            await reply_containing(home, USER, "[family] echo: via home polling")
        assert work.calls_to("getUpdates") == [] and home.webhook is None
        assert_no_token(daemon, WORK_TOKEN)
    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(work))


async def test_the_environment_beats_credential_files_which_beat_the_file(
        tmp_path: Path) -> None:
    # The same order for the default bot and a further one; a wrong token where it must lose.
    wrong_home, wrong_work = "111111:WrongHomeToken_aa", "222222:WrongWorkToken_bb"
    async with two_fakes() as (home, work):
        config = two_bots_config(tmp_path, home, work, home_users=[USER], work_users=[USER],
                                 work_keys={"token": wrong_work})
        creds = tmp_path / "creds"
        creds.mkdir()
        (creds / "telegram_token").write_text(home.token)  # beats the file's
        (creds / "telegram_token_work").write_text(wrong_work)  # loses to the environment's
        listed = [{"name": "work", **bot_keys(work, [USER])}]
        env = {"CREDENTIALS_DIRECTORY": str(creds), "PICOBRIDGE_TELEGRAM__BOTS": json.dumps(listed)}
        text = config.read_text().replace(f'token = "{home.token}"', f'token = "{wrong_home}"', 1)
        config.write_text(text)
        code, out, err = await run_cli("check", "--config", str(config), env=env)
        assert code == 0, out + err
        assert "@picobridge_test_bot" in out and "@picobridge_work_bot" in out
        for token in (home.token, work.token, wrong_home, wrong_work):
            assert token not in out + err
        assert {call.token for call in home.calls_to("getMe")} == {home.token}
        assert {call.token for call in work.calls_to("getMe")} == {work.token}


def saved_path(message: dict[str, Any]) -> Path:
    (attachment,) = message["attachments"]
    return Path(attachment["content"].split("saved to ", 1)[1].split("\n", 1)[0])


async def test_each_bot_keeps_the_files_people_send_it_in_a_folder_of_its_own(
        tmp_path: Path) -> None:
    async with two_fakes() as (home, work):
        config = two_bots_config(tmp_path, home, work, home_users=[USER], work_users=[USER])
        async with Daemon(config) as daemon:
            await both_started(daemon, home, work)
            home.user_document(USER, USER, b"\x00home", "same.bin", caption="home file")
            work.user_document(USER, USER, b"\x00work", "same.bin", caption="work file")
            await reply_containing(home, USER, "\n\nhome file")
            await reply_containing(work, USER, "\n\nwork file")
    media = (tmp_path / "state" / "media").resolve()
    (family,) = AgentJournal(tmp_path / "agent-family").messages()
    (coder,) = AgentJournal(tmp_path / "agent-coder").messages()
    assert saved_path(family).parent == media / "telegram"
    assert saved_path(coder).parent == media / "telegram@work"
    assert saved_path(family).read_bytes() == b"\x00home"
    assert saved_path(coder).read_bytes() == b"\x00work"
    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(work))
