"""adapters/common/buttons.py: what a question's buttons carry, what a click becomes, and
which message to change when a question closes otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from picobridge.adapters.common.buttons import (
    CLOSED,
    CLOSED_LINE,
    EXPIRED_LINE,
    MAX_OPTIONS,
    NOT_ALLOWED,
    NOT_OURS,
    Asked,
    QuestionMessages,
    buttons,
    click,
    closed_line,
    decode,
    encode,
    label,
)
from picobridge.contract import (
    ChatRef,
    Dialog,
    DialogAnswer,
    DialogClosed,
    DialogEnd,
    DialogKind,
    StorageUnavailable,
)

CHAT = ChatRef("telegram", "42")
# The core's ids: 8 hex digits of a random prefix and a counter.
CONFIRM = Dialog("9f3a0c1e123456", DialogKind.CONFIRM, "Deploy now?")
SELECT = Dialog("9f3a0c1e7", DialogKind.SELECT, "Colour?", options=("red", "green", "blue"))


def test_every_button_names_its_question_and_choice_within_64_bytes() -> None:
    for dialog in (CONFIRM, SELECT):
        found = buttons(dialog)
        assert found is not None
        for button in found:
            assert len(button.data.encode()) <= 64
            parsed = decode(button.data)
            assert parsed is not None and parsed[0] == dialog.id
    assert [b.label for b in buttons(CONFIRM) or ()] == ["Yes", "No", "Cancel"]
    assert [b.label for b in buttons(SELECT) or ()] == ["red", "green", "blue", "Cancel"]
    assert encode("abc", "3") == "d:abc:3" and decode("d:abc:3") == ("abc", "3")


@pytest.mark.parametrize("data", [None, 7, "", "d:abc", "x:abc:y", "d:abc:yes", "d::y",
                                  "d:a b:y", "d:abc:1234", "d:" + "a" * 41 + ":y"])
def test_data_that_is_not_ours_is_not_read(data: object) -> None:
    assert decode(data) is None


def test_questions_answered_by_typing_get_no_buttons() -> None:
    assert buttons(Dialog("1", DialogKind.INPUT, "Name?")) is None
    assert buttons(Dialog("1", DialogKind.EDITOR, "Text?")) is None
    assert buttons(Dialog("1", DialogKind.SELECT, "None to pick")) is None
    many = tuple(f"option {n}" for n in range(MAX_OPTIONS + 1))
    assert buttons(Dialog("1", DialogKind.SELECT, "Too many", options=many)) is None
    assert buttons(Dialog("1", DialogKind.SELECT, "Enough", options=many[:-1])) is not None
    # An id the data cannot carry: typing still answers it.
    assert buttons(Dialog("a:b", DialogKind.CONFIRM, "Odd id")) is None
    assert buttons(Dialog("x" * 60, DialogKind.CONFIRM, "Long id")) is None


def test_labels_fit_the_platform() -> None:
    assert label("short", 10) == "short"
    assert label("  spread\nover   lines ", 40) == "spread over lines"
    long = label("a" * 100, 40)
    assert len(long) == 40 and long.endswith("…")
    assert label("   ", 10) == "…"


def test_what_a_choice_means() -> None:
    asked = Asked()
    asked.remember(CONFIRM)
    asked.remember(SELECT)
    assert asked.answer(CONFIRM.id, "y") == DialogAnswer(confirmed=True)
    assert asked.answer(CONFIRM.id, "n") == DialogAnswer(confirmed=False)
    assert asked.answer(CONFIRM.id, "c") == DialogAnswer(cancelled=True)
    assert asked.answer(SELECT.id, "1") == DialogAnswer(value="green")
    assert asked.answer(SELECT.id, "3") is None  # no fourth option
    assert asked.answer(SELECT.id, "y") is None  # not a choice of a select
    assert asked.answer(CONFIRM.id, "0") is None
    assert asked.answer("unknown", "y") is None


def test_remembered_questions_are_bounded() -> None:
    asked = Asked(size=3)
    for n in range(5):
        asked.remember(Dialog(str(n), DialogKind.CONFIRM, "?"))
    assert [asked.answer(str(n), "y") is not None for n in range(5)] == [
        False, False, True, True, True]


@dataclass
class Bridge:
    """What click() uses of BridgeLink."""

    allowed: set[str] = field(default_factory=lambda: {"7"})
    shown: str | None = "yes"
    outages: int = 0
    answered: list[tuple[str, ChatRef, str, DialogAnswer]] = field(default_factory=list)

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        if self.outages:
            self.outages -= 1
            raise StorageUnavailable("database is locked")
        return user_id in self.allowed

    async def answer_dialog(self, dialog_id: str, chat: ChatRef, user_id: str,
                            answer: DialogAnswer) -> str | None:
        self.answered.append((dialog_id, chat, user_id, answer))
        return self.shown


async def test_a_click_answers_through_the_bridge() -> None:
    bridge, asked = Bridge(), Asked()
    asked.remember(CONFIRM)
    result = await click(bridge, asked, encode(CONFIRM.id, "y"), CHAT, "7")  # type: ignore[arg-type]
    assert (result.shown, result.notice) == ("yes", "✓ Answer: yes")
    assert bridge.answered == [(CONFIRM.id, CHAT, "7", DialogAnswer(confirmed=True))]


async def test_clicks_that_do_not_count() -> None:
    asked = Asked()
    asked.remember(CONFIRM)
    yes = encode(CONFIRM.id, "y")
    stranger = Bridge()
    assert (await click(stranger, asked, yes, CHAT, "8")).notice == NOT_ALLOWED  # type: ignore[arg-type]
    assert stranger.answered == []  # a stranger's click never reaches the bridge's dialogs
    closed = Bridge(shown=None)
    result = await click(closed, asked, yes, CHAT, "7")  # type: ignore[arg-type]
    assert (result.shown, result.notice) == (None, CLOSED)
    forgotten = Bridge()
    assert (await click(forgotten, asked, encode("other", "y"), CHAT, "7")).notice == CLOSED  # type: ignore[arg-type]
    assert (await click(forgotten, asked, "play:again", CHAT, "7")).notice == NOT_OURS  # type: ignore[arg-type]
    assert forgotten.answered == []


async def test_a_storage_outage_is_passed_on_with_nothing_answered() -> None:
    bridge, asked = Bridge(outages=1), Asked()
    asked.remember(CONFIRM)
    with pytest.raises(StorageUnavailable):
        await click(bridge, asked, encode(CONFIRM.id, "n"), CHAT, "7")  # type: ignore[arg-type]
    assert bridge.answered == []
    result = await click(bridge, asked, encode(CONFIRM.id, "n"), CHAT, "7")  # type: ignore[arg-type]
    assert result.shown == "yes"


def test_how_a_closed_question_reads() -> None:
    typed = DialogClosed("q", DialogEnd.ANSWERED, DialogAnswer(value="green"))
    assert closed_line(typed) == "✓ Answer: green"  # as a click on "green" shows it
    assert closed_line(DialogClosed("q", DialogEnd.ANSWERED, DialogAnswer(confirmed=False))) \
        == "✓ Answer: no"
    assert closed_line(DialogClosed("q", DialogEnd.EXPIRED)) == EXPIRED_LINE
    assert closed_line(DialogClosed("q", DialogEnd.CLOSED)) == CLOSED_LINE
    assert "xpired" in EXPIRED_LINE and "losed" in CLOSED_LINE


def test_a_question_closed_after_it_was_sent_hands_back_its_message() -> None:
    shown: QuestionMessages[str] = QuestionMessages()
    closed = DialogClosed("q1", DialogEnd.EXPIRED)
    assert shown.sent("q1", "message 1") is None
    assert shown.closed(closed) == "message 1"
    assert shown.closed(closed) is None  # once: its message is forgotten
    assert shown.sent("q1", "again") is closed  # ... and the closing kept as for an unsent one


def test_a_question_closed_before_it_was_sent_is_shown_closed_when_it_is() -> None:
    shown: QuestionMessages[str] = QuestionMessages()
    closed = DialogClosed("q1", DialogEnd.CLOSED)
    assert shown.closed(closed) is None
    assert shown.sent("q1", "message 1") is closed
    assert shown.closed(DialogClosed("q1", DialogEnd.EXPIRED)) is None  # nothing left to change


def test_a_question_answered_by_its_button_is_forgotten() -> None:
    shown: QuestionMessages[str] = QuestionMessages()
    shown.sent("q1", "message 1")
    shown.forget("q1")
    shown.forget("never sent")
    assert shown.closed(DialogClosed("q1", DialogEnd.CLOSED)) is None


def test_messages_and_early_closings_are_bounded() -> None:
    shown: QuestionMessages[int] = QuestionMessages(size=2)
    for n in range(4):
        shown.sent(f"q{n}", n)
    found = [shown.closed(DialogClosed(f"q{n}", DialogEnd.CLOSED)) for n in range(4)]
    assert found == [None, None, 2, 3]
    # The two misses were kept as early closings, the oldest going first.
    for n in range(4, 7):
        shown.closed(DialogClosed(f"q{n}", DialogEnd.CLOSED))
    assert [shown.sent(f"q{n}", n) is not None for n in (0, 1, 4, 5, 6)] == [
        False, False, False, True, True]
