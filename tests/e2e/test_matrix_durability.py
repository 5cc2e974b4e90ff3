"""Matrix faults against a real Synapse: the daemon SIGKILLed in the middle of a backlog
(with more sent while it was down than one /sync returns), and the homeserver restarted while
the daemon runs. Every message is answered once; none lost, none twice."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.matrix_support import (
    assert_no_secrets,
    body,
    matrix_config,
    person,
    synced,
)
from tests.harness import Daemon
from tests.synapse.person import Person
from tests.synapse.server import Synapse

WORD = re.compile(r"\bm(\d+)\b")


def answered(me: Person, room: str, bot: str) -> list[int]:
    """Every message number the bot's answers name, once per mention (duplicates show)."""
    return [int(n) for e in me.messages_from(room, bot) for n in WORD.findall(body(e))]


async def test_sigkill_mid_backlog_loses_nothing_and_answers_once(
        tmp_path: Path, synapse: Synapse) -> None:
    bot = synapse.register()
    alice = synapse.register()
    config = matrix_config(tmp_path, synapse, bot, [alice.user_id], reaction_done="")
    async with person(synapse, alice) as me:
        daemon = await Daemon(config).start()
        await synced(daemon)
        room = await me.create_room([bot.user_id], direct=True)
        await me.wait_joined(room, bot.user_id)
        for n in range(8):
            await me.say(room, f"m{n} #slow-once=1")
        await me.wait_until(lambda: answered(me, room, bot.user_id), what="a first answer")
        await daemon.kill()
        # More than one /sync returns while the bot is away: the timeline comes back cut
        # short, and the gap must be filled from the stored token.
        for n in range(8, 70):
            await me.say(room, f"m{n}")
        async with Daemon(config) as again:
            await me.wait_until(lambda: set(answered(me, room, bot.user_id)) == set(range(70)),
                                timeout=90, what="every message answered")
            await again.wait_for_log(r"filled a gap of [1-9]\d* events")
        numbers = answered(me, room, bot.user_id)
        assert sorted(numbers) == list(range(70)), "a message answered twice"
    assert_no_secrets(again, bot, alice)


async def test_a_homeserver_restart_while_the_daemon_runs(tmp_path: Path,
                                                          own_synapse: Synapse) -> None:
    server = own_synapse
    bot = server.register()
    alice = server.register()
    config = matrix_config(tmp_path, server, bot, [alice.user_id], reaction_done="")
    async with Daemon(config) as daemon, person(server, alice) as me:
        await synced(daemon)
        room = await me.create_room([bot.user_id], direct=True)
        await me.wait_joined(room, bot.user_id)
        await me.say(room, "one")
        await me.wait_for_message(room, bot.user_id, lambda e: body(e) == "echo: one")
        # The answer is ready while the homeserver is away: the outbox keeps it.
        await me.say(room, "two #slow=3")
        await daemon.wait_for_log(r"matrix event .* -> accepted")
        server.stop()
        await daemon.wait_for_log(r"platform matrix disconnected", timeout=60)
        server.start()
        await daemon.wait_until(lambda: sum("platform matrix connected" in line
                                            for line in daemon.log_lines) >= 2,
                                timeout=60, what="the daemon to reconnect")
        await me.say(room, "three")
        await me.wait_until(lambda: {body(e) for e in me.messages_from(room, bot.user_id)}
                            >= {"echo: one", "echo: two #slow=3", "echo: three"},
                            timeout=60, what="every answer after the restart")
        texts = [body(e) for e in me.messages_from(room, bot.user_id)]
        assert sorted(texts) == sorted(set(texts)), f"an answer came twice: {texts}"
    assert_no_secrets(daemon, bot, alice)
