"""The agent's questions: asked in the turn's chat, answered by a button or the next message,
only there and only by someone allowed, cancelled when nobody answers in time; closed other
than by a button, the platform hears how (Adapter.dialog_closed), in the background."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from picobridge.agent.port import Capabilities, DialogRequest, WorkerInfo
from picobridge.contract import (
    ChatRef,
    DialogAnswer,
    DialogClosed,
    DialogEnd,
    DialogKind,
    InboundMessage,
    OutgoingReply,
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
from tests.unit.test_router import NO_CAPABILITIES, Recorder, ScriptedAgent

CHAT = ChatRef("test", "c1")


class ClosingRecorder(Recorder):
    """A platform with buttons: records the questions closed other than by a click."""

    def __init__(self) -> None:
        super().__init__()
        self.closings: asyncio.Queue[tuple[ChatRef, DialogClosed]] = asyncio.Queue()

    async def dialog_closed(self, chat: ChatRef, closed: DialogClosed) -> None:
        self.closings.put_nowait((chat, closed))

    async def next_closing(self) -> tuple[ChatRef, DialogClosed]:
        return await asyncio.wait_for(self.closings.get(), 5)


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

    def down_since(self, agent: str | None = None) -> float | None:
        return None

    def capabilities(self, agent: str) -> Capabilities:
        return NO_CAPABILITIES

    def assigned_worker(self, session: str) -> str | None:
        return None


@dataclass
class Rig:
    store: Store
    outbox: Outbox
    adapter: ClosingRecorder
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
    """Questions expire after 0.3 s."""
    async with rigged(tmp_path, 0.3) as made:
        yield made


@pytest.fixture
async def patient(tmp_path: Path) -> AsyncIterator[Rig]:
    """Questions wait a minute: no expiry in the middle of a test on a busy machine."""
    async with rigged(tmp_path, 60.0) as made:
        yield made


@contextlib.asynccontextmanager
async def rigged(tmp_path: Path, timeout: float) -> AsyncIterator[Rig]:
    store = await Store.open(tmp_path / "d.db")
    adapter = ClosingRecorder()
    outbox = Outbox(store, {"test": adapter})
    worker = AskingWorker(ready=True)
    dialogs = Dialogs(store, outbox, timeout=timeout)
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


async def asked_id(rig: Rig, turn: Turn, kind: DialogKind = DialogKind.CONFIRM) -> str:
    """Ask in `turn`; the id of the question's dialog, as its platform got it."""
    before = len(rig.adapter.sent)
    await rig.dialogs.ask(turn, request(kind))
    await rig.adapter.wait_sent(before + 1)
    dialog = rig.adapter.sent[before][1].dialog
    assert dialog is not None
    return dialog.id


async def test_a_typed_answer_closes_the_question_on_its_platform(patient: Rig) -> None:
    dialog_id = await asked_id(patient, await patient.turn())
    assert await patient.say("yes") is SubmitResult.COMMAND
    assert await patient.adapter.next_closing() == (
        CHAT, DialogClosed(dialog_id, DialogEnd.ANSWERED, DialogAnswer(confirmed=True)))
    assert patient.worker.answers == [("ui-7", DialogAnswer(confirmed=True))]


async def test_a_typed_cancel_is_an_answer_too(patient: Rig) -> None:
    dialog_id = await asked_id(patient, await patient.turn(), DialogKind.INPUT)
    await patient.say("cancel")
    assert await patient.adapter.next_closing() == (
        CHAT, DialogClosed(dialog_id, DialogEnd.ANSWERED, DialogAnswer(cancelled=True)))


async def test_a_message_that_does_not_answer_leaves_the_question_open(patient: Rig) -> None:
    turn = await patient.turn()
    dialog_id = await asked_id(patient, turn)
    await patient.say("perhaps")  # not yes or no: asked again, still open
    await patient.dialogs.turn_ended(turn.session)
    # The first the platform hears is the turn's end, not the message.
    assert await patient.adapter.next_closing() == (CHAT, DialogClosed(dialog_id, DialogEnd.CLOSED))


async def test_a_button_answer_leaves_the_message_to_its_click(patient: Rig) -> None:
    turn = await patient.turn()
    first = await asked_id(patient, turn)
    assert await patient.intake.answer_dialog(first, CHAT, "ann", DialogAnswer(confirmed=False))
    second = await asked_id(patient, turn)
    await patient.dialogs.turn_ended(turn.session)
    # Only the second question is closed through the platform: the click changed the first.
    assert await patient.adapter.next_closing() == (CHAT, DialogClosed(second, DialogEnd.CLOSED))
    assert patient.adapter.closings.empty()


async def test_the_timeout_closes_the_question_as_expired(rig: Rig) -> None:
    dialog_id = await asked_id(rig, await rig.turn())
    assert await rig.adapter.next_closing() == (CHAT, DialogClosed(dialog_id, DialogEnd.EXPIRED))
    await asyncio.wait_for(rig.worker.answered.wait(), 5)
    assert rig.worker.answers == [("ui-7", DialogAnswer(cancelled=True))]


async def test_the_turn_ending_or_a_newer_question_closes_it(patient: Rig) -> None:
    turn = await patient.turn()
    first = await asked_id(patient, turn)
    second = await asked_id(patient, turn)
    assert await patient.adapter.next_closing() == (CHAT, DialogClosed(first, DialogEnd.CLOSED))
    await patient.dialogs.turn_ended(turn.session)
    assert await patient.adapter.next_closing() == (CHAT, DialogClosed(second, DialogEnd.CLOSED))
    # Replaced, the first was cancelled for the agent; the turn's end tells it nothing.
    assert patient.worker.answers == [("ui-7", DialogAnswer(cancelled=True))]


async def test_stopping_closes_every_open_question(patient: Rig) -> None:
    dialog_id = await asked_id(patient, await patient.turn())
    await patient.dialogs.stop()
    assert await patient.adapter.next_closing() == (CHAT, DialogClosed(dialog_id, DialogEnd.CLOSED))
    assert patient.dialogs.asking(CHAT) is None and patient.worker.answers == []


class Refusing(Recorder):
    """A platform whose every change of a question fails, or never ends."""

    def __init__(self, hang: bool = False) -> None:
        super().__init__()
        self.hang = hang
        self.called = asyncio.Event()
        self.cancelled = False

    async def dialog_closed(self, chat: ChatRef, closed: DialogClosed) -> None:
        self.called.set()
        if self.hang:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        raise RuntimeError(f"refused: {PRIVATE_TEXT}")


PRIVATE_TEXT = "the question's private words"


async def test_a_platform_failing_to_close_a_question_is_logged_and_holds_nothing_up(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = await Store.open(tmp_path / "d.db")
    adapter = Refusing()
    outbox = Outbox(store, {"test": adapter})
    with caplog.at_level(logging.WARNING, logger="picobridge.outbox"):
        outbox.dialog_closed(CHAT, DialogClosed("q1", DialogEnd.EXPIRED))
        outbox.deliver(await store.add_reply(CHAT, OutgoingReply("next")))
        await adapter.wait_sent(1)
        await asyncio.wait_for(adapter.called.wait(), 5)
        await outbox.stop(5)  # waits for the closing, which fails
    assert "question q1 in chat=test:c1 may keep its buttons (RuntimeError)" in caplog.text
    assert PRIVATE_TEXT not in caplog.text
    # A platform that is not enabled hears nothing (and nothing fails).
    outbox.dialog_closed(ChatRef("gone", "x"), DialogClosed("q2", DialogEnd.CLOSED))
    await store.close()


async def test_a_platform_that_never_finishes_closing_does_not_hold_up_the_stop(
        tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "d.db")
    adapter = Refusing(hang=True)
    outbox = Outbox(store, {"test": adapter})
    outbox.dialog_closed(CHAT, DialogClosed("q1", DialogEnd.CLOSED))
    await asyncio.wait_for(adapter.called.wait(), 5)
    # The closing never ends by itself: stop returns only because it gives up on it.
    await outbox.stop(0.2)
    assert adapter.cancelled
    # Once stopping, questions are no longer changed.
    adapter.called.clear()
    outbox.dialog_closed(CHAT, DialogClosed("q2", DialogEnd.CLOSED))
    await asyncio.sleep(0)  # one turn of the loop: a task started now would have run
    assert not adapter.called.is_set()
    await store.close()
