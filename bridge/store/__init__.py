"""The durable state in SQLite: one connection with group commit, numbered migrations, and one
module per table group.

The names load on first use (picobridge/lazy.py): the command line's reads with sqlite3 alone
(store/reading.py) are in this package too, and must not import the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from picobridge.lazy import lazy_names

if TYPE_CHECKING:
    from picobridge.store.reading import StoreError
    from picobridge.store.records import OPEN_STATUSES, ChatInfo, StoredMessage, StoredReply
    from picobridge.store.store import Store

__all__ = ["OPEN_STATUSES", "ChatInfo", "Store", "StoreError", "StoredMessage", "StoredReply"]

# Each module and the names it gives.
_MODULES: dict[str, tuple[str, ...]] = {
    "reading": ("StoreError",),
    "records": ("OPEN_STATUSES", "ChatInfo", "StoredMessage", "StoredReply"),
    "store": ("Store",),
}

if not TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
