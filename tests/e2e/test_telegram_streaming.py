"""Telegram end to end with telegram.stream on: the streamed draft of each turn becomes that
turn's answer, also when the agent finishes later turns before an answer is delivered."""

from __future__ import annotations

import asyncio
import sys
from collections import defaultdict
from pathlib import Path

from tests.e2e.telegram_support import USER, assert_no_token, started, telegram_config
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.harness import Daemon

GATED_AGENT = Path(__file__).parent / "gated_agent.py"


class Gates:
    """The server the gated agent asks before finishing a turn: the test sees each turn
    arrive at its gate and decides when it may go on."""

    def __init__(self) -> None:
        self._arrived: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self._open: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        name = (await reader.readline()).decode().strip()
        self._arrived[name].set()
        await self._open[name].wait()
        writer.write(b"go\n")
        await writer.drain()
        writer.close()

    async def reached(self, name: str, timeout: float = 20.0) -> None:
        await asyncio.wait_for(self._arrived[name].wait(), timeout)

    def open(self, name: str) -> None:
        self._open[name].set()

    def close(self) -> None:
        for event in self._open.values():
            event.set()
        if self._server is not None:
            self._server.close()


def bot_messages(fake: FakeTelegram) -> list[SentMessage]:
    return fake.sent_messages(USER)


async def draft_showing(fake: FakeTelegram, start: str) -> SentMessage:
    """The streamed draft that shows the first half of an answer."""
    def find() -> SentMessage | None:
        return next((m for m in bot_messages(fake) if (m.text or "").startswith(start)), None)

    await fake.wait_for(lambda: find() is not None, timeout=15, what=f"a draft {start!r}…")
    found = find()
    assert found is not None
    return found


async def test_each_answer_replaces_its_own_draft_when_turns_finish_ahead_of_delivery(
        tmp_path: Path) -> None:
    gates = Gates()
    port = await gates.start()
    answers = [f"echo: {word} #gate={n}" for n, word in enumerate(("one", "two", "three"))]
    async with FakeTelegram() as fake:
        config = telegram_config(
            tmp_path, fake, stream=True,
            agent={"command": [sys.executable, str(GATED_AGENT), "--gate-port", str(port)]},
            sections={"bridge": {"coalesce": False}})
        try:
            async with Daemon(config) as daemon:
                await started(daemon, fake)
                # The chat's replies are held behind a bridge notice whose delivery stalls, so
                # the agent finishes every turn before the first answer can go out.
                fake.stall_next("sendMessage")
                fake.user_message(USER, USER, "/status")
                await fake.wait_for_call("sendMessage")
                for text in answers:
                    fake.user_message(USER, USER, text.removeprefix("echo: "))
                drafts = []
                for n, answer in enumerate(answers):
                    await gates.reached(str(n))  # and so the turn before has ended
                    drafts.append(await draft_showing(fake, answer[: len(answer) // 2]))
                    if n < len(answers) - 1:
                        gates.open(str(n))

                fake.release("sendMessage")  # the notice, then the two finished answers
                await fake.wait_for(lambda: [m.text for m in drafts[:2]] == answers[:2],
                                    timeout=15, what="the first two answers in their drafts")
                gates.open(str(len(answers) - 1))
                await fake.wait_for(lambda: drafts[2].text == answers[2], timeout=15,
                                    what="the third answer in its draft")
                visible = bot_messages(fake)
        finally:
            gates.close()

    # Each answer took over its own draft, none was sent anew, no draft stays half-written.
    assert [m.message_id for m in visible if m.text in answers] == \
        [d.message_id for d in drafts]
    others = [m for m in visible if m.text not in answers]
    assert len(others) == 1 and (others[0].text or "").startswith("Agent: ")
    assert not [m for m in visible if any(a.startswith(m.text or "") and m.text != a
                                          for a in answers)]
    assert_no_token(daemon, fake.token)
