"""The durable state in SQLite: one connection with group commit, numbered migrations, and one
module per table group."""

from picobridge.store.store import (
    OPEN_STATUSES,
    ChatInfo,
    Store,
    StoredMessage,
    StoredReply,
    StoreError,
)

__all__ = ["OPEN_STATUSES", "ChatInfo", "Store", "StoreError", "StoredMessage", "StoredReply"]
