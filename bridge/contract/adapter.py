"""The base class a platform's adapter implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

from picobridge.contract.commands import BridgeCommand
from picobridge.contract.dialogs import DialogClosed
from picobridge.contract.link import BridgeLink
from picobridge.contract.messages import ChatRef, Outcome, OutgoingReply, ProgressEvent


class Adapter(ABC):
    """A chat platform. Subclasses set `platform` and implement the abstract methods."""

    # The name the bridge knows it by: the platform, or one bot of it (contract/names.py).
    platform: str
    # Whether one chat can be given a command menu of its own (`show_commands`): the bridge
    # then keeps each chat's menu to what its agent offers.
    chat_menus: bool = False

    @abstractmethod
    async def start(self, bridge: BridgeLink) -> None:
        """Connect and begin feeding messages to `bridge.submit`; return once running."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop taking messages and release connections. Must be safe to call twice."""

    @abstractmethod
    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        """Deliver one reply. Raise DeliveryError when it did not reach the platform."""

    async def show_progress(self, chat: ChatRef, event: ProgressEvent) -> None:
        """Show that the agent works (typing, a reaction, streamed text). Optional.

        Called inline while the agent's output is read: return quickly and do slow platform
        calls in the adapter's own tasks.
        """
        return None

    async def clear_progress(self, chat: ChatRef, outcome: Outcome) -> None:
        """The turn ended (before its reply is sent): stop any progress display. Optional."""
        return None

    async def dialog_closed(self, chat: ChatRef, closed: DialogClosed) -> None:
        """A question sent to `chat` (a QUESTION reply with a `Dialog`) closed other than by
        one of its own buttons: a platform that showed it with buttons takes them away and
        shows how it ended. Optional: a platform without buttons needs nothing.

        Best effort, in a task of its own: it never holds up the chat or the turn, and what
        it raises is logged (by class) and dropped. It may come before the question itself
        was sent (the outbox still at it, e.g. through a 429), or for a question that had no
        buttons.
        """
        return None

    async def show_commands(self, chat: ChatRef,
                            commands: tuple[BridgeCommand, ...] | None) -> None:
        """Give `chat` (a chat, never a thread: menus belong to the chat) a command menu of
        its own with `commands` (in menu order, listed or not), or None: the bot's own menu
        (`BridgeLink.commands()`) again. Only called where `chat_menus` is set, when the
        chat's agent offers other commands than the menu it shows; what it set is stored,
        so a restart does not ask again. Raise DeliveryError when it did not take (with
        `retry_after` when the platform said when to try again; `permanent` when it never
        will): it is tried again later, in the background."""
        return None

    async def verify(self) -> str:
        """Check the credentials against the platform for `picobridge check`.

        Returns a short description (e.g. the bot's name); raises on failure with a message
        that never contains a secret.
        """
        return "ok"

    def connected(self) -> bool:
        """Whether the platform connection is currently up (health and watchdog)."""
        return True
