"""The agent's questions as message components: Yes / No buttons for a confirmation, a select
menu for a choice (Discord's menus take up to 25 options), a Cancel button on each; typed
answers work as on every platform. Which questions were sent, and on which message, is kept
for the clicks (interactions.py) and for closing a question other than by its buttons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import discord

from picobridge.adapters.common.buttons import Asked, QuestionMessages, buttons, label
from picobridge.contract import Dialog, DialogClosed, DialogKind

LABEL_LIMIT = 80
MENU_PREFIX = "menu:"  # a select menu's custom_id; its options carry the button data


@dataclass(frozen=True, slots=True)
class Shown:
    channel_id: int
    message_id: int
    text: str


class Questions:
    def __init__(self) -> None:
        self.asked = Asked()
        self.shown: QuestionMessages[Shown] = QuestionMessages()

    def components(self, dialog: Dialog) -> list[dict[str, Any]] | None:
        """The components of a question, as plain data (None: answered by typing only)."""
        offered = buttons(dialog)
        if offered is None:
            return None
        self.asked.remember(dialog)
        if dialog.kind is DialogKind.SELECT:
            options = [{"label": label(b.label, 100), "value": b.data} for b in offered[:-1]]
            cancel = offered[-1]
            return [{"kind": "menu", "custom_id": MENU_PREFIX + dialog.id, "options": options},
                    {"kind": "button", "label": cancel.label, "custom_id": cancel.data}]
        return [{"kind": "button", "label": label(b.label, LABEL_LIMIT), "custom_id": b.data,
                 "primary": b.style == "primary"} for b in offered]

    def view(self, components: list[dict[str, Any]]) -> discord.ui.View:
        view = discord.ui.View(timeout=None)
        buttons_row = 1 if any(c["kind"] == "menu" for c in components) else 0
        for index, item in enumerate(components):
            if item["kind"] == "menu":
                view.add_item(discord.ui.Select(
                    custom_id=item["custom_id"], placeholder="Choose…", row=0,
                    options=[discord.SelectOption(label=o["label"], value=o["value"])
                             for o in item["options"]]))
            else:
                style = discord.ButtonStyle.primary if item.get("primary") \
                    else discord.ButtonStyle.secondary
                view.add_item(discord.ui.Button(label=item["label"], custom_id=item["custom_id"],
                                                style=style, row=buttons_row + index // 5))
        # Clicks are read from the gateway's interactions (interactions.py), not by the view:
        # a stopped view is not kept in discord.py's view store.
        view.stop()
        return view

    def sent(self, dialog_id: str, message: discord.Message, text: str
             ) -> tuple[Shown, DialogClosed | None]:
        """Remember the message a question's components are on; the DialogClosed is there
        when the question closed before it was even sent."""
        shown = Shown(message.channel.id, message.id, text)
        return shown, self.shown.sent(dialog_id, shown)


def choice_of(data: dict[str, Any]) -> str | None:
    """The button data a component interaction carries (a menu's picked option's)."""
    custom_id = data.get("custom_id")
    if isinstance(custom_id, str) and custom_id.startswith(MENU_PREFIX):
        values = data.get("values") or []
        return str(values[0]) if values else None
    return custom_id if isinstance(custom_id, str) else None
