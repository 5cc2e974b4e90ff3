"""Reading updates one at a time, and telling the operator what went wrong without showing what
the user wrote.

python-telegram-bot parses a whole getUpdates batch at once: one update of an unexpected shape
fails all of them, and the library logs the raw batch (users' messages) at CRITICAL. Here each
update is read on its own, checked for the fields the bridge relies on, and one that does not
fit is reported as `Malformed` with a reason that never quotes its content, so that it can be
confirmed and skipped instead of coming back forever.
"""

from __future__ import annotations

import traceback
from pathlib import PurePath

from telegram import Bot, CallbackQuery, Chat, Message, Update

# What parsing an answer of the wrong shape raises inside python-telegram-bot (a proxy's
# answer, a Bot API change): a missing key, a string where an object belongs, and so on.
UNREADABLE = (TypeError, ValueError, KeyError, AttributeError, IndexError)

_OBJECT_KEYS = ("message", "edited_message", "callback_query")
_TEXT_FIELDS = ("text", "caption", "media_group_id")


class Malformed(Exception):
    """An update that is not what the Bot API promises. The message says what is wrong in
    general terms and never contains the update's content."""


def update_id_of(raw: object) -> int | None:
    """The update's id when it has a usable one (the offset needs it to confirm the update)."""
    if isinstance(raw, dict):
        value = raw.get("update_id")
        if _is_int(value):
            assert isinstance(value, int)
            return value
    return None


def parse_update(raw: object, bot: Bot) -> Update:
    """One update from its JSON; raises Malformed when it is not one the bridge can read."""
    if not isinstance(raw, dict):
        raise Malformed(f"not an object but {_kind(raw)}")
    if update_id_of(raw) is None:
        raise Malformed("it has no update_id")
    for key in _OBJECT_KEYS:
        if key in raw and not isinstance(raw[key], dict):
            raise Malformed(f"its {key} is {_kind(raw[key])}, not an object")
    try:
        update = Update.de_json(dict(raw), bot)
    except UNREADABLE as exc:
        raise Malformed(f"it does not parse ({exc.__class__.__name__})") from None
    for message in (update.message, update.edited_message):
        if message is not None:
            check_message(message)
    if update.callback_query is not None:
        check_callback(update.callback_query)
    return update


def check_message(message: Message) -> None:
    """The fields normalising a message relies on, checked for their types."""
    chat = message.chat
    if not isinstance(chat, Chat) or not _is_int(chat.id) or not isinstance(chat.type, str):
        raise Malformed("a message without a valid chat")
    if not _is_int(message.message_id):
        raise Malformed("a message without a valid message_id")
    user = message.from_user
    if user is not None and not _is_int(user.id):
        raise Malformed("a message whose sender has no valid id")
    if message.message_thread_id is not None and not _is_int(message.message_thread_id):
        raise Malformed("a message with an invalid message_thread_id")
    for field in _TEXT_FIELDS:
        value = getattr(message, field)
        if value is not None and not isinstance(value, str):
            raise Malformed(f"a message whose {field} is {_kind(value)}, not text")


def check_callback(query: CallbackQuery) -> None:
    """The fields answering a button's click relies on (its message may be inaccessible:
    then only its chat is there)."""
    if not isinstance(query.id, str) or not query.id:
        raise Malformed("a callback query without a valid id")
    if not _is_int(getattr(query.from_user, "id", None)):
        raise Malformed("a callback query whose sender has no valid id")
    if query.data is not None and not isinstance(query.data, str):
        raise Malformed(f"a callback query whose data is {_kind(query.data)}, not text")
    message = query.message
    if isinstance(message, Message) and message.is_accessible:
        check_message(message)
    elif message is not None and (not isinstance(message.chat, Chat)
                                  or not _is_int(message.chat.id)):
        raise Malformed("a callback query whose message has no valid chat")


def describe_failure(exc: BaseException) -> str:
    """The exception's class and where it was raised, without its message (which may quote
    what the user sent): enough to find the bug, nothing to leak."""
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = " < ".join(f"{PurePath(f.filename).name}:{f.lineno} in {f.name}"
                       for f in reversed(frames))
    return f"{exc.__class__.__name__} at {where}" if where else exc.__class__.__name__


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else value.__class__.__name__
