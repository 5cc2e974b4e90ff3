"""Interactivity in the fake Slack: people clicking the buttons of the bot's messages.

A click becomes a `block_actions` payload shaped as Slack shapes it (the user, the channel, the
container, the whole message as it is now with its blocks, the action), delivered over Socket
Mode as an `interactive` envelope (acked like any envelope, never redelivered: Slack shows the
person an error instead) or POSTed form-encoded (`payload=<json>`) to the app's interactivity
URL in HTTP mode (http_mode.py).

Strict where Slack is: a person can only click a button that is on the message as it is now
(`block_actions_payload` raises LookupError otherwise), so once the bot removed the buttons
no click reaches it. Payloads Slack would not send (a forged one) go through
`send_interaction` as they are.
"""

from __future__ import annotations

import copy
import secrets
import time
import uuid

from tests.fakes.server import JSON
from tests.fakes.slack.blocks import buttons_in
from tests.fakes.slack.events import SlackEvents
from tests.fakes.slack.model import DEFAULT_USER, PostedMessage


class SlackInteractive(SlackEvents):
    """Button clicks, as payloads and as Socket Mode envelopes."""

    def block_actions_payload(self, message: PostedMessage, *, user: str = DEFAULT_USER,
                              text: str | None = None, action_id: str | None = None) -> JSON:
        """The payload of `user` clicking the button (found by its text or its action_id) on
        the bot's `message` as it is now."""
        stored = self.message(message.channel, message.ts)
        if stored is None or message.deleted:
            raise LookupError(f"message {message.ts} is not in {message.channel}")
        for block, button in buttons_in(stored.get("blocks")):
            if (text is None or button["text"]["text"] == text) and \
                    (action_id is None or button["action_id"] == action_id):
                return self._payload(message.channel, stored, block, button, user)
        raise LookupError(f"no button {text or action_id!r} on message {message.ts}")

    def _payload(self, channel: str, stored: JSON, block: JSON, button: JSON,
                 user: str) -> JSON:
        self.register_user(user)
        info = self.channels.get(channel) or {}
        container: JSON = {"type": "message", "message_ts": stored["ts"],
                           "channel_id": channel, "is_ephemeral": False}
        if stored.get("thread_ts"):
            container["thread_ts"] = stored["thread_ts"]
        action: JSON = {"action_id": button["action_id"], "block_id": block["block_id"],
                        "text": dict(button["text"]), "type": "button",
                        "action_ts": f"{time.time():.6f}"}
        if "value" in button:
            action["value"] = button["value"]
        if "style" in button:
            action["style"] = button["style"]
        name = str(self.users[user]["name"])
        return {
            "type": "block_actions",
            "user": {"id": user, "username": name, "name": name, "team_id": self.team_id},
            "api_app_id": self.app_id, "token": self.verification_token,
            "container": container, "trigger_id": f"{secrets.randbelow(10**12)}."
                                                  f"{secrets.token_hex(8)}",
            "team": {"id": self.team_id, "domain": "fake-team"}, "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": "directmessage" if info.get("is_im")
                        else str(info.get("name", channel))},
            "message": copy.deepcopy(stored), "state": {"values": {}},
            "response_url": f"{self.url}/actions/{self.team_id}/{secrets.token_hex(8)}",
            "actions": [action],
        }

    async def send_interaction(self, payload: object) -> JSON:
        """Deliver any interactivity payload over Socket Mode; returns the envelope."""
        envelope: JSON = {"envelope_id": str(uuid.uuid4()), "payload": payload,
                          "type": "interactive", "accepts_response_payload": False}
        await self._deliver(envelope)
        return envelope

    async def click(self, message: PostedMessage, text: str, *,
                    user: str = DEFAULT_USER) -> JSON:
        """`user` clicks the button labelled `text` (Socket Mode); returns the envelope."""
        return await self.send_interaction(
            self.block_actions_payload(message, user=user, text=text))
