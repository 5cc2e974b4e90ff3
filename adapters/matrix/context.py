"""What was said in a room or thread before the bot was first mentioned there.

Someone who mentions the bot in a busy room ("what do you make of this?") means what came
before. The first message the bridge gets from such a room or thread therefore carries the
latest earlier messages along, marked as context. Best effort: when the homeserver is slow or
refuses, the message goes on alone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mautrix.api import Method, Path
from mautrix.client import ClientAPI
from mautrix.errors import MatrixError

from picobridge.adapters.matrix.normalise import strip_reply_fallback

log = logging.getLogger("picobridge.matrix")

RECENT_MESSAGES = 20
MAX_CHARS = 8000
FETCH_TIMEOUT = 5.0
HEADER = "Earlier in this Matrix {where} (before I was mentioned):"
FOOTER = "The message for you:"


def _line(event: dict[str, Any], me: str) -> str | None:
    content = event.get("content")
    sender = event.get("sender")
    if event.get("type") != "m.room.message" or not isinstance(content, dict) \
            or not isinstance(sender, str):
        return None
    body = strip_reply_fallback(str(content.get("body") or "")).strip()
    if not body:
        return None
    who = "me" if sender == me else sender[1:].split(":", 1)[0]
    return f"{who}: {body}"


async def _thread(client: ClientAPI, room: str, root: str) -> list[dict[str, Any]]:
    first = await client.api.request(Method.GET, Path.v3.rooms[room].event[root])
    related = await client.api.request(
        Method.GET, Path.v1.rooms[room].relations[root]["m.thread"],
        query_params={"dir": "b", "limit": str(RECENT_MESSAGES)})
    chunk = related.get("chunk") if isinstance(related, dict) else None
    events = [e for e in chunk or () if isinstance(e, dict)]
    return [first, *reversed(events)]


async def _room(client: ClientAPI, room: str, event_id: str) -> list[dict[str, Any]]:
    around = await client.api.request(
        Method.GET, Path.v3.rooms[room].context[event_id],
        query_params={"limit": str(2 * RECENT_MESSAGES)})
    before = around.get("events_before") if isinstance(around, dict) else None
    return list(reversed([e for e in before or () if isinstance(e, dict)]))


async def earlier(client: ClientAPI, me: str, room: str, thread: str | None,
                  event_id: str) -> str:
    """The earlier messages as a block of text for the agent ('' when none or unreachable)."""
    try:
        async with asyncio.timeout(FETCH_TIMEOUT):
            events = await (_thread(client, room, thread) if thread is not None
                            else _room(client, room, event_id))
    except (MatrixError, TimeoutError) as exc:
        log.info("earlier messages of %s not fetched (%s)", room, exc.__class__.__name__)
        return ""
    lines = [line for e in events if e.get("event_id") != event_id
             and (line := _line(e, me)) is not None][-RECENT_MESSAGES:]
    text = "\n".join(lines)[-MAX_CHARS:]
    if not text:
        return ""
    where = "thread" if thread is not None else "room"
    return f"{HEADER.format(where=where)}\n{text}\n\n{FOOTER}\n"
