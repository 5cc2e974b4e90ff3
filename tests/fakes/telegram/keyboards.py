"""Inline keyboards in the fake Telegram: the reply_markup the bot sends (checked as the Bot API
checks it; api.py puts it on the messages), people pressing its buttons (callback_query
updates) and answerCallbackQuery.

Strict where Telegram is: callback_data is 1-64 bytes, a button has a text and exactly one
action, a keyboard has at most 100 buttons, a callback query is answered once (and only one
Telegram sent), answer texts are at most 200 characters. A person can only press a button
that is on the message as it is now (`press_button`): once the bot removed the keyboard, no
click on it reaches the bot. Updates Telegram would never send (a click on a button that is
not there, in another chat) are built with `callback_query_update` and queued as they are.
"""

from __future__ import annotations

import copy
import itertools

from tests.fakes.server import JSON
from tests.fakes.telegram.base import MethodHandler
from tests.fakes.telegram.model import bad_request
from tests.fakes.telegram.users import TelegramUsers

MAX_BUTTONS = 100
MAX_CALLBACK_DATA = 64  # bytes
MAX_ANSWER_TEXT = 200
_BUTTON_ACTIONS = ("url", "callback_data", "web_app", "login_url", "switch_inline_query",
                   "switch_inline_query_current_chat", "switch_inline_query_chosen_chat",
                   "copy_text", "callback_game", "pay")
_QUERY_INVALID = "query is too old and response timeout expired or query ID is invalid"


def check_markup(markup: object) -> JSON | None:
    """The reply_markup of a sending or editing call, as Telegram validates an inline
    keyboard; None when there is none. (Reply keyboards are not modelled: the bridge sends
    none.)"""
    if markup is None:
        return None
    if not isinstance(markup, dict) or "inline_keyboard" not in markup:
        raise bad_request("can't parse reply keyboard markup JSON object")
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad_request('field "inline_keyboard" must be an Array of Arrays')
    count = 0
    for row in rows:
        for button in row:
            _check_button(button)
            count += 1
    if count > MAX_BUTTONS:
        raise bad_request("reply markup is too long")
    return {"inline_keyboard": [[dict(b) for b in row] for row in rows if row]}


def _check_button(button: object) -> None:
    if not isinstance(button, dict):
        raise bad_request("can't parse inline keyboard button: InlineKeyboardButton must be "
                          "an Object")
    text = button.get("text")
    if not isinstance(text, str) or not text.strip():
        raise bad_request("BUTTON_TEXT_EMPTY")
    actions = [key for key in _BUTTON_ACTIONS if key in button]
    if not actions:
        raise bad_request("text buttons are unallowed in the inline keyboard")
    if len(actions) > 1:
        raise bad_request("can't parse inline keyboard button: more than one action")
    data = button.get("callback_data")
    if "callback_data" in button and (not isinstance(data, str) or not
                                      1 <= len(data.encode("utf-8")) <= MAX_CALLBACK_DATA):
        raise bad_request("BUTTON_DATA_INVALID")


def buttons_of(message: JSON | None) -> list[JSON]:
    """The inline buttons on a message as it is now, row by row."""
    markup = (message or {}).get("reply_markup") or {}
    return [button for row in markup.get("inline_keyboard", []) for button in row]


class TelegramKeyboards(TelegramUsers):
    """Buttons: pressing them, and the methods that answer and change them."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.callback_answers: dict[str, JSON] = {}  # query id -> answerCallbackQuery params
        self._open_queries: set[str] = set()
        self._query_ids = itertools.count(4_815_162_342_000)

    def methods(self) -> dict[str, MethodHandler]:
        return {**super().methods(), "answerCallbackQuery": self._answer_callback_query}

    # ---- people pressing buttons ------------------------------------------------------------

    def callback_query_update(self, chat_id: int, message_id: int, user_id: int, data: str,
                              *, message: JSON | None = None, enqueue: bool = True) -> JSON:
        """A callback_query update as Telegram shapes it, for any data on any message
        (`message` replaces the message it carries); queued unless enqueue=False."""
        query_id = str(next(self._query_ids))
        carried = message if message is not None else self._messages.get((chat_id, message_id))
        if carried is None:
            raise KeyError(f"no message {message_id} in chat {chat_id}")
        query: JSON = {"id": query_id, "from": {"id": user_id, "is_bot": False,
                                                 "first_name": "Test", "username": "tester",
                                                 "language_code": "en"},
                       "message": copy.deepcopy(carried),
                       "chat_instance": str(-abs(hash(("instance", chat_id))) % 10**18),
                       "data": data}
        self._open_queries.add(query_id)
        update: JSON = {"callback_query": query}
        if enqueue:
            return self.enqueue_update(update)
        return update

    def press_button(self, chat_id: int, message_id: int, user_id: int, *,
                     text: str | None = None, data: str | None = None) -> JSON:
        """A person presses a button (found by its text or its data) of a message as it is
        now; returns the queued update. Raises LookupError when there is no such button, as a
        person cannot press what is not on screen."""
        message = self._messages.get((chat_id, message_id))
        for button in buttons_of(message):
            if (text is None or button.get("text") == text) and \
                    (data is None or button.get("callback_data") == data):
                if "callback_data" not in button:
                    raise LookupError(f"button {button.get('text')!r} sends no callback query")
                return self.callback_query_update(chat_id, message_id, user_id,
                                                  button["callback_data"])
        raise LookupError(f"no button {text or data!r} on message {message_id} in chat "
                          f"{chat_id}")

    async def wait_for_callback_answer(self, query_id: str, timeout: float = 10.0) -> JSON:
        """The answerCallbackQuery parameters the bot answered query `query_id` with."""
        return await self.wait_for(lambda: self.callback_answers.get(query_id),
                                   f"the answer to callback query {query_id}", timeout)

    # ---- the bot's methods -------------------------------------------------------------------

    async def _answer_callback_query(self, params: JSON) -> bool:
        query_id = params.get("callback_query_id")
        if not isinstance(query_id, str) or query_id not in self._open_queries:
            raise bad_request(_QUERY_INVALID)
        text = params.get("text")
        if text is not None and (not isinstance(text, str) or len(text) > MAX_ANSWER_TEXT):
            raise bad_request("MESSAGE_TOO_LONG")
        self._open_queries.discard(query_id)
        self.callback_answers[query_id] = dict(params)
        return True
