"""The agent's controls in chat: /model and /think (stored per session, applied by the driver
whenever it switches the session in), /compact and /export.

The models offered are the agent's own list (`agent.models`, when set, keeps only those it
names, by key or id); the levels offered by /think are those of the session's model.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from picobridge.agent.port import (
    AgentUnavailable,
    ControlFailed,
    ControlKind,
    ModelChoice,
    SessionSettings,
)
from picobridge.contract import ChatRef, OutboundFile
from picobridge.core.choices import SessionChoices
from picobridge.core.command_reply import CommandReply, Handler
from picobridge.core.router import Router
from picobridge.store import Store

log = logging.getLogger("picobridge.commands")


class Exports:
    """Where an agent writes a conversation's export (`scratch`), and the bridge's copy of it
    that the platform gets (kept like an agent's files, media/outbound)."""

    def __init__(self, scratch_dir: Path, files: Keeper) -> None:
        self._dir = scratch_dir
        self._files = files

    def scratch(self, session: str) -> Path:
        self._dir.mkdir(parents=True, exist_ok=True)
        return (self._dir / f"{session}-{secrets.token_hex(4)}.html").absolute()

    def keep(self, path: Path, name: str) -> OutboundFile:
        return self._files.keep_bytes(name, path.read_bytes())


class Keeper(Protocol):
    def keep_bytes(self, name: str, data: bytes) -> OutboundFile: ...

UNAVAILABLE = "⚠️ The agent is not available right now; try again in a moment."


class AgentControls:
    def __init__(self, store: Store, router: Router, choices: SessionChoices,
                 allowed_models: Mapping[str, Sequence[str]] | None = None,
                 exports: Exports | None = None) -> None:
        self._exports = exports
        self._store = store
        self._router = router
        self._choices = choices
        # Per named agent: the models /model may offer (`agent.models`; empty: all).
        self._allowed = {name: tuple(models) for name, models in (allowed_models or {}).items()}

    def handlers(self) -> dict[str, Handler]:
        return {"model": self.model, "think": self.think, "compact": self.compact,
                "export": self.export}

    async def status_lines(self, chat: ChatRef, session: str) -> list[str]:
        chosen = await self._choices.get(session)
        if chosen.model is None and chosen.thinking is None:
            return []
        return [f"Model: {chosen.model or 'the agent default'}; thinking: "
                f"{chosen.thinking or 'the model default'}"]

    # -- /model ----------------------------------------------------------------------------

    async def _offered(self, agent: str) -> tuple[list[ModelChoice], str]:
        """The models offered here, and the agent's default one's key."""
        result = await self._router.models(agent)
        allowed = self._allowed.get(agent, ())
        models = [m for m in result.models if not allowed or m.key in allowed
                  or m.key.partition("/")[2] in allowed]
        return models, result.text

    async def model(self, argument: str, chat: ChatRef, agent: str) -> CommandReply:
        try:
            models, default = await self._offered(agent)
        except (AgentUnavailable, ControlFailed, TimeoutError):
            return CommandReply(UNAVAILABLE)
        session = await self._store.current_session(chat, agent)
        current = (await self._choices.get(session)).model or default
        if argument:
            return CommandReply(await self._set_model(chat, agent, argument, models))
        if not models:
            return CommandReply("The agent offers no models to choose from.")
        lines = [f"{n}. {m.name} (`{m.key}`){' ✓' if m.key == current else ''}"
                 for n, m in enumerate(models, 1)]
        text = ("**Model**: choose one, or send /model NAME.\n\n" + "\n".join(lines))

        async def chosen(value: str) -> str:
            return await self._set_model(chat, agent, value, models)

        return CommandReply(text, tuple(m.key for m in models), "Model", chosen)

    async def _set_model(self, chat: ChatRef, agent: str, wanted: str,
                         models: list[ModelChoice]) -> str:
        model = find_model(models, wanted)
        if model is None:
            names = ", ".join(f"`{m.key}`" for m in models) or "none"
            return f"⚠️ No model `{wanted}` is offered here. Offered: {names}."
        session = await self._store.current_session(chat, agent)
        chosen = await self._choices.get(session)
        # A level the new model does not take falls back to its default.
        thinking = chosen.thinking if chosen.thinking in model.levels else None
        # "" clears a level the new model does not take: it thinks as it does by default.
        await self._choices.choose(session, model=model.key, thinking=thinking or "")
        log.info("chat=%s session=%s model %s", chat.key, session, model.key)
        return f"✓ Model: {model.name} (`{model.key}`), from your next message on."

    # -- /think ----------------------------------------------------------------------------

    async def think(self, argument: str, chat: ChatRef, agent: str) -> CommandReply:
        try:
            models, default = await self._offered(agent)
        except (AgentUnavailable, ControlFailed, TimeoutError):
            return CommandReply(UNAVAILABLE)
        session = await self._store.current_session(chat, agent)
        chosen = await self._choices.get(session)
        model = find_model(models, chosen.model or default)
        levels = model.levels if model is not None else ()
        if argument:
            return CommandReply(await self._set_thinking(session, argument.lower(), levels))
        if len(levels) <= 1:
            return CommandReply(f"The model {model.name if model else ''} has no thinking "
                                "levels to choose from.".replace("  ", " "))
        text = (f"**Thinking** of {model.name if model else 'the model'} (now "
                f"{chosen.thinking or 'its default'}): choose one, or send /think LEVEL.")

        async def picked(value: str) -> str:
            return await self._set_thinking(session, value, levels)

        return CommandReply(text, levels, "Thinking", picked)

    async def _set_thinking(self, session: str, level: str, levels: Sequence[str]) -> str:
        if level not in levels:
            offered = ", ".join(levels) or "none"
            return f"⚠️ The model takes no thinking level `{level}`. Levels: {offered}."
        await self._choices.choose(session, thinking=level)
        return f"✓ Thinking: {level}, from your next message on."

    # -- /compact, /export -----------------------------------------------------------------

    async def compact(self, argument: str, chat: ChatRef, agent: str) -> CommandReply:
        session = await self._store.current_session(chat, agent)
        try:
            result = await self._router.control(chat, session, agent, ControlKind.COMPACT,
                                                argument)
        except ControlFailed as exc:
            return CommandReply(f"⚠️ The agent could not compact this conversation: {exc}")
        except (AgentUnavailable, TimeoutError):
            return CommandReply(UNAVAILABLE)
        return CommandReply(f"✓ Compacted. {result.text}".strip())

    async def export(self, argument: str, chat: ChatRef, agent: str) -> CommandReply:
        if self._exports is None:
            return CommandReply("⚠️ /export needs files to be on (attachments).")
        session = await self._store.current_session(chat, agent)
        path = await asyncio.to_thread(self._exports.scratch, session)
        try:
            await self._router.control(chat, session, agent, ControlKind.EXPORT, str(path))
            file = await asyncio.to_thread(self._exports.keep, path, f"{session}.html")
        except ControlFailed as exc:
            return CommandReply(f"⚠️ The agent could not export this conversation: {exc}")
        except (AgentUnavailable, TimeoutError):
            return CommandReply(UNAVAILABLE)
        except OSError as exc:
            log.warning("chat=%s: the export of session %s is unreadable (%s)", chat.key,
                        session, exc.__class__.__name__)
            return CommandReply("⚠️ The agent's export could not be read.")
        finally:
            await asyncio.to_thread(path.unlink, missing_ok=True)
        return CommandReply("This conversation, as the agent keeps it:", files=(file,))


def find_model(models: Sequence[ModelChoice], wanted: str | None) -> ModelChoice | None:
    """A model by key, id, name or number in the list."""
    if not wanted:
        return None
    text = wanted.strip()
    if text.isdigit() and 1 <= int(text) <= len(models):
        return models[int(text) - 1]
    lowered = text.lower()
    for model in models:
        if lowered in (model.key.lower(), model.key.partition("/")[2].lower(),
                       model.name.lower()):
            return model
    return None


__all__ = ["AgentControls", "Exports", "SessionSettings", "find_model"]
