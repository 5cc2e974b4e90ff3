"""Telegram end to end with telegram.rate_limiter on (the default): a long answer in a group
goes out at the group's 20 messages a minute, while a private chat's answer is not held
behind it (judged from when the fake Bot API took each call); a 429 is still the send path's
to wait out.

One daemon serves both tests, each in its own chats.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.e2e.telegram_support import (
    USER,
    SharedDaemon,
    reply_containing,
    shared_daemon,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram.flood import PER_MINUTE_PER_GROUP, excess

# One worker runs the whole module, in order, so the shared daemon is started once.
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_telegram_flood_limits")]

GROUP = -100555
# One more message than a group's burst: an answer of that many 4096-character parts.
PARTS = PER_MINUTE_PER_GROUP + 1
ANSWER = 4096 * PARTS - 100
FLOODED = 6601  # the 429 test's person


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedDaemon]:
    # max_chunks lets the group's long answer go as parts; the 429 test's answer is one part.
    tmp = tmp_path_factory.mktemp("telegram-flood-limits")
    async with FakeTelegram() as fake:
        config = telegram_config(tmp, fake, rate_limiter=True, max_chunks=PARTS + 5,
                                 allowed_users=[USER, FLOODED])
        async with shared_daemon(tmp, fake, config) as shared:
            yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def env(module_daemon: SharedDaemon) -> AsyncIterator[SharedDaemon]:
    async with module_daemon.test() as shared:
        yield shared


async def test_a_long_answer_in_a_group_is_paced_and_a_private_chat_is_not_held(
        env: SharedDaemon) -> None:
    fake = env.fake
    bot = fake.bot_user["username"]
    fake.user_message(GROUP, USER, f"@{bot} #huge={ANSWER}", chat_type="supergroup")
    await fake.wait_for(lambda: len(fake.sent_messages(GROUP)) >= PER_MINUTE_PER_GROUP,
                        "the group's burst")
    # The group's next part waits its turn; a private chat's answer goes meanwhile.
    fake.user_message(USER, USER, "not behind the group")
    private = await reply_containing(fake, USER, "echo: not behind the group")
    await fake.wait_for(lambda: len(fake.sent_messages(GROUP)) >= PARTS,
                        "the whole answer", timeout=60)
    parts = fake.sent_messages(GROUP)
    assert len(parts) == PARTS and "".join(m.text or "" for m in parts).endswith(":END")
    group = [c for c in env.calls if c.params.get("chat_id") == GROUP]
    # The 21st part came at least 3 s (a twentieth of the minute) after the first: 1.5 s of
    # slack for the jitter between sending and arriving, none of it for an unpaced burst.
    assert excess([c.time for c in group], PER_MINUTE_PER_GROUP,
                  PER_MINUTE_PER_GROUP / 60) <= 0.5, [c.time - group[0].time for c in group]
    [answered] = [c for c in env.calls if c.method == "sendMessage"
                  and c.params.get("chat_id") == USER and c.params.get("text") == private.text]
    assert answered.time < group[-1].time


async def test_a_429_with_the_limiter_on_is_waited_out_once_by_the_send_path(
        env: SharedDaemon) -> None:
    fake, user = env.fake, FLOODED
    fake.fail_next("sendMessage", 429, retry_after=1)
    fake.user_message(user, user, "through a flood")
    await reply_containing(fake, user, "echo: through a flood")
    # The limiter does not retry (max_retries=0, as with PTB's): the send path tried once more,
    # after the retry_after Telegram asked for, and the answer arrived once.
    assert [m.text for m in fake.sent_messages(user)] == ["echo: through a flood"]
    retries = [c for c in fake.retries if c.params.get("chat_id") == user]
    assert len(retries) == 1
    assert [c for c in fake.early_retries if c.params.get("chat_id") == user] == []
    assert re.search(r"retry in 1\.0s", env.log)
