"""Messages waiting for an agent no longer configured move to the agent their chat's route
names now (its kind and sender as the store knows them), each chat told once, in one
transaction with the move."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest

from picobridge.contract import ChatRef, InboundMessage, OutgoingReply, ReplyKind
from picobridge.core.orphans import Orphans
from picobridge.core.outbox import Outbox
from picobridge.core.retries import Retries
from picobridge.core.router import Router
from picobridge.core.routes import Route, Routing
from picobridge.store import Store, StoredMessage, StoredReply

GROUP, DM = ChatRef("chat", "-5"), ChatRef("chat", "7")


class Told:
    def __init__(self) -> None:
        self.replies: list[StoredReply] = []

    def deliver(self, reply: StoredReply) -> None:
        self.replies.append(reply)


def message(chat: ChatRef, n: int, kind: str) -> InboundMessage:
    return InboundMessage(chat=chat, sender_id="42", text=f"m{n}", platform_message_id=f"{n}",
                          reply_to=f"{n}", chat_kind=kind)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "picobridge.db")
    yield s
    await s.close()


async def test_waiting_messages_of_a_gone_agent_move_and_their_chat_is_told_once(
        store: Store) -> None:
    for n in (1, 2):
        assert await store.record_inbound(message(GROUP, n, "group"), "gone") is not None
    assert await store.record_inbound(message(DM, 3, "private"), "default") is not None
    assert await store.chat_kind(GROUP) == "group"
    told = Told()
    orphans = Orphans(store, Routing([Route("helper", kind="group")], "default"),
                      {"default", "helper"}, cast(Outbox, told))

    now = await orphans.rehome(await store.open_messages())
    assert [(m.chat, m.agent) for m in now] == [(GROUP, "helper"), (GROUP, "helper"),
                                                (DM, "default")]
    assert [(m.chat, m.agent) for m in await store.open_messages()] == [
        (m.chat, m.agent) for m in now]
    assert now[0].session_id == now[1].session_id == await store.agent_session(GROUP, "helper")
    assert await store.chat_agent(GROUP) == "helper"
    assert [(r.chat, r.kind) for r in told.replies] == [(GROUP, ReplyKind.NOTICE)]
    assert "“gone”" in told.replies[0].reply.text and "“helper”" in told.replies[0].reply.text
    assert told.replies[0].reply.reply_to == "1"
    assert [r.id for r in await store.pending_replies()] == [told.replies[0].id]

    assert await orphans.adopt_waiting() == 0  # nothing left to move, nobody told again
    assert len(told.replies) == 1


class Queue:
    def __init__(self) -> None:
        self.messages: list[StoredMessage] = []

    def enqueue(self, message: StoredMessage) -> None:
        self.messages.append(message)


async def test_a_retried_dead_letter_of_a_gone_agent_goes_to_its_chats_agent(
        store: Store) -> None:
    stored = await store.record_inbound(message(DM, 1, "private"), "gone")
    assert stored is not None
    await store.add_reply(DM, OutgoingReply("could not answer", ReplyKind.ERROR),
                          settles=[stored], settle_status="failed")
    assert await store.request_retry([("message", stored.id)]) == 1
    told, queue = Told(), Queue()
    orphans = Orphans(store, Routing([], "default"), {"default"}, cast(Outbox, told))
    retries = Retries(store, cast(Router, queue), cast(Outbox, told), orphans=orphans)
    assert await retries.take_up() == 1
    assert [(m.id, m.agent) for m in queue.messages] == [(stored.id, "default")]
    assert [(m.id, m.agent) for m in await store.open_messages()] == [(stored.id, "default")]
    assert len(told.replies) == 1 and "“gone”" in told.replies[0].reply.text
