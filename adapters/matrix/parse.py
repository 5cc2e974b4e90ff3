"""A /sync response read into what the adapter acts on, one room at a time.

The response is taken apart defensively: a room or an event of an unexpected shape is left
out (and counted for the log), never fatal for the rest of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Malformed(Exception):
    """The response is not a /sync answer at all."""


@dataclass(frozen=True, slots=True)
class JoinedRoom:
    room_id: str
    events: list[dict[str, Any]]
    state: list[dict[str, Any]]
    # The timeline has a gap before these events (more happened than the filter's limit).
    limited: bool = False
    prev_batch: str | None = None
    joined_count: int | None = None


@dataclass(frozen=True, slots=True)
class Invite:
    room_id: str
    inviter: str | None
    # Whether the inviter marked the room a direct chat.
    is_direct: bool


@dataclass(slots=True)
class SyncBatch:
    next_batch: str
    joined: list[JoinedRoom] = field(default_factory=list)
    invites: list[Invite] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    skipped: int = 0


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _events(container: Any, key: str = "events") -> list[dict[str, Any]]:
    if not isinstance(container, dict):
        return []
    events = container.get(key)
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _rooms(data: dict[str, Any], section: str) -> dict[str, Any]:
    rooms = data.get("rooms")
    found = rooms.get(section) if isinstance(rooms, dict) else None
    return found if isinstance(found, dict) else {}


def _joined(room_id: str, room: dict[str, Any]) -> JoinedRoom:
    timeline = as_dict(room.get("timeline"))
    summary = as_dict(room.get("summary"))
    count = summary.get("m.joined_member_count")
    prev = timeline.get("prev_batch")
    return JoinedRoom(room_id, _events(timeline), _events(room.get("state")),
                      limited=timeline.get("limited") is True,
                      prev_batch=prev if isinstance(prev, str) else None,
                      joined_count=count if isinstance(count, int) else None)


def _invite(room_id: str, room: dict[str, Any], me: str) -> Invite:
    inviter, direct = None, False
    for event in _events(room.get("invite_state")):
        content = event.get("content")
        if event.get("type") == "m.room.member" and event.get("state_key") == me \
                and isinstance(content, dict) and content.get("membership") == "invite":
            sender = event.get("sender")
            inviter = sender if isinstance(sender, str) else None
            direct = content.get("is_direct") is True
    return Invite(room_id, inviter, direct)


def parse_sync(data: Any, me: str) -> SyncBatch:
    if not isinstance(data, dict) or not isinstance(data.get("next_batch"), str):
        raise Malformed("no next_batch")
    batch = SyncBatch(data["next_batch"])
    for room_id, room in _rooms(data, "join").items():
        if isinstance(room, dict):
            batch.joined.append(_joined(room_id, room))
        else:
            batch.skipped += 1
    for room_id, room in _rooms(data, "invite").items():
        if isinstance(room, dict):
            batch.invites.append(_invite(room_id, room, me))
        else:
            batch.skipped += 1
    batch.left.extend(_rooms(data, "leave"))
    return batch
