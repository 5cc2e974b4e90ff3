"""The agent's questions: asked in the turn's chat, answered by a button or the next message,
only there and only by someone allowed, cancelled when nobody answers in time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from picobridge.agent.port import DialogRequest, WorkerInfo
from picobridge.contract import (
    ChatRef,
    DialogAnswer,
    DialogKind,
    InboundMessage,
    ReplyKind,
    SubmitResult,
)
from picobridge.core.access import AccessPolicy
from picobridge.core.commands import Commands
from picobridge.core.dialogs import Dialogs, parse_answer
from picobridge.core.intake import Intake
from picobridge.core.outbox import Outbox
from picobridge.core.router import Router
from picobridge.core.turns import Turn
from picobridge.store import Store
from tests.unit.test_router import Recorder, ScriptedAgent

CHAT = ChatRef("test", "c1")


@dataclass(eq=False)
class AskingWorker(ScriptedAgent):
    answers: list[tuple[str, DialogAnswer]] = field(default_factory=list)
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    async def answer_dialog(self, request_id: str, answer: DialogAnswer) -> None:
        self.answers.append((request_id, answer))
        self.answered.set()


class Up:
    def infos(self) -> list[WorkerInfo]:
        return []

    def down_since(self) -> float | None:
        return None

    def assigned_worker(self, session: str) -> str | None:
        return None


@dataclass
class Rig:
    store: Store
    outbox: Outbox
    adapter: Recorder
    dialogs: Dialogs
    intake: Intake
    worker: AskingWorker
    n: int = 0

    async def turn(self) -> Turn:
        stored = await self.store.record_inbound(InboundMessage(
            chat=CHAT, sender_id="ann", text="do it", platform_message_id="m0", reply_to="r0"))
        assert stored is not None
        now = time.monotonic()
        return Turn(CHAT, stored.session_id, [stored], self.worker, now, now, sent=True)

    async def say(self, text: str, user: str = "ann", chat: ChatRef = CHAT) -> SubmitResult:
        self.n += 1
        return await self.intake.submit(InboundMessage(
            chat=chat, sender_id=user, text=text, platform_message_id=f"x{self.n}"))


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    store = await Store.open(tmp_path / "d.db")
    adapter = Recorder()
    outbox = Outbox(store, {"test": adapter})
    worker = AskingWorker(ready=True)
    dialogs = Dialogs(store, outbox, timeout=0.3)
    router = Router(store, outbox, {"test": adapter}, worker, turn_timeout=60, max_attempts=3,
                    coalesce=True, dialogs=dialogs)
    intake = Intake(store, router, outbox, AccessPolicy(store, {"test": frozenset({"ann"})}),
                    Commands(store, router, Up()), Up(), dialogs=dialogs)
    yield Rig(store, outbox, adapter, dialogs, intake, worker)
    await dialogs.stop()
    await outbox.stop(0)
    await store.close()


def request(kind: DialogKind, **fields: object) -> DialogRequest:
    return DialogRequest(None, "ui-7", kind, "Delete the file?", **fields)  # type: ignore[arg-type]


async def test_a_question_is_sent_with_its_dialog_and_a_button_answers_it(rig: Rig) -> None:
    turn = await rig.turn()
    await rig.dialogs.ask(turn, request(DialogKind.CONFIRM, message="notes.txt"))
    await rig.adapter.wait_sent(1)
    _, question = rig.adapter.sent[0]
    assert question.kind is ReplyKind.QUESTION and question.reply_to == "r0"
    assert question.dialog is not None and question.dialog.kind is DialogKind.CONFIRM
    assert "Delete the file?" in question.text and "Reply yes or no" in question.text
    dialog_id = question.dialog.id
    # Another chat, a stranger, an unknown id: nothing counts.
    assert await rig.intake.answer_dialog(dialog_id, ChatRef("test", "c2"), "ann",
                                          DialogAnswer(confirmed=True)) is None
    assert await rig.intake.answer_dialog(dialog_id, CHAT, "mallory",
                                          DialogAnswer(confirmed=True)) is None
    assert await rig.intake.answer_dialog("nope", CHAT, "ann", DialogAnswer()) is None
    assert rig.worker.answers == []
    shown = await rig.intake.answer_dialog(dialog_id, CHAT, "ann", DialogAnswer(confirmed=True))
    assert shown == "yes"
    assert rig.worker.answers == [("ui-7", DialogAnswer(confirmed=True))]
    # Answered once: the same button again does nothing.
    assert await rig.intake.answer_dialog(dialog_id, CHAT, "ann",
                                          DialogAnswer(confirmed=False)) is None


async def test_the_next_message_answers_and_does_not_reach_the_agent(rig: Rig) -> None:
    turn = await rig.turn()
    await rig.dialogs.ask(turn, request(DialogKind.SELECT, options=("keep", "delete")))
    assert await rig.say("maybe") is SubmitResult.COMMAND  # not an option: asked again
    assert rig.worker.answers == []
    assert await rig.say("2") is SubmitResult.COMMAND
    assert rig.worker.answers == [("ui-7", DialogAnswer(value="delete"))]
    await rig.adapter.wait_sent(3)
    texts = [r.text for _, r in rig.adapter.sent]
    assert texts[1].startswith("Please answer the question first.")
    assert texts[2] == "✓ Answer sent: delete"
    assert [m.text for m in await rig.store.open_messages()] == ["do it"]
    assert await rig.say("and now a normal message") is SubmitResult.ACCEPTED


async def test_nobody_answers_in_time_and_the_agent_hears_cancelled(rig: Rig) -> None:
    turn = await rig.turn()
    await rig.dialogs.ask(turn, request(DialogKind.INPUT))
    await asyncio.wait_for(rig.worker.answered.wait(), 5)
    assert rig.worker.answers == [("ui-7", DialogAnswer(cancelled=True))]
    assert rig.dialogs.asking(CHAT) is None


async def test_when_the_turn_ends_its_question_closes_silently(rig: Rig) -> None:
    turn = await rig.turn()
    await rig.dialogs.ask(turn, request(DialogKind.EDITOR, prefill="draft"))
    await rig.dialogs.turn_ended(turn.session)
    assert rig.dialogs.asking(CHAT) is None and rig.worker.answers == []


@pytest.mark.parametrize(("kind", "text", "expected"), [
    (DialogKind.CONFIRM, "Yes!", DialogAnswer(confirmed=True)),
    (DialogKind.CONFIRM, "n", DialogAnswer(confirmed=False)),
    (DialogKind.CONFIRM, "perhaps", None),
    (DialogKind.SELECT, "1", DialogAnswer(value="a")),
    (DialogKind.SELECT, "B", DialogAnswer(value="b")),
    (DialogKind.SELECT, "3", None),
    (DialogKind.INPUT, "  some text ", DialogAnswer(value="  some text ")),
    (DialogKind.EDITOR, "/cancel", DialogAnswer(cancelled=True)),
])
def test_typed_answers(kind: DialogKind, text: str, expected: DialogAnswer | None) -> None:
    from picobridge.contract import Dialog

    assert parse_answer(Dialog("d", kind, "t", options=("a", "b")), text) == expected
