"""prime-rpc records read and written: the answer in an agent_end, progress events, dialogs,
and a prompt's text and images. Pure functions; the driver (prime_rpc.py) keeps the state."""

from __future__ import annotations

import base64
import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any

from picobridge.agent.port import AgentRequest, DialogRequest
from picobridge.contract import Attachment, DialogKind, agent_image_type
from picobridge.contract.sniff import HEAD_BYTES

log = logging.getLogger("picobridge.agent")

MAX_IMAGE_BYTES = 20 * 1024 * 1024


def assistant_text(messages: Any) -> tuple[str, str | None, str | None]:
    """The last assistant message's text, its stopReason and its errorMessage."""
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "assistant":
                parts = message.get("content")
                text = "".join(p.get("text", "") for p in parts if isinstance(p, dict)
                               and p.get("type") == "text" and isinstance(p.get("text"), str)
                               ) if isinstance(parts, list) else ""
                reason, error = message.get("stopReason"), message.get("errorMessage")
                return (text, reason if isinstance(reason, str) else None,
                        error if isinstance(error, str) else None)
    return "", None, None


def dialog_request(session: str | None, ui_id: str, method: Any,
            record: dict[str, Any]) -> DialogRequest | None:
    if session is None or method not in {k.value for k in DialogKind}:
        return None

    def text(key: str) -> str:
        value = record.get(key)
        return value if isinstance(value, str) else ""

    options = record.get("options")
    timeout = record.get("timeout")
    return DialogRequest(
        session, ui_id, DialogKind(method), text("title"), text("message") or text("placeholder"),
        tuple(str(o) for o in options) if isinstance(options, list) else (), text("prefill"),
        timeout / 1000 if isinstance(timeout, int | float) and timeout > 0 else None)


def progress_of(kind: Any, record: dict[str, Any]) -> tuple[str, str, str] | None:
    """(kind, text, tool) of a progress event, or None."""
    if kind == "message_update":
        event = record.get("assistantMessageEvent")
        if isinstance(event, dict) and isinstance(event.get("delta"), str):
            if event.get("type") == "text_delta":
                return "text", event["delta"], ""
            if event.get("type") == "thinking_delta":
                return "reasoning", event["delta"], ""
        return None
    tool = record.get("toolName")
    tool = tool if isinstance(tool, str) else ""
    if kind == "tool_execution_start":
        return "tool_start", "", tool
    if kind == "tool_execution_end":
        return "tool_done", "", tool
    if kind == "auto_retry_start":
        attempt, most = record.get("attempt"), record.get("maxAttempts")
        return "status", f"The model failed; trying again ({attempt} of {most})…", ""
    if kind == "compaction_start":
        return "status", "Compacting the conversation's memory…", ""
    return None


def prompt_text(request: AgentRequest, images: Collection[int] = ()) -> str:
    """The prompt: attachments not sent as images (indices in `images`) are named in it."""
    return agent_text(request.text, request.attachments, images)


def agent_text(text: str, attachments: tuple[Attachment, ...],
                 images: Collection[int] = ()) -> str:
    """A message's text for the agent (a prompt's, a steer's): attachments not sent as images
    (indices in `images`) are named in it."""
    blocks = []
    for index, att in enumerate(attachments):
        if att.content is not None:
            blocks.append(f"[Attachment: {att.name}]\n{att.content}\n[/Attachment]\n\n")
        elif index not in images:
            details = f"size: {att.size} bytes, " if att.size is not None else ""
            blocks.append(f"[Attachment: {att.name}] The user sent a file that was saved to "
                          f"{att.path} ({details}type: {att.mime or 'unknown'})\n\n")
    return "".join(blocks) + text


def images_of(attachments: tuple[Attachment, ...]) -> dict[int, dict[str, str]]:
    """The attachments that go as images, by index: only those whose bytes are an image
    format the agent takes (a sender's image/png label proves nothing), within the size."""
    images = {}
    for index, att in enumerate(attachments):
        if att.content is not None or att.path is None:
            continue
        try:
            data = Path(att.path).read_bytes()
        except OSError as exc:
            log.warning("attachment %s could not be read for the agent: %s", att.name,
                        exc.strerror)
            continue
        mime = agent_image_type(data[:HEAD_BYTES])
        if mime is None:
            if (att.mime or "").startswith("image/"):
                log.info("attachment %s is labelled %s but its bytes are no image the agent "
                         "takes: sent as a file", att.name, att.mime)
            continue
        if len(data) <= MAX_IMAGE_BYTES:
            images[index] = {"type": "image", "data": base64.b64encode(data).decode("ascii"),
                             "mimeType": mime}
    return images


def move_aside(path: str, aside: str) -> None:
    source = Path(path)
    if source.exists():
        source.rename(aside)

