"""Telegram's flood limits on the bot's request path (telegram.rate_limiter), against the fake
Bot API: which calls wait, how many go at once, and how many buckets are kept. Judged from
the fake's record of when calls arrived, never from our own clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from telegram import Bot
from telegram.request import BaseRequest, HTTPXRequest

from picobridge.adapters.telegram.http import AiohttpRequest
from picobridge.adapters.telegram.limiter import (
    KEPT_GROUPS,
    FloodLimits,
    LimitedRequest,
    group_of,
)
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram.flood import PER_SECOND, excess


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as f:
        yield f


def limited_bot(fake: FakeTelegram, limits: FloodLimits, transport: str = "aiohttp") -> Bot:
    base_url = fake.base_url
    inner: BaseRequest
    if transport == "aiohttp":
        inner = AiohttpRequest(pool_size=32, read_timeout=10.0, write_timeout=10.0,
                               connect_timeout=10.0, pool_timeout=10.0)
    else:
        # PTB's own transport, as telegram.proxy_url uses it: the fake is the proxy too
        # (it serves absolute-form requests by path), and only it can answer.
        inner = HTTPXRequest(connection_pool_size=32, proxy=fake.url)
        base_url = "http://api.telegram.invalid/bot"
    request = LimitedRequest(inner, limits)
    return Bot(fake.token, base_url=base_url, base_file_url=fake.base_file_url,
               request=request, get_updates_request=request)


@pytest.mark.parametrize(("chat_id", "group"), [
    (4242, None),                      # a user: a private chat
    ("4242", None),                    # the same, as text
    (-100123456, -100123456),          # a supergroup (or channel)
    ("-100123456", -100123456),        # the same group, spelt as text: one bucket
    (-4242, -4242),                    # a basic group
    ("@some_channel", "@some_channel"),  # a public channel or supergroup by name
])
def test_groups_are_told_from_private_chats_by_their_ids(chat_id: object,
                                                         group: int | str | None) -> None:
    assert group_of(chat_id) == group


@pytest.mark.parametrize("transport", ["aiohttp", "httpx through a proxy"])
async def test_sends_go_out_at_telegrams_overall_rate(fake: FakeTelegram, transport: str) -> None:
    chats = range(1001, 1001 + 3 * PER_SECOND)
    async with limited_bot(fake, FloodLimits(), transport) as bot:
        await asyncio.gather(*(bot.send_message(chat, f"to {chat}") for chat in chats))
    times = [c.time for c in fake.calls_to("sendMessage")]
    assert len(times) == len(chats)
    # A second's worth at once, then one every 1/30 s: 90 sends take about two seconds.
    # Unpaced, they would all arrive in a burst: an excess of about 60. A second's worth of
    # slack for the jitter between sending and arriving: calls paced on the sender's clock
    # reach the fake bunched when a loaded machine holds the process (CI's parallel run saw
    # 4 calls' worth with a slack of 3, and 17.8 with a slack of 15); an unpaced sender still
    # exceeds it twice over.
    assert excess(times, PER_SECOND, PER_SECOND) <= PER_SECOND, sorted(
        t - times[0] for t in times)


async def test_calls_that_name_no_chat_are_not_held(fake: FakeTelegram) -> None:
    # The bot's one send an hour is used up; what names no chat still goes (were it held,
    # this test would hang until pytest's timeout).
    async with limited_bot(fake, FloodLimits(overall=(1, 3600.0))) as bot:
        await bot.send_message(4242, "the one call")
        me = await bot.get_me()
        commands = await bot.get_my_commands()
    assert me.username == fake.bot_user["username"] and commands == ()
    assert [c.method for c in fake.calls] == ["getMe", "sendMessage", "getMe", "getMyCommands"]


# The bot's overall limit lifted, so that only the groups' buckets count.
UNLIMITED = (1e9, 1.0)


async def test_a_groups_bucket_is_kept_while_it_holds_calls() -> None:
    limits = FloodLimits(overall=UNLIMITED)
    for group in range(1, KEPT_GROUPS + 100):
        await limits.wait(-group)
    # Each group's last minute still counts: none is forgotten.
    assert limits.groups == KEPT_GROUPS + 99


async def test_drained_buckets_are_dropped_beyond_the_kept_number() -> None:
    # A bucket that drains at once: every earlier group's is empty when the next one comes.
    limits = FloodLimits(overall=UNLIMITED, per_group=(20, 1e-9))
    for group in range(1, KEPT_GROUPS + 100):
        await limits.wait(-group)
    assert limits.groups <= KEPT_GROUPS
    await limits.wait(4242)  # a private chat has no bucket of its own
    await limits.wait(None)
    assert limits.groups <= KEPT_GROUPS
