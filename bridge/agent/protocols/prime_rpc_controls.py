"""prime-rpc's controls beyond a turn (shared/peers/prime-rpc-peer.md, "Controls", and
tests/peers/README.md for what was observed here):

- /model: `get_available_models` lists them (a key is provider/id); `set_model` with
  provider and modelId. pi puts its command line's `--model` back on EVERY switch_session, so a
  session's choice is set again each time the session is switched in (`apply`).
- /think: `set_thinking_level`; a reasoning model takes off, minimal, low, medium, high, one
  that cannot reason only off.
- /compact: `compact` with customInstructions; answered once done (tokensBefore, summary).
- /export: `export_html` with outputPath.
- steer / followup: `steer` and `follow_up`. pi takes both even when no run is going, and
  keeps them for the NEXT prompt (where they run as if steered into it); a switch_session
  drops them. So the driver sends them only while the session's turn runs, notes which of them
  the run delivered (a user message_start with their text), and when the run ends with some
  undelivered, forgets the session file it has open: the next turn switches again, which drops
  them in pi, and the bridge hands them back as messages of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from picobridge.agent.driver import DriverContext
from picobridge.agent.port import (
    ControlFailed,
    ControlKind,
    ControlRequest,
    ControlResult,
    ModelChoice,
    SessionSettings,
)
from picobridge.agent.protocols.prime_rpc_wire import agent_text, images_of

log = logging.getLogger("picobridge.agent")

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high")
COMMANDS = {
    "model": "get_available_models, set_model (again at each switch_session)",
    "think": "set_thinking_level",
    "compact": "compact",
    "export": "export_html",
}


def model_choice(model: Any) -> ModelChoice | None:
    if not isinstance(model, dict):
        return None
    provider, ident = model.get("provider"), model.get("id")
    if not isinstance(provider, str) or not isinstance(ident, str):
        return None
    name = model.get("name")
    levels = THINKING_LEVELS if model.get("reasoning") is True else ("off",)
    return ModelChoice(f"{provider}/{ident}", name if isinstance(name, str) and name else ident,
                       levels)


def model_key(state: Any) -> str:
    """The key of the model a get_state answer names ("" when it names none)."""
    data = state.get("data") if isinstance(state, dict) else None
    choice = model_choice(data.get("model")) if isinstance(data, dict) else None
    return choice.key if choice is not None else ""


def message_text(message: Any) -> str | None:
    """The text of a user message of an event, None for any other message."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return None


def compact_summary(response: dict[str, Any]) -> str:
    data = response.get("data")
    if not isinstance(data, dict):
        return ""
    before = data.get("tokensBefore")
    return f"The agent's memory of it held {before} tokens before." \
        if isinstance(before, int) else ""


class Injections:
    """Messages sent into a running turn (steer) or queued after it (follow_up), until the
    run shows them."""

    def __init__(self) -> None:
        self.steers: deque[tuple[str, str]] = deque()  # (text, tag)
        self.followups: deque[tuple[str, str]] = deque()
        self.delivered: list[str] = []  # tags of steers the run took since the last answer

    def add(self, kind: ControlKind, text: str, tag: str) -> None:
        queue = self.steers if kind is ControlKind.STEER else self.followups
        queue.append((text, tag))

    def drop(self, tag: str) -> None:
        for queue in (self.steers, self.followups):
            for item in list(queue):
                if item[1] == tag:
                    queue.remove(item)

    def seen(self, text: str) -> str | None:
        """A user message of the run: a steer is marked delivered; a follow-up's tag is
        returned (its answer begins)."""
        for queue in (self.steers, self.followups):
            for item in queue:
                if item[0] == text:
                    queue.remove(item)
                    if queue is self.steers:
                        self.delivered.append(item[1])
                        return None
                    return item[1]
        return None

    def take_delivered(self) -> tuple[str, ...]:
        tags, self.delivered = tuple(self.delivered), []
        return tags

    def undelivered(self) -> tuple[str, ...]:
        tags = tuple(t for _, t in self.steers) + tuple(t for _, t in self.followups)
        self.steers.clear()
        self.followups.clear()
        return tags


class Applied:
    """What the open session has of a person's choices (pi resets the model at a switch)."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.thinking: str | None = None

    def reset(self) -> None:
        self.model = self.thinking = None

    def requests(self, wanted: SessionSettings) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if wanted.model and wanted.model != self.model:
            provider, _, ident = wanted.model.partition("/")
            out.append({"type": "set_model", "provider": provider, "modelId": ident})
        if wanted.thinking and (wanted.thinking != self.thinking or out):
            out.append({"type": "set_thinking_level", "level": wanted.thinking})
        return out


def control_record(request: ControlRequest) -> dict[str, Any]:
    """The request of a control on the open session."""
    if request.kind is ControlKind.COMPACT:
        record: dict[str, Any] = {"type": "compact"}
        if request.argument:
            record["customInstructions"] = request.argument
        return record
    if request.kind is ControlKind.EXPORT:
        return {"type": "export_html", "outputPath": request.argument}
    raise ControlFailed(f"prime-rpc has no {request.kind.value}")


def control_result(request: ControlRequest, response: dict[str, Any]) -> ControlResult:
    if request.kind is ControlKind.COMPACT:
        return ControlResult(compact_summary(response))
    data = response.get("data")
    path = data.get("path") if isinstance(data, dict) else None
    return ControlResult(path=path if isinstance(path, str) else request.argument)


class RequestFailed(Exception):
    """The agent answered a request with success false."""


class PrimeControls:
    """The controls of the prime-rpc driver (prime_rpc.py holds the turns)."""

    _context: DriverContext
    _turn: str | None
    _stopping: bool
    _notice: str | None
    _applied: Applied
    _default_model: str
    _injected: Injections

    async def _request(self, record: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def _switch_to(self, session: str) -> None:
        raise NotImplementedError

    async def control(self, request: ControlRequest) -> ControlResult:
        if request.kind is ControlKind.MODELS:
            data = (await self._asked({"type": "get_available_models"})).get("data")
            found = data.get("models") if isinstance(data, dict) else None
            models = [m for m in map(model_choice, found if isinstance(found, list) else [])
                      if m is not None]
            return ControlResult(self._default_model, tuple(models))
        if request.kind in (ControlKind.STEER, ControlKind.FOLLOW_UP):
            return await self._inject(request)
        if self._turn is not None or request.session is None:
            raise ControlFailed("the agent is busy with another conversation")
        async with asyncio.timeout(self._context.settings.ready_timeout):
            await self._switch_to(request.session)
            await self._apply(request.settings)
        async with asyncio.timeout(self._context.settings.turn_timeout):
            response = await self._asked(control_record(request))
        return control_result(request, response)

    async def _asked(self, record: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._request(record)
        except RequestFailed as exc:
            raise ControlFailed(str(exc)) from exc

    async def _inject(self, request: ControlRequest) -> ControlResult:
        """A message into the session's running turn (see prime_rpc_controls.py)."""
        if self._turn != request.session or self._stopping:
            raise ControlFailed("no turn of this conversation runs")
        kind = "steer" if request.kind is ControlKind.STEER else "follow_up"
        # pi's steer and follow_up take images as a prompt does (rpc-mode.js: the real
        # program passes command.images on; the seed leaves them out).
        images = (await asyncio.to_thread(images_of, request.attachments)
                  if request.attachments else {})
        text = agent_text(request.argument, request.attachments, images)
        record: dict[str, Any] = {"type": kind, "message": text}
        if images:
            record["images"] = list(images.values())
        self._injected.add(request.kind, text, request.tag)
        try:
            await self._request(record)
        except RequestFailed as exc:
            self._injected.drop(request.tag)
            raise ControlFailed(str(exc)) from exc
        return ControlResult()

    async def _apply(self, settings: SessionSettings) -> None:
        """The session's model and thinking level, as the person chose them."""
        for record in self._applied.requests(settings):
            try:
                await self._request(record)
            except RequestFailed as exc:
                log.warning("worker %s: the agent refused %s (%s)", self._context.worker,
                            record["type"], str(exc)[:300])
                self._notice = (f"⚠️ The agent could not use the chosen "
                                f"{'model' if record['type'] == 'set_model' else 'thinking level'}"
                                f" ({str(exc)[:200]}); it answers with its default.")
        self._applied.model, self._applied.thinking = settings.model, settings.thinking

