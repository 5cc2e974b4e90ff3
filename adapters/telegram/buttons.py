"""The agent's questions as inline keyboards, and the callback queries their buttons send.

A confirm shows Yes / No, a select one button per option, both with Cancel (the data format
is in adapters/common/buttons.py). A click arrives as a `callback_query` update and goes
through the same pipeline as messages (intake.py): in order with the chat's messages, its
update confirmed only once handled, held while the store cannot answer. Every callback
query is answered (Telegram shows a spinner on the button until then), with a short note
when the click did not count. After an answer that counted, the question's message shows
it and loses its keyboard, so its buttons stop working. A question closed otherwise (typed
answer, timeout, its turn over) does the same through `Closings`, which knows its message
from the send.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from telegram.error import RetryAfter, TelegramError

from picobridge.adapters.common.buttons import (
    CLOSED,
    Asked,
    Click,
    QuestionMessages,
    answered_line,
    buttons,
    click,
    closed_line,
    decode,
    label,
)
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.normalise import PLATFORM, chat_ref
from picobridge.adapters.telegram.render import utf16_len
from picobridge.adapters.telegram.storage import StorageWait
from picobridge.contract import BridgeLink, Dialog, DialogClosed, DialogKind

log = logging.getLogger("picobridge.telegram")

LABEL_CHARS = 40
# answerCallbackQuery shows at most 200 characters.
NOTICE_CHARS = 200
TEXT_LIMIT = 4096
# Flood control on a question's closing edit is waited out once when it asks for no longer
# than this (the bridge gives the whole closing 30 s); longer, and the buttons stay.
OUTCOME_RETRY_WAIT = 10.0


def keyboard(dialog: Dialog | None, asked: Asked) -> InlineKeyboardMarkup | None:
    """The inline keyboard of a question, or None when it is answered by typing."""
    found = buttons(dialog) if dialog is not None else None
    if dialog is None or found is None:
        return None
    asked.remember(dialog)
    keys = [InlineKeyboardButton(label(b.label, LABEL_CHARS), callback_data=b.data)
            for b in found]
    *choices, cancel = keys
    # Yes and No side by side; options one per row, as they may be long.
    rows = [choices] if dialog.kind is DialogKind.CONFIRM else [[key] for key in choices]
    return InlineKeyboardMarkup([*rows, [cancel]])


async def show_outcome(bot: Bot, message: Message, line: str,
                       scrub: Callable[[str], str]) -> None:
    """The question's message shows `line` under its text and loses its keyboard (an edit
    without reply_markup); one too long for that, or a file, only loses the keyboard.
    Best effort: flood control asking for a short wait is waited out once; any other refusal
    (the message deleted, a long wait) is logged and the buttons stay."""
    try:
        try:
            await _edit_outcome(bot, message, line)
        except RetryAfter as exc:
            wait = retry_seconds(exc)
            if wait > OUTCOME_RETRY_WAIT:
                raise
            await asyncio.sleep(wait)
            await _edit_outcome(bot, message, line)
    except TelegramError as exc:
        check_cancelled()
        log.info("the closed question %d keeps its buttons (%s); they no longer count",
                 message.message_id, scrub(str(exc)))


async def _edit_outcome(bot: Bot, message: Message, line: str) -> None:
    text = message.text
    if text is not None and utf16_len(text) + 2 + utf16_len(line) <= TEXT_LIMIT:
        await bot.edit_message_text(
            f"{text}\n\n{line}", chat_id=message.chat.id,
            message_id=message.message_id, entities=message.entities or None)
    else:
        await bot.edit_message_reply_markup(chat_id=message.chat.id,
                                            message_id=message.message_id)


class Closings:
    """Questions closed other than by their own buttons (Adapter.dialog_closed)."""

    def __init__(self, shown: QuestionMessages[Message], tasks: TaskSet,
                 scrub: Callable[[str], str]) -> None:
        self._shown = shown
        self._tasks = tasks
        self._scrub = scrub

    def sent(self, bot: Bot, dialog_id: str, message: Message) -> None:
        """The question's keyboard is on `message`; if it closed meanwhile, it shows that
        now, in the background (the chat's next reply does not wait for it)."""
        closed = self._shown.sent(dialog_id, message)
        if closed is not None:
            self._tasks.spawn(show_outcome(bot, message, closed_line(closed), self._scrub),
                              name="telegram-question-closed")

    async def closed(self, bot: Bot | None, closed: DialogClosed) -> None:
        message = self._shown.closed(closed)
        if message is not None and bot is not None:
            await show_outcome(bot, message, closed_line(closed), self._scrub)


class Clicks:
    def __init__(self, bot: Bot, bridge: BridgeLink, asked: Asked, storage: StorageWait,
                 scrub: Callable[[str], str],
                 shown: QuestionMessages[Message] | None = None, platform: str = PLATFORM) -> None:
        self._bot = bot
        self._platform = platform
        self._bridge = bridge
        self._asked = asked
        self._storage = storage
        self._scrub = scrub
        self._shown = shown if shown is not None else QuestionMessages()

    async def handle(self, query: CallbackQuery) -> None:
        """One click; returns once it is answered (StorageUnavailable only when storage
        outages do not hold, as for webhooks)."""
        message = query.message
        if not isinstance(message, Message) or not message.is_accessible:
            # A button of an inline message or of one too old to be read: no chat to answer
            # in, and no question lives that long.
            await self._notify(query, CLOSED)
            return
        chat = chat_ref(message, self._platform)
        user = str(query.from_user.id)
        result: Click = await self._storage.run(
            "answering a question",
            lambda: click(self._bridge, self._asked, query.data, chat, user), writes=False)
        parsed = decode(query.data)
        what = f"question {parsed[0]}" if parsed else "an unknown button"
        if result.shown is None:
            log.info("a click on %s in chat=%s by user %s did not count", what, chat.key, user)
        else:
            log.info("%s in chat=%s answered by a button", what, chat.key)
            if parsed:
                self._shown.forget(parsed[0])
        await self._notify(query, result.notice)
        if result.shown is not None:
            await show_outcome(self._bot, message, answered_line(result.shown), self._scrub)

    async def _notify(self, query: CallbackQuery, text: str) -> None:
        try:
            await self._bot.answer_callback_query(query.id, text=text[:NOTICE_CHARS])
        except TelegramError as exc:
            # Telegram forgets a query after a while (a click held through an outage): the
            # answer itself counted; only the note is lost.
            check_cancelled()
            log.debug("callback query not answered: %s", self._scrub(str(exc)))
