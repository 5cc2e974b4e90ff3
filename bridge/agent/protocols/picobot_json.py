"""picobot's JSON channel (`picobot agent --json`), see shared/seeds/picobot-json-channel.md.

Sessions are sent as plain ids and come back scoped as "json:<id>"; `decode` strips the scope
so the router only ever sees the ids it chose.
"""

from __future__ import annotations

from typing import Any

from picobridge.agent.port import (
    AgentEvent,
    AgentRequest,
    Failure,
    Pong,
    Progress,
    Ready,
    Reply,
    Unknown,
)
from picobridge.contract import Attachment

SESSION_SCOPE = "json:"

_PROGRESS_KINDS = {
    "text_delta": "text",
    "reasoning_delta": "reasoning",
    "tool_call_start": "tool_start",
    "tool_call_done": "tool_done",
}


def _attachment(att: Attachment) -> dict[str, str]:
    if att.content is not None:
        return {"name": att.name, "content": att.content}
    # The agent runs on the same host: a saved file is handed over by its path.
    details = [f"The user sent a file that was saved to {att.path}"]
    if att.size is not None:
        details.append(f"size: {att.size} bytes")
    if att.mime:
        details.append(f"type: {att.mime}")
    return {"name": att.name, "content": "\n".join(details)}


def _session(record: dict[str, Any]) -> str | None:
    value = record.get("session")
    if not isinstance(value, str) or not value:
        return None
    return value.removeprefix(SESSION_SCOPE)


class PicobotCodec:
    name = "picobot-json"

    def message(self, request: AgentRequest) -> dict[str, Any]:
        record: dict[str, Any] = {"type": "message", "content": request.text,
                                  "session": request.session}
        if request.attachments:
            record["attachments"] = [_attachment(a) for a in request.attachments]
        return record

    def ping(self) -> dict[str, Any]:
        return {"type": "ping"}

    def shutdown(self) -> dict[str, Any]:
        return {"type": "shutdown"}

    def decode(self, record: dict[str, Any]) -> AgentEvent:
        kind = record.get("type")
        if kind == "response":
            content = record.get("content")
            return Reply(_session(record), content if isinstance(content, str) else str(content))
        if kind == "progress":
            event = str(record.get("event", ""))
            text = record.get("text")
            return Progress(_session(record), _PROGRESS_KINDS.get(event, event),
                            text if isinstance(text, str) else "", str(record.get("name") or ""))
        if kind == "error":
            code = record.get("code")
            return Failure(_session(record), str(record.get("message") or "unknown error"),
                           code if isinstance(code, str) else None)
        if kind == "ready":
            return Ready()
        if kind == "pong":
            return Pong()
        return Unknown(record)
