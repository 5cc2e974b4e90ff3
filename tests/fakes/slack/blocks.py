"""Block Kit in the fake Slack, for what picobridge sends: section blocks with a text object
(mrkdwn or plain_text) and actions blocks of buttons (the agent's questions).

Checked as Slack checks them: at most 50 blocks in a message; a section's text 1-3000
characters; at most 25 elements in an actions block; a button's text plain_text of 1-75
characters, its action_id 1-255 characters and unique in its block, its value at most 2000
characters, its style primary or danger; block ids at most 255 characters and unique in the
message. A violation answers `invalid_blocks` with an explanation in `errors`, as Slack does.
Any other block or element type is refused too: the fake does not model it, so that sending
one cannot go unnoticed.

Blocks are stored as Slack returns them later (in interaction payloads): every block gets a
block_id, plain_text gets `emoji: true` and mrkdwn `verbatim: false` unless given.
"""

from __future__ import annotations

import secrets
import string
from typing import Any

from tests.fakes.server import JSON
from tests.fakes.slack.model import SlackError

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_ACTIONS = 25
MAX_BUTTON_TEXT = 75
MAX_ACTION_ID = 255
MAX_VALUE = 2000
MAX_BLOCK_ID = 255
_BUTTON_STYLES = frozenset({"primary", "danger"})
_ALPHABET = string.ascii_letters + string.digits


def _invalid(where: str, problem: str) -> SlackError:
    return SlackError("invalid_blocks", errors=[f"{problem} [json-pointer:{where}]"])


def _text_object(value: Any, where: str, *, limit: int, plain_only: bool = False) -> JSON:
    if not isinstance(value, dict):
        raise _invalid(where, "must be an object")
    kind = value.get("type")
    allowed = {"plain_text"} if plain_only else {"plain_text", "mrkdwn"}
    if kind not in allowed:
        raise _invalid(f"{where}/type", f"must be one of {sorted(allowed)}")
    extra = set(value) - {"type", "text", "emoji" if kind == "plain_text" else "verbatim"}
    if extra:
        raise _invalid(where, f"unsupported fields {sorted(extra)}")
    text = value.get("text")
    if not isinstance(text, str) or not text:
        raise _invalid(f"{where}/text", "must be a non-empty string")
    if len(text) > limit:
        raise _invalid(f"{where}/text", f"must be less than {limit + 1} characters")
    flag = "emoji" if kind == "plain_text" else "verbatim"
    if flag in value and not isinstance(value[flag], bool):
        raise _invalid(f"{where}/{flag}", "must be a boolean")
    return {"type": kind, "text": text, flag: value.get(flag, kind == "plain_text")}


def _button(value: Any, where: str, seen: set[str]) -> JSON:
    if not isinstance(value, dict) or value.get("type") != "button":
        raise _invalid(where, "only buttons are modelled in actions blocks")
    extra = set(value) - {"type", "text", "action_id", "value", "style"}
    if extra:
        raise _invalid(where, f"unsupported fields {sorted(extra)}")
    button: JSON = {"type": "button", "text": _text_object(
        value.get("text"), f"{where}/text", limit=MAX_BUTTON_TEXT, plain_only=True)}
    action_id = value.get("action_id")
    if not isinstance(action_id, str) or not 1 <= len(action_id) <= MAX_ACTION_ID:
        raise _invalid(f"{where}/action_id", f"must be 1-{MAX_ACTION_ID} characters")
    if action_id in seen:
        raise _invalid(f"{where}/action_id", "must be unique in the block")
    seen.add(action_id)
    button["action_id"] = action_id
    if "value" in value:
        if not isinstance(value["value"], str) or len(value["value"]) > MAX_VALUE:
            raise _invalid(f"{where}/value", f"must be a string of at most {MAX_VALUE} "
                                             "characters")
        button["value"] = value["value"]
    if "style" in value:
        if value["style"] not in _BUTTON_STYLES:
            raise _invalid(f"{where}/style", "must be primary or danger")
        button["style"] = value["style"]
    return button


def _block(value: Any, where: str) -> JSON:
    if not isinstance(value, dict):
        raise _invalid(where, "must be an object")
    kind = value.get("type")
    if kind == "section":
        extra = set(value) - {"type", "text", "block_id"}
        if extra:
            raise _invalid(where, f"unsupported fields {sorted(extra)}")
        return {"type": "section", "text": _text_object(value.get("text"), f"{where}/text",
                                                        limit=MAX_SECTION_TEXT)}
    if kind == "actions":
        extra = set(value) - {"type", "elements", "block_id"}
        if extra:
            raise _invalid(where, f"unsupported fields {sorted(extra)}")
        elements = value.get("elements")
        if not isinstance(elements, list) or not elements:
            raise _invalid(f"{where}/elements", "must be a non-empty array")
        if len(elements) > MAX_ACTIONS:
            raise _invalid(f"{where}/elements", f"must have at most {MAX_ACTIONS} items")
        seen: set[str] = set()
        return {"type": "actions", "elements": [
            _button(e, f"{where}/elements/{n}", seen) for n, e in enumerate(elements)]}
    raise _invalid(f"{where}/type", f"the fake Slack does not model {kind!r} blocks")


def check_blocks(blocks: Any) -> list[JSON]:
    """Validate `blocks` as chat.postMessage / chat.update do; returns them as stored."""
    if not isinstance(blocks, list):
        raise SlackError("invalid_blocks_format")
    if len(blocks) > MAX_BLOCKS:
        raise _invalid("", f"must have at most {MAX_BLOCKS} blocks")
    stored: list[JSON] = []
    block_ids: set[str] = set()
    for number, value in enumerate(blocks):
        where = f"/blocks/{number}"
        block = _block(value, where)
        block_id = value.get("block_id") if isinstance(value, dict) else None
        if block_id is None:
            block_id = "".join(secrets.choice(_ALPHABET) for _ in range(5))
        elif not isinstance(block_id, str) or not 1 <= len(block_id) <= MAX_BLOCK_ID:
            raise _invalid(f"{where}/block_id", f"must be 1-{MAX_BLOCK_ID} characters")
        if block_id in block_ids:
            raise _invalid(f"{where}/block_id", "must be unique in the message")
        block_ids.add(block_id)
        stored.append({**block, "block_id": block_id})
    return stored


def buttons_in(blocks: list[JSON] | None) -> list[tuple[JSON, JSON]]:
    """(block, button) for every button in `blocks`, in order."""
    return [(block, element) for block in blocks or () if block.get("type") == "actions"
            for element in block.get("elements", [])]
