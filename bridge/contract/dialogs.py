"""Questions the agent asks the person in a chat while it works on their message (prime-rpc's
extension dialogs): confirm, pick one of several options, or type a text.

A question travels as an `OutgoingReply` of kind QUESTION with its `Dialog` attached. Every
platform can show its text, which says how to answer by message; a platform with buttons
shows them too and passes a click on as `BridgeLink.answer_dialog`. The person's next message
in the chat answers as well. A question closed any other way (a typed answer, its time up, its
turn over) is reported to the platform as `DialogClosed` (`Adapter.dialog_closed`), so that
buttons it showed go and the question says how it ended.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DialogKind(enum.StrEnum):
    CONFIRM = "confirm"  # yes or no
    SELECT = "select"  # one of `options`
    INPUT = "input"  # a line of text
    EDITOR = "editor"  # a longer text, maybe starting from `prefill`


@dataclass(frozen=True, slots=True)
class Dialog:
    id: str  # unique while the daemon runs; what a button's callback data carries
    kind: DialogKind
    title: str
    message: str = ""
    options: tuple[str, ...] = ()
    prefill: str = ""


@dataclass(frozen=True, slots=True)
class DialogAnswer:
    value: str | None = None  # select, input, editor
    confirmed: bool | None = None  # confirm
    cancelled: bool = False

    def describe(self) -> str:
        """The answer in a few words, as the question shows it once answered."""
        if self.cancelled:
            return "cancelled"
        if self.confirmed is not None:
            return "yes" if self.confirmed else "no"
        return self.value or ""


class DialogEnd(enum.StrEnum):
    """How a question closed other than by one of its own buttons (a click shows itself)."""

    ANSWERED = "answered"  # by a message typed in the chat
    EXPIRED = "expired"  # nobody answered in the time allowed
    # Nobody waits for it any more: its turn ended, a newer question took its place, or the
    # daemon stops.
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class DialogClosed:
    dialog_id: str
    end: DialogEnd
    answer: DialogAnswer | None = None  # the typed answer (ANSWERED only)
