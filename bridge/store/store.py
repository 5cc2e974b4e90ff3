"""The durable state: chats and their sessions, every inbound message until its reply is
delivered, the outbox, platform cursors, access grants and which agent worker serves a
session.

Each table group is a mixin over the one connection (`Database`) and can be read on its own;
inbound messages and replies also create a chat's row through `chats.ensure_chat` when they
are the first thing a chat writes. Callers see a single `Store`.
"""

from __future__ import annotations

from picobridge.store.affinity import AffinityTable
from picobridge.store.chats import ChatTables
from picobridge.store.connection import Database
from picobridge.store.cursors import CursorTable
from picobridge.store.dead_letters import DeadLetterTable
from picobridge.store.erasure import ErasureTable
from picobridge.store.figures import Figures
from picobridge.store.grants import GrantTable
from picobridge.store.inbound import InboundTable
from picobridge.store.menus import MenuTable
from picobridge.store.queued import QueuedTable
from picobridge.store.quotas import QuotaTable
from picobridge.store.replies import ReplyTable
from picobridge.store.settings import SettingsTables


class Store(ChatTables, InboundTable, ReplyTable, CursorTable, GrantTable, AffinityTable,
            SettingsTables, Figures, QueuedTable, DeadLetterTable, QuotaTable, ErasureTable,
            MenuTable, Database):
    pass
