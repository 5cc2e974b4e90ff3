"""Where a soak chat's order broke, read from the run's copy of the database.

A message passes three orders on its way back: intake (the store's ids for the chat's messages),
the answers as stored (the outbox's ids, each reply with the messages it settles, in the order
the turn held them) and delivery (what the fake platform recorded). The first of the three that
is out of order is the stage that broke it; the report says which, with the stored replies and
the kill times on one clock, so that a failed run explains itself.
"""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

_NUMBER = re.compile(r"\bm(\d{3})\b")


def first_appearances(groups: Sequence[Sequence[int]]) -> list[int]:
    seen: list[int] = []
    for group in groups:
        seen += [n for n in group if n not in seen]
    return seen


def _inverted(order: list[int]) -> str:
    for before, after in itertools.pairwise(order):
        if after < before:
            return f"out of order ({before} before {after})"
    return "in order"


def stage_report(db: Path, chat_key: str, delivered: list[int], kills: Sequence[float],
                 clock_offset: float) -> list[str]:
    """Lines for a chat answered out of order: each stage's order, then the stored replies.
    `clock_offset` turns the store's wall-clock times into the soak's monotonic clock, the
    one `kills` are on."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return [f"{chat_key}: no database copy to explain it ({exc})"]
    try:
        inbound = con.execute("SELECT id, text, status, attempts FROM inbound"
                              " WHERE chat_key = ? ORDER BY id", (chat_key,)).fetchall()
        outbox = con.execute("SELECT id, settles, status, attempts, created_at, sent_at"
                             " FROM outbox WHERE chat_key = ? ORDER BY id", (chat_key,)).fetchall()
    finally:
        con.close()
    number = {row[0]: int(m[1]) for row in inbound if (m := _NUMBER.search(row[1]))}
    intake = [number[row[0]] for row in inbound if row[0] in number]
    settled = [[number[i] for i in json.loads(row[1] or "[]") if i in number] for row in outbox]
    stored = first_appearances(settled)
    lines = [f"{chat_key}: intake {_inverted(intake)}; answers as stored {_inverted(stored)}; "
             f"delivered {_inverted(delivered)}; kills at "
             + ", ".join(f"{k:.3f}" for k in kills)]
    for row in inbound:
        if row[0] in number and (row[2] != "delivered" or row[3] != 1):
            lines.append(f"  message {row[0]} m{number[row[0]]:03d}: {row[2]}, "
                         f"{row[3]} attempt(s)")
    for row, numbers in zip(outbox, settled, strict=True):
        sent = f", sent at {row[5] - clock_offset:.3f}" if row[5] is not None else ""
        lines.append(f"  reply {row[0]} answers {numbers}: stored at "
                     f"{row[4] - clock_offset:.3f}{sent}, {row[2]}, {row[3]} attempt(s)")
    return lines
