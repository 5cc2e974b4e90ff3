"""A chat's earlier conversations: /sessions lists them, /resume makes one current again.

Session ids are the bridge's, so this works with every agent: picobot-json gets the old id
back on the next turn; prime-rpc's driver switches the old session's file in, and the agent
recalls it. /new keeps the conversation it ends in the list.
"""

from __future__ import annotations

from datetime import UTC, datetime

from picobridge.contract import ChatRef
from picobridge.core.command_reply import CommandReply, Handler
from picobridge.store import Store

LISTED = 10
WORDS = 40  # characters of a conversation's first message shown


class History:
    def __init__(self, store: Store) -> None:
        self._store = store

    def handlers(self) -> dict[str, Handler]:
        return {"sessions": self.sessions, "resume": self.resume}

    async def sessions(self, argument: str, chat: ChatRef, agent: str) -> CommandReply:
        past = await self._store.past_sessions(chat, agent, LISTED)
        current = await self._store.current_session(chat, agent)
        lines = ["**Your conversations** (newest first; /resume N goes back to one):"]
        for n, session in enumerate(past, 1):
            mark = " ← current" if session.session_id == current else ""
            said = _describe(session.created_at, session.first_words, session.messages)
            lines.append(f"{n}. {said}{mark}")
        return CommandReply("\n".join(lines))

    async def resume(self, argument: str, chat: ChatRef, agent: str) -> CommandReply:
        past = await self._store.past_sessions(chat, agent, LISTED)
        current = await self._store.current_session(chat, agent)
        earlier = [(n, s) for n, s in enumerate(past, 1) if s.session_id != current]
        if not argument:
            if not earlier:
                return CommandReply("There is no earlier conversation to go back to.")
            labels = tuple(f"{n}. {_describe(s.created_at, s.first_words, s.messages)}"
                           for n, s in earlier)

            async def chosen(value: str) -> str:
                return await self._resume(chat, agent, value.partition(".")[0])

            return CommandReply("**Resume** which conversation? Choose one, or send /resume N."
                                "\n\n" + "\n".join(labels), labels, "Resume", chosen)
        return CommandReply(await self._resume(chat, agent, argument))

    async def _resume(self, chat: ChatRef, agent: str, number: str) -> str:
        past = await self._store.past_sessions(chat, agent, LISTED)
        if not number.strip().isdigit() or not 1 <= int(number) <= len(past):
            return f"⚠️ There is no conversation {number.strip()} in /sessions."
        session = past[int(number) - 1]
        if not await self._store.resume_session(chat, session.session_id):
            return "⚠️ That conversation is not this chat's."
        return (f"✓ Back to the conversation of "
                f"{_describe(session.created_at, session.first_words, session.messages)}. "
                f"Session: `{session.session_id}`")


def _describe(created_at: float, first_words: str, messages: int) -> str:
    begun = datetime.fromtimestamp(created_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    words = " ".join(first_words.split())
    if len(words) > WORDS:
        words = words[:WORDS - 1].rstrip() + "…"
    said = f"“{words}”" if words else "(nothing yet)"
    return f"{begun}: {said}, {messages} message{'s' if messages != 1 else ''}"
