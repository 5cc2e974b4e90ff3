"""Telegram end to end: nothing is lost when the daemon is killed, nothing is done twice when
Telegram delivers an update again."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.e2e.telegram_support import (
    USER,
    assert_no_token,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon

CHATS = [7000 + n for n in range(20)]
PER_CHAT = 10
TAG = re.compile(r"\bt(\d+)-(\d+)\b")


def answered(fake: FakeTelegram) -> Counter[tuple[int, int]]:
    """How many replies mention each message tag (coalesced turns answer several)."""
    seen: Counter[tuple[int, int]] = Counter()
    for message in fake.sent_messages():
        for chat, index in TAG.findall(message.text or ""):
            if int(chat) == message.chat_id:
                seen[(int(chat), int(index))] += 1
    return seen


async def test_sigkill_during_a_burst_loses_nothing(tmp_path: Path) -> None:
    everything = {(chat, i) for chat in CHATS for i in range(PER_CHAT)}
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, allowed_users=CHATS)
        daemon = await Daemon(config).start()
        await started(daemon, fake)
        half = PER_CHAT // 2
        for i in range(half):
            for chat in CHATS:
                fake.user_message(chat, chat, f"t{chat}-{i}")
        await fake.wait_for(lambda: len(answered(fake)) >= 30, timeout=30)
        second = [fake.user_message(chat, chat, f"t{chat}-{i}")
                  for i in range(half, PER_CHAT) for chat in CHATS]
        # Killed while the second wave is half committed and none of it confirmed.
        tenth = second[10]["message"]
        await daemon.wait_for_log(rf"received platform=telegram chat=\S+ "
                                  rf"id={tenth['chat']['id']}:{tenth['message_id']} ")
        await daemon.kill()
        assert fake.confirmed_offset <= second[10]["update_id"]
        before = answered(fake)
        assert len(before) < len(everything), "the kill came too late to test anything"

        restarted = await Daemon(config).start()
        try:
            await fake.wait_for(lambda: set(answered(fake)) >= everything, timeout=60,
                                what="every message answered after the restart")
            assert fake.pending_updates == []
        finally:
            await restarted.stop()

    counts = answered(fake)
    duplicates = {tag: n for tag, n in counts.items() if n > 1}
    journal = Counter((int(c), int(i)) for m in AgentJournal(tmp_path / "agent").messages()
                      for c, i in TAG.findall(m["content"]))
    replayed = len(re.findall(r"duplicate ignored platform=telegram", restarted.log))
    print(f"\n{len(everything)} messages, {len(before)} answered before SIGKILL, "
          f"{len(duplicates)} answered twice, {sum(n > 1 for n in journal.values())} seen "
          f"twice by the agent, {replayed} redelivered updates deduplicated")
    assert set(journal) == everything
    # The eleven committed but unconfirmed updates came again and were recognised.
    assert replayed >= 11
    # Only what was in flight at the kill can be answered twice: replies the outbox sent but
    # had not yet marked sent (at most one per chat; a coalesced one names several messages),
    # and turns the agent was working on (asked again after the restart).
    replies = Counter((m.chat_id, m.text) for m in fake.sent_messages() if m.text)
    repeated = [text for (_, text), n in replies.items() if n > 1]
    assert len(repeated) <= len(CHATS), repeated
    explained = {(int(c), int(i)) for text in repeated for c, i in TAG.findall(text)}
    explained |= {tag for tag, n in journal.items() if n > 1}
    assert set(duplicates) <= explained, sorted(set(duplicates) - explained)
    assert_no_token(restarted, fake.token)


async def test_redelivered_update_is_ignored(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            first = fake.user_message(USER, USER, "only once")
            await reply_containing(fake, USER, "echo: only once")
            await fake.wait_until_confirmed(first["update_id"])
            await fake.redeliver(first["update_id"])
            fake.user_message(USER, USER, "next")
            await reply_containing(fake, USER, "echo: next")
            await fake.wait_until_confirmed(first["update_id"] + 1)
        assert fake.texts(USER) == ["echo: only once", "echo: next"]
        contents = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
        assert contents == ["only once", "next"]


async def test_a_reply_cut_short_by_sigkill_is_finished_without_repeating_a_part(
        tmp_path: Path) -> None:
    size = 10_000  # three messages of at most 4096 characters
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        daemon = await Daemon(config).start()
        await started(daemon, fake)
        # The first part is let through; the second is held until the daemon dies.
        fake.stall_next("sendMessage")
        fake.user_message(USER, USER, f"a long one #huge={size}")
        await fake.wait_for_call("sendMessage")
        # release() drops stalls still queued: hold the second part anew, in the same step.
        fake.release("sendMessage")
        fake.stall_next("sendMessage")
        await fake.wait_for_call("sendMessage", count=2)
        await daemon.kill()
        (first,) = fake.sent_messages(USER)

        restarted = await Daemon(config).start()
        try:
            # The last part comes last, also when earlier ones are sent again.
            await fake.wait_for(lambda: fake.texts(USER)[-1].endswith(":END"), timeout=30,
                                what="the rest of the reply after the restart")
        finally:
            await restarted.stop()

    parts = fake.sent_messages(USER)
    assert parts[0] is first
    assert len(parts) == 3, [m.text[:20] for m in parts if m.text]
    assert "".join(m.text or "" for m in parts) == "HUGE:" + "x" * (size - 9) + ":END"
    # Only the first part quotes the question, also when the rest came from another run.
    assert parts[0].reply_to_message_id is not None
    assert [m.reply_to_message_id for m in parts[1:]] == [None, None]
    # The answer was stored before the kill: the agent was not asked again.
    assert len(AgentJournal(tmp_path / "agent").messages()) == 1
    assert_no_token(restarted, fake.token)
