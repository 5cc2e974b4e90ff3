"""A long answer streamed in 20,000 one-character deltas, end to end on both platforms: the
streamed draft becomes the answer, which shows every character exactly once, and a second
chat that writes while the stream runs is answered (two agent workers, so it never waits for
the first chat's turn; only the bridge's handling of the stream could hold it up).

How fast is bench/streaming.py's business; these tests check what the user sees."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.slack_support import assert_no_secrets
from tests.e2e.telegram_support import OTHER_USER, USER, assert_no_token, started, telegram_config
from tests.fakes.slack import FakeSlack, PostedMessage
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.harness import Daemon, base_config, write_config

DELTAS = 20_000
# What the fake agent answers to #huge=N: N characters in all, streamed one by one.
ANSWER = "HUGE:" + "x" * (DELTAS - len("HUGE:") - len(":END")) + ":END"
ALICE, BOB = "U0ALICE", "U0BOB"


def joined(parts: list[str]) -> str:
    return "".join(parts)


async def test_telegram_stream_of_20000_deltas(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        # Room for the whole answer in messages (5 of them) rather than as a file.
        config = telegram_config(tmp_path, fake, "--delta-chars", "1", stream=True,
                                 max_chunks=8, agent={"pool_size": 2})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, f"a long one #huge={DELTAS}", entities=[])

            def draft() -> SentMessage | None:
                return next((m for m in fake.sent_messages(USER)
                             if (m.text or "").startswith("HUGE:")), None)

            await fake.wait_for(draft, "the streamed draft", timeout=30)
            fake.user_message(OTHER_USER, OTHER_USER, "meanwhile, a question", entities=[])
            # The draft of its own (short) answer, then the answer itself.
            await fake.wait_for(lambda: fake.texts(OTHER_USER) == ["echo: meanwhile, a question"],
                                "the other chat's answer", timeout=30)

            def answer() -> list[str]:
                return [m.text or "" for m in sorted(fake.sent_messages(USER),
                                                     key=lambda m: m.message_id)]

            await fake.wait_for(lambda: joined(answer()) == ANSWER, "the whole answer",
                                timeout=60)
            first = draft()
            assert first is not None and first.edits  # the draft became the first part
            assert len(answer()) == 5
        assert_no_token(daemon, fake.token)


async def test_slack_stream_of_20000_deltas(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        config = base_config(tmp_path, "--delta-chars", "1", pool_size=2)
        config["slack"] = {"bot_token": fake.bot_token, "app_token": fake.app_token,
                           "base_url": fake.api_url, "allowed_users": [ALICE, BOB],
                           "stream": True, "max_chunks": 8}
        async with Daemon(write_config(tmp_path, config)) as daemon:
            await fake.wait_for_socket()
            alice, bob = fake.dm_channel(ALICE), fake.dm_channel(BOB)
            await fake.send_event(fake.dm_message(f"a long one #huge={DELTAS}", user=ALICE))

            def draft() -> PostedMessage | None:
                return next((m for m in fake.posted_messages(alice)
                             if m.text.startswith("HUGE:")), None)

            await fake.wait_for(draft, "the streamed draft", timeout=30)
            await fake.send_event(fake.dm_message("meanwhile, a question", user=BOB))
            # The draft of its own (short) answer, then the answer itself.
            await fake.wait_for(lambda: [m.text for m in fake.posted_messages(bob)]
                                == ["echo: meanwhile, a question"], "the other chat's answer",
                                timeout=30)

            def answer() -> list[str]:
                shown = [m for m in fake.posted_messages(alice) if not m.deleted]
                return [m.text for m in sorted(shown, key=lambda m: float(m.ts))]

            await fake.wait_for(lambda: joined(answer()) == ANSWER, "the whole answer",
                                timeout=60)
            first = draft()
            assert first is not None and first.edits  # the draft became the first part
            assert len(answer()) == 6
        assert_no_secrets(daemon, fake)
