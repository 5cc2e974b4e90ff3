"""Buttons for the agent's questions, the part every platform with buttons shares: which
choices a question offers, how a button names its question and choice in the few bytes a
platform carries back (Telegram: 64), and what a click becomes for the bridge.

A button's data is `d:<dialog id>:<choice>`, the choice being `y` / `n` (confirm), the
option's index (select) or `c` (cancel). Option texts are not in the data (they may be long):
the adapter remembers the questions it showed (`Asked`) and reads the option back from there.
Questions only live while the daemon runs (the bridge forgets them on restart), so a question
the adapter no longer remembers is closed either way.

Who may answer, and whether the question is still open in that chat, the bridge decides
(`BridgeLink.answer_dialog`); the adapter only asks first whether the person is allowed at
all, to tell a stranger something else than "closed".

A question closed any other way (typed answer, timeout, its turn over) reaches the adapter as
`Adapter.dialog_closed`; `QuestionMessages` keeps which message carries each question's
buttons so that the adapter can take them away and show `closed_line` there.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

from picobridge.contract import (
    BridgeLink,
    ChatRef,
    Dialog,
    DialogAnswer,
    DialogClosed,
    DialogEnd,
    DialogKind,
)

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

YES, NO, CANCEL = "y", "n", "c"
# Beyond this many options a keyboard is a wall of buttons; the person types the number
# instead, as the question's text says. (With Cancel, 21 buttons: within Slack's 25 to an
# actions block and Telegram's 100 to a keyboard.)
MAX_OPTIONS = 20
MAX_REMEMBERED = 1000
_DATA = re.compile(r"d:([A-Za-z0-9_.-]{1,40}):(y|n|c|\d{1,3})")

CLOSED = "This question is closed."
NOT_ALLOWED = "Sorry, only people allowed to talk to the agent can answer its questions."
NOT_OURS = "This button no longer works."
EXPIRED_LINE = "⌛ Expired: no answer came in time."
CLOSED_LINE = "✖ Closed: the agent no longer waits for an answer."


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    data: str  # what the platform hands back on a click
    style: str | None = None  # "primary" where the platform colours buttons


def encode(dialog_id: str, choice: str) -> str:
    return f"d:{dialog_id}:{choice}"


def decode(data: object) -> tuple[str, str] | None:
    """(dialog id, choice) of a button's data, or None when it is not one of ours."""
    if not isinstance(data, str):
        return None
    match = _DATA.fullmatch(data)
    return (match[1], match[2]) if match else None


def buttons(dialog: Dialog) -> list[Button] | None:
    """The buttons a question offers, or None when it is answered by typing only."""
    if decode(encode(dialog.id, CANCEL)) is None:
        return None  # an id the data cannot carry (within Telegram's 64 bytes): typing works
    if dialog.kind is DialogKind.CONFIRM:
        choices = [Button("Yes", encode(dialog.id, YES), "primary"),
                   Button("No", encode(dialog.id, NO))]
    elif dialog.kind is DialogKind.SELECT and 0 < len(dialog.options) <= MAX_OPTIONS:
        choices = [Button(option, encode(dialog.id, str(index)))
                   for index, option in enumerate(dialog.options)]
    else:
        return None
    return [*choices, Button("Cancel", encode(dialog.id, CANCEL))]


def label(text: str, limit: int) -> str:
    """A button label within a platform's limit (the full option is in the question's text)."""
    text = " ".join(text.split()) or "…"
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def answered_line(shown: str) -> str:
    """What the question says once answered."""
    return f"✓ Answer: {shown}"


def closed_line(closed: DialogClosed) -> str:
    """What a question says once closed other than by its buttons; a typed answer shows as a
    click's would (the person answered: how does not matter)."""
    if closed.end is DialogEnd.ANSWERED and closed.answer is not None:
        return answered_line(closed.answer.describe())
    return EXPIRED_LINE if closed.end is DialogEnd.EXPIRED else CLOSED_LINE


def _keep(items: OrderedDict[K, V], key: K, value: V, size: int) -> None:
    items[key] = value
    items.move_to_end(key)
    while len(items) > size:
        items.popitem(last=False)


class QuestionMessages(Generic[T]):
    """Which platform message (`T`: whatever the platform needs to change it) carries each
    open question's buttons, while the daemon runs.

    The bridge may close a question before its message is sent (the outbox still at it,
    through a 429 or an outage, while the turn ends), so either may come first: a closing
    that finds no message is kept until the message is sent, and `sent` then hands it back
    to be shown at once. Both are bounded, the oldest going first: closings of questions
    never shown with buttons (typed-only ones, failed sends) are kept for nothing.
    """

    def __init__(self, size: int = MAX_REMEMBERED) -> None:
        self._messages: OrderedDict[str, T] = OrderedDict()
        self._closed: OrderedDict[str, DialogClosed] = OrderedDict()
        self._size = size

    def sent(self, dialog_id: str, message: T) -> DialogClosed | None:
        """The question's buttons are on `message`; returns how it closed if it already did
        (the caller shows that now)."""
        closed = self._closed.pop(dialog_id, None)
        if closed is None:
            _keep(self._messages, dialog_id, message, self._size)
        return closed

    def closed(self, closed: DialogClosed) -> T | None:
        """The question closed: the message to change, or None when it has not been sent
        (kept for `sent`) or is unknown."""
        message = self._messages.pop(closed.dialog_id, None)
        if message is None:
            _keep(self._closed, closed.dialog_id, closed, self._size)
        return message

    def forget(self, dialog_id: str) -> None:
        """Answered by its own button: its click changes the message."""
        self._messages.pop(dialog_id, None)


class Asked:
    """The questions shown with buttons while the daemon runs (bounded: the oldest go)."""

    def __init__(self, size: int = MAX_REMEMBERED) -> None:
        self._dialogs: OrderedDict[str, Dialog] = OrderedDict()
        self._size = size

    def remember(self, dialog: Dialog) -> None:
        _keep(self._dialogs, dialog.id, dialog, self._size)

    def answer(self, dialog_id: str, choice: str) -> DialogAnswer | None:
        """What pressing `choice` on that question means, or None when it means nothing."""
        dialog = self._dialogs.get(dialog_id)
        if dialog is None:
            return None
        if choice == CANCEL:
            return DialogAnswer(cancelled=True)
        if dialog.kind is DialogKind.CONFIRM and choice in (YES, NO):
            return DialogAnswer(confirmed=choice == YES)
        if dialog.kind is DialogKind.SELECT and choice.isdigit() \
                and int(choice) < len(dialog.options):
            return DialogAnswer(value=dialog.options[int(choice)])
        return None


@dataclass(frozen=True, slots=True)
class Click:
    """What became of a click: `shown` when it answered the question, else `notice` for the
    person who clicked."""

    shown: str | None
    notice: str


async def click(bridge: BridgeLink, asked: Asked, data: object, chat: ChatRef,
                user_id: str) -> Click:
    """Answer the question a button belongs to. Raises StorageUnavailable when the bridge
    cannot tell now (nothing was answered: the click can be offered again)."""
    parsed = decode(data)
    if parsed is None:
        return Click(None, NOT_OURS)
    if not await bridge.is_allowed(chat.platform, user_id):
        return Click(None, NOT_ALLOWED)
    dialog_id, choice = parsed
    answer = asked.answer(dialog_id, choice)
    if answer is None:
        return Click(None, CLOSED)
    shown = await bridge.answer_dialog(dialog_id, chat, user_id, answer)
    if shown is None:
        return Click(None, CLOSED)
    return Click(shown, answered_line(shown))
