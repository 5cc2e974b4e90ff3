"""The durable state in SQLite: one connection with group commit, numbered migrations, and one
module per table group."""

from picobridge.store.connection import StoreError
from picobridge.store.records import OPEN_STATUSES, ChatInfo, StoredMessage, StoredReply
from picobridge.store.store import Store

__all__ = ["OPEN_STATUSES", "ChatInfo", "Store", "StoreError", "StoredMessage", "StoredReply"]
