"""The agent's questions as Block Kit, and the clicks on their buttons, as pure functions.

Layout: the question's text (mrkdwn, in sections of at most 3000 characters, Slack's limit)
and an actions block of buttons under it: Yes / No for a confirm, one per option for a
select, then Cancel. Each button's action_id and value carry
`d:<dialog id>:<choice>` (adapters/common/buttons.py). The message's `text` stays the whole
question: Slack shows it in notifications, and it says how to answer by typing.

Once answered, the message keeps its sections, loses its actions blocks and gains a line with
the answer (plain_text: an option's text is shown as is, never read as mrkdwn); closed
otherwise (typed answer, timeout, turn over), a line saying how.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from picobridge.adapters.common.buttons import Asked, answered_line, buttons, label
from picobridge.adapters.slack.events import PLATFORM
from picobridge.adapters.slack.render import render_slack
from picobridge.contract import ChatRef, Dialog

SECTION_CHARS = 3000
LABEL_CHARS = 75
MAX_BLOCKS = 50

Block = dict[str, Any]


def question_blocks(markdown: str, dialog: Dialog | None, asked: Asked) -> list[Block] | None:
    """The blocks of a question with buttons, or None when it is answered by typing (or is
    too long for Slack's blocks: typing still works)."""
    found = buttons(dialog) if dialog is not None else None
    if dialog is None or found is None:
        return None
    sections = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}
                for text in render_slack(markdown, SECTION_CHARS)]
    # One actions block holds them all: common/buttons.py offers at most MAX_OPTIONS + 1.
    actions = {"type": "actions", "block_id": f"q.{dialog.id}",
               "elements": [_button(b.label, b.data, b.style) for b in found]}
    if len(sections) + 1 > MAX_BLOCKS:
        return None
    asked.remember(dialog)
    return [*sections, actions]


def _button(text: str, data: str, style: str | None) -> Block:
    button: Block = {"type": "button", "text": {"type": "plain_text",
                                                "text": label(text, LABEL_CHARS)},
                     "action_id": data, "value": data}
    if style == "primary":
        button["style"] = style
    return button


def answered_blocks(blocks: object, shown: str) -> list[Block]:
    """The question's blocks once answered: no buttons, the answer under the text."""
    return closed_blocks(blocks, answered_line(shown))


def closed_blocks(blocks: object, line: str) -> list[Block]:
    """The question's blocks once closed: no buttons, `line` under the text."""
    kept = [b for b in blocks if isinstance(b, dict) and b.get("type") != "actions"] \
        if isinstance(blocks, list) else []
    return [*kept, {"type": "section", "text": {"type": "plain_text", "text": line}}]


@dataclass(frozen=True, slots=True)
class Posted:
    """A question's message with buttons, as needed to change it."""

    channel: str
    ts: str
    text: str  # its text (the notification fallback)
    blocks: object  # its blocks, as sent or as Slack returned them


@dataclass(frozen=True, slots=True)
class Clicked:
    """A click on a button of one of the bot's messages, as the bridge needs it."""

    chat: ChatRef
    user: str
    data: str
    channel: str
    ts: str  # the message clicked
    text: str  # its text (the notification fallback)
    blocks: object  # its blocks as Slack returned them


def clicked(body: dict[str, Any], platform: str = PLATFORM) -> Clicked | None:
    """Read a block_actions payload (shapes.py screened its types); None when it is not a
    click on a message in a conversation."""
    actions = body.get("actions") or [{}]
    container = body.get("container") or {}
    message = body.get("message") or {}
    data = _text(actions[0].get("action_id"))
    user = _text((body.get("user") or {}).get("id"))
    channel = _text((body.get("channel") or {}).get("id")) or _text(container.get("channel_id"))
    ts = _text(message.get("ts")) or _text(container.get("message_ts"))
    if not (data and user and channel and ts):
        return None
    # The question sits in its conversation's thread, or at the top of a DM (where a thread
    # may since have started under it: its thread_ts is then its own ts).
    thread = _text(message.get("thread_ts")) or _text(container.get("thread_ts"))
    chat = ChatRef(platform, channel, thread if thread and thread != ts else None)
    return Clicked(chat, user, data, channel, ts, _text(message.get("text")),
                   message.get("blocks"))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
