"""Questions the agent asks while it works on a chat's message, and their answers.

A question is stored and sent like any reply (kind QUESTION, in order with the chat's other
replies) with its `Dialog` attached for platforms that show buttons. It is answered by a
button (`answer`) or by the next message in that chat (`typed`), only in the chat whose turn
asked and only by a person allowed to talk to the agent (intake checks that). Unanswered, it
is cancelled after the agent's own timeout or `bridge.dialog_timeout`; when the turn ends
meanwhile it is simply closed. Closed any way but by its own button, the platform hears how
(`Outbox.dialog_closed`), so that the question's buttons go; a click shows its answer itself.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from picobridge.agent.port import DialogRequest, Worker
from picobridge.contract import (
    ChatRef,
    Dialog,
    DialogAnswer,
    DialogClosed,
    DialogEnd,
    DialogKind,
    OutgoingReply,
    ReplyKind,
)
from picobridge.core.outbox import Outbox
from picobridge.core.turns import Turn
from picobridge.store import Store

log = logging.getLogger("picobridge.dialogs")

CANCEL_WORDS = frozenset({"/cancel", "cancel"})
YES = frozenset({"y", "yes", "ok", "okay", "sure", "confirm", "true", "1"})
NO = frozenset({"n", "no", "nope", "deny", "false", "0"})


@dataclass(frozen=True, slots=True)
class TypedAnswer:
    dialog_id: str
    answer: DialogAnswer | None  # None: the message does not answer the question
    reply: str  # what to tell the person


Respond = Callable[[DialogAnswer], Awaitable[None]]


@dataclass(eq=False)
class _Open:
    dialog: Dialog
    chat: ChatRef
    session: str | None  # the turn's that asked; None for the bridge's own menus
    respond: Respond  # passes the answer on (to the agent, or a menu's command)
    expiry: asyncio.Task[None] | None = None
    senders: frozenset[tuple[str, str]] = frozenset()  # (platform, sender) of the turn


class Dialogs:
    def __init__(self, store: Store, outbox: Outbox, timeout: float) -> None:
        self._store = store
        self._outbox = outbox
        self._timeout = timeout
        self._open: dict[str, _Open] = {}
        self._by_chat: dict[str, str] = {}
        # Unguessable ids: a button's callback data must not name another chat's question.
        self._prefix = secrets.token_hex(4)
        self._numbers = itertools.count(1)

    async def ask(self, turn: Turn, request: DialogRequest) -> None:
        """Put the agent's question to the chat of `turn`."""
        dialog = Dialog(f"{self._prefix}{next(self._numbers)}", request.kind,
                        request.title, request.message, request.options, request.prefill)
        previous = self._by_chat.get(turn.chat.key)
        if previous is not None:
            await self._close(previous, DialogAnswer(cancelled=True), tell_agent=True,
                              end=DialogEnd.CLOSED)
        entry = _Open(dialog, turn.chat, turn.session,
                      _to_agent(turn.worker, request.request_id),
                      senders=frozenset((m.chat.platform, m.sender_id) for m in turn.messages))
        self._open[dialog.id] = entry
        self._by_chat[turn.chat.key] = dialog.id
        limit = min(self._timeout, request.timeout) if request.timeout else self._timeout
        entry.expiry = asyncio.create_task(self._expire(dialog.id, limit),
                                           name=f"dialog-{dialog.id}")
        stored = await self._store.add_reply(
            turn.chat, OutgoingReply(question_text(dialog), ReplyKind.QUESTION,
                                     turn.messages[-1].reply_to), session_id=turn.session)
        self._outbox.deliver(stored, dialog=dialog)
        log.info("agent asks chat=%s: %s dialog %s", turn.chat.key, dialog.kind.value,
                 dialog.id)

    def offer(self, chat: ChatRef, title: str, options: tuple[str, ...],
              chosen: Callable[[str], Awaitable[None]]) -> Dialog:
        """A menu of the bridge's own (/model, /mode, /resume): a select question whose answer
        goes to `chosen` (a cancel goes nowhere). Unlike the agent's questions it does not
        take the chat's next message as its answer: the chat goes on while it is shown."""
        dialog = Dialog(f"{self._prefix}{next(self._numbers)}", DialogKind.SELECT, title,
                        options=options)

        async def respond(answer: DialogAnswer) -> None:
            if not answer.cancelled and answer.value is not None:
                await chosen(answer.value)

        entry = _Open(dialog, chat, None, respond)
        self._open[dialog.id] = entry
        entry.expiry = asyncio.create_task(self._expire(dialog.id, self._timeout),
                                           name=f"menu-{dialog.id}")
        return dialog

    def asking(self, chat: ChatRef) -> Dialog | None:
        dialog_id = self._by_chat.get(chat.key)
        return self._open[dialog_id].dialog if dialog_id is not None else None

    async def answer(self, dialog_id: str, chat: ChatRef, answer: DialogAnswer, *,
                     end: DialogEnd | None = None) -> str | None:
        """Pass an answer on; `end` None for one of the question's own buttons (the click
        shows its answer), ANSWERED for a typed one."""
        entry = self._open.get(dialog_id)
        if entry is None or entry.chat != chat:
            return None
        return await self._close(dialog_id, answer, tell_agent=True, end=end)

    def read_typed(self, chat: ChatRef, text: str) -> TypedAnswer | None:
        """The chat's next message read as the answer to its open question (None when no
        question is open there). Nothing is answered yet: see `give`."""
        dialog_id = self._by_chat.get(chat.key)
        if dialog_id is None:
            return None
        dialog = self._open[dialog_id].dialog
        answer = parse_answer(dialog, text)
        if answer is None:
            return TypedAnswer(dialog_id, None,
                               f"Please answer the question first. {how_to_answer(dialog)}")
        return TypedAnswer(dialog_id, answer, f"✓ Answer sent: {answer.describe()}")

    async def give(self, typed: TypedAnswer, chat: ChatRef) -> None:
        """Pass a typed answer on (once the message carrying it is stored)."""
        if typed.answer is not None:
            await self.answer(typed.dialog_id, chat, typed.answer, end=DialogEnd.ANSWERED)

    async def turn_ended(self, session: str) -> None:
        """The turn that asked is over: its questions no longer wait for anyone."""
        for dialog_id in [d for d, e in self._open.items() if e.session == session]:
            await self._close(dialog_id, DialogAnswer(cancelled=True), tell_agent=False,
                              end=DialogEnd.CLOSED)

    def senders(self) -> set[tuple[str, str]]:
        return {sender for entry in self._open.values() for sender in entry.senders}

    async def cancel_from(self, senders: set[tuple[str, str]]) -> int:
        """Questions asked in turns of these senders are cancelled (the agent hears so)."""
        ids = [d for d, e in self._open.items() if e.senders & senders]
        for dialog_id in ids:
            await self._close(dialog_id, DialogAnswer(cancelled=True), tell_agent=True,
                              end=DialogEnd.CLOSED)
        return len(ids)

    async def stop(self) -> None:
        for dialog_id in list(self._open):
            await self._close(dialog_id, DialogAnswer(cancelled=True), tell_agent=False,
                              end=DialogEnd.CLOSED)

    async def _expire(self, dialog_id: str, after: float) -> None:
        await asyncio.sleep(after)
        entry = self._open.get(dialog_id)
        if entry is not None:
            log.info("dialog %s in chat=%s got no answer in %.0fs: cancelled", dialog_id,
                     entry.chat.key, after)
            await self._close(dialog_id, DialogAnswer(cancelled=True), tell_agent=True,
                              end=DialogEnd.EXPIRED)

    async def _close(self, dialog_id: str, answer: DialogAnswer, *, tell_agent: bool,
                     end: DialogEnd | None) -> str:
        entry = self._open.pop(dialog_id)
        if self._by_chat.get(entry.chat.key) == dialog_id:
            del self._by_chat[entry.chat.key]
        # An expired question is closed by its expiry task itself, which must not cancel
        # itself before it has told the agent.
        if entry.expiry is not None and end is not DialogEnd.EXPIRED:
            entry.expiry.cancel()
        if end is not None:
            typed = answer if end is DialogEnd.ANSWERED else None
            self._outbox.dialog_closed(entry.chat, DialogClosed(dialog_id, end, typed))
        if tell_agent:
            await entry.respond(answer)
        return answer.describe()


def _to_agent(worker: Worker, request_id: str) -> Respond:
    async def respond(answer: DialogAnswer) -> None:
        await worker.answer_dialog(request_id, answer)

    return respond


def parse_answer(dialog: Dialog, text: str) -> DialogAnswer | None:
    """A typed answer, or None when it does not fit the question."""
    cleaned = text.strip()
    if cleaned.lower() in CANCEL_WORDS:
        return DialogAnswer(cancelled=True)
    if dialog.kind is DialogKind.CONFIRM:
        word = cleaned.lower().rstrip(".!")
        if word in YES:
            return DialogAnswer(confirmed=True)
        if word in NO:
            return DialogAnswer(confirmed=False)
        return None
    if dialog.kind is DialogKind.SELECT:
        if cleaned.isdigit() and 1 <= int(cleaned) <= len(dialog.options):
            return DialogAnswer(value=dialog.options[int(cleaned) - 1])
        matches = [o for o in dialog.options if o.lower() == cleaned.lower()]
        return DialogAnswer(value=matches[0]) if matches else None
    return DialogAnswer(value=text)


def how_to_answer(dialog: Dialog) -> str:
    if dialog.kind is DialogKind.CONFIRM:
        return "Reply yes or no (or cancel)."
    if dialog.kind is DialogKind.SELECT:
        return "Reply with the number of your choice (or cancel)."
    return "Reply with your answer (or cancel)."


def question_text(dialog: Dialog) -> str:
    parts = [f"❓ **{dialog.title}**" if dialog.title else "❓ The agent asks:"]
    if dialog.message:
        parts.append(dialog.message)
    if dialog.options:
        parts.append("\n".join(f"{n}. {option}" for n, option in enumerate(dialog.options, 1)))
    if dialog.kind is DialogKind.EDITOR and dialog.prefill:
        parts.append(f"```\n{dialog.prefill}\n```")
    parts.append(f"_{how_to_answer(dialog)}_")
    return "\n\n".join(parts)

