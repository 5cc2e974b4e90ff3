"""The agent's questions as inline keyboards, and the callback queries their buttons send.

A confirm shows Yes / No, a select one button per option, both with Cancel (the data format
is in adapters/common/buttons.py). A click arrives as a `callback_query` update and goes
through the same pipeline as messages (intake.py): in order with the chat's messages, its
update confirmed only once handled, held while the store cannot answer. Every callback
query is answered (Telegram shows a spinner on the button until then), with a short note
when the click did not count. After an answer that counted, the question's message shows
it and loses its keyboard, so its buttons stop working.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from telegram.error import TelegramError

from picobridge.adapters.common.buttons import (
    CLOSED,
    Asked,
    Click,
    answered_line,
    buttons,
    click,
    decode,
    label,
)
from picobridge.adapters.telegram.errors import check_cancelled
from picobridge.adapters.telegram.normalise import chat_ref
from picobridge.adapters.telegram.render import utf16_len
from picobridge.adapters.telegram.storage import StorageWait
from picobridge.contract import BridgeLink, Dialog, DialogKind

log = logging.getLogger("picobridge.telegram")

LABEL_CHARS = 40
# answerCallbackQuery shows at most 200 characters.
NOTICE_CHARS = 200
TEXT_LIMIT = 4096


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


class Clicks:
    def __init__(self, bot: Bot, bridge: BridgeLink, asked: Asked, storage: StorageWait,
                 scrub: Callable[[str], str]) -> None:
        self._bot = bot
        self._bridge = bridge
        self._asked = asked
        self._storage = storage
        self._scrub = scrub

    async def handle(self, query: CallbackQuery) -> None:
        """One click; returns once it is answered (StorageUnavailable only when storage
        outages do not hold, as for webhooks)."""
        message = query.message
        if not isinstance(message, Message) or not message.is_accessible:
            # A button of an inline message or of one too old to be read: no chat to answer
            # in, and no question lives that long.
            await self._notify(query, CLOSED)
            return
        chat = chat_ref(message)
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
        await self._notify(query, result.notice)
        if result.shown is not None:
            await self._show_answer(message, result.shown)

    async def _notify(self, query: CallbackQuery, text: str) -> None:
        try:
            await self._bot.answer_callback_query(query.id, text=text[:NOTICE_CHARS])
        except TelegramError as exc:
            # Telegram forgets a query after a while (a click held through an outage): the
            # answer itself counted; only the note is lost.
            check_cancelled()
            log.debug("callback query not answered: %s", self._scrub(str(exc)))

    async def _show_answer(self, message: Message, shown: str) -> None:
        """The question shows its answer and loses its keyboard (no reply_markup)."""
        line = answered_line(shown)
        text = message.text
        try:
            if text is not None and utf16_len(text) + 2 + utf16_len(line) <= TEXT_LIMIT:
                await self._bot.edit_message_text(
                    f"{text}\n\n{line}", chat_id=message.chat.id,
                    message_id=message.message_id, entities=message.entities or None)
            else:
                await self._bot.edit_message_reply_markup(chat_id=message.chat.id,
                                                          message_id=message.message_id)
        except TelegramError as exc:
            check_cancelled()
            log.info("the answered question %d keeps its buttons (%s); they no longer count",
                     message.message_id, self._scrub(str(exc)))
