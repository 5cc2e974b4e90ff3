"""adapters/common/drafts.py: streamed drafts wait per chat, each for its own answer."""

from __future__ import annotations

import logging

import pytest

from picobridge.adapters.common.drafts import DraftQueue
from picobridge.adapters.common.tasks import TaskSet
from picobridge.contract import DeliveryError, OutgoingReply, ReplyKind

CHAT = "chat:1"


class Screen:
    def __init__(self) -> None:
        self.tasks = TaskSet(logging.getLogger("test.drafts"))
        self.discarded: list[str] = []
        self.queue: DraftQueue[str] = DraftQueue(self.tasks, self.discard)

    async def discard(self, draft: str) -> None:
        self.discarded.append(draft)


def answer(reply_to: str | None, outbox_id: int | None = None,
           answers: tuple[str, ...] = ()) -> OutgoingReply:
    return OutgoingReply("text", ReplyKind.ANSWER, reply_to=reply_to, answers=answers,
                         outbox_id=outbox_id)


def test_answers_take_their_own_drafts_whatever_came_after() -> None:
    screen = Screen()
    screen.queue.add(CHAT, ("10",), "draft of turn 1")
    screen.queue.add(CHAT, ("11", "12"), "draft of turn 2")
    screen.queue.add("chat:2", ("10",), "another chat's draft")
    assert screen.queue.take(CHAT, answer("10", 1)) == "draft of turn 1"
    # Matched on the messages a reply settles as well as on the one it quotes.
    assert screen.queue.take(CHAT, answer(None, 2, answers=("11",))) == "draft of turn 2"
    assert screen.queue.take(CHAT, answer("13", 3)) is None
    assert screen.queue.waiting() == ["another chat's draft", "draft of turn 1",
                                      "draft of turn 2"]  # the last two still taken


def test_a_reply_of_no_turn_leaves_the_drafts_alone() -> None:
    screen = Screen()
    screen.queue.add(CHAT, ("10",), "draft")
    assert screen.queue.take(CHAT, answer("99", 1)) is None
    assert screen.queue.take(CHAT, answer("10", 2)) == "draft"


def test_without_ids_turn_order_decides() -> None:
    screen = Screen()
    screen.queue.add(CHAT, (), "first")
    screen.queue.add(CHAT, (), "second")
    assert screen.queue.take(CHAT, answer(None)) == "first"
    assert screen.queue.take(CHAT, answer(None)) == "second"


async def test_drafts_older_than_the_one_taken_are_taken_down() -> None:
    screen = Screen()
    screen.queue.add(CHAT, ("10",), "orphan")
    screen.queue.add(CHAT, ("11",), "mine")
    assert screen.queue.take(CHAT, answer("11", 1)) == "mine"
    await screen.tasks.wait(5)
    assert screen.discarded == ["orphan"]


async def test_a_retry_gets_the_same_draft_until_the_reply_is_settled() -> None:
    screen = Screen()
    screen.queue.add(CHAT, ("10",), "draft")
    reply = answer("10", 5)
    assert screen.queue.take(CHAT, reply) == "draft"
    with pytest.raises(DeliveryError), screen.queue.settling(reply):
        raise DeliveryError("flood control", retry_after=1)
    assert screen.queue.take(CHAT, reply) == "draft"  # the retry replaces the same one
    with screen.queue.settling(reply):
        pass  # delivered
    assert screen.queue.take(CHAT, reply) is None

    screen.queue.add(CHAT, ("20",), "refused")
    refused = answer("20", 6)
    assert screen.queue.take(CHAT, refused) == "refused"
    with pytest.raises(DeliveryError), screen.queue.settling(refused):
        raise DeliveryError("blocked", permanent=True)
    assert screen.queue.take(CHAT, refused) is None
    assert screen.queue.waiting() == []
