"""An in-memory BridgeLink for the Telegram adapter's unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from picobridge.contract import (
    BridgeCommand,
    ChatRef,
    DialogAnswer,
    InboundMessage,
    StorageUnavailable,
    SubmitResult,
    catalogue,
)


@dataclass
class MemoryBridge:
    """The BridgeLink an adapter sees, in memory; `gate` holds submits to test durability."""

    submitted: list[InboundMessage] = field(default_factory=list)
    cursors: dict[str, str] = field(default_factory=dict)
    fatal_reasons: list[str] = field(default_factory=list)
    connections: list[bool] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0
    # While set, submit and set_cursor raise StorageUnavailable (and count how often).
    unavailable: str | None = None
    refused: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    # keep_running's loops, and what ended each of them (like the daemon's supervisor, which
    # starts a loop again after it raised or returned).
    loops: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    loop_endings: list[tuple[str, BaseException | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gate.set()

    async def wait_for(self, predicate: Any, what: str) -> None:
        async def wait() -> None:
            async with self.changed:
                await self.changed.wait_for(predicate)
        try:
            await asyncio.wait_for(wait(), 10)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}") from None

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def submit(self, message: InboundMessage) -> SubmitResult:
        self.waiting += 1
        await self._notify()
        await self.gate.wait()
        self.waiting -= 1
        self._refuse_if_unavailable()
        if any(m.platform_message_id == message.platform_message_id for m in self.submitted):
            return SubmitResult.DUPLICATE
        self.submitted.append(message)
        await self._notify()
        return SubmitResult.ACCEPTED

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        return True

    async def update_queued(self, platform: str, platform_message_id: str, text: str) -> bool:
        return False

    def commands(self, chat: ChatRef | None = None, *,
                 bot: str | None = None) -> tuple[BridgeCommand, ...]:
        return catalogue()

    def offered_commands(self, platform: str, kind: str | None = None
                         ) -> tuple[BridgeCommand, ...]:
        return catalogue()

    async def knows_chat(self, chat: ChatRef) -> bool:
        return False

    async def get_cursor(self, name: str) -> str | None:
        return self.cursors.get(name)

    async def set_cursor(self, name: str, value: str) -> None:
        self._refuse_if_unavailable()
        self.cursors[name] = value

    def _refuse_if_unavailable(self) -> None:
        if self.unavailable is not None:
            self.refused += 1
            asyncio.get_running_loop().create_task(self._notify())
            raise StorageUnavailable(self.unavailable)

    def heard_from(self, platform: str) -> None:
        pass

    def silence(self, platform: str, seconds: float | None) -> None:
        pass

    def rate_limited(self, platform: str) -> None:
        pass

    def connection_changed(self, platform: str, connected: bool) -> None:
        self.connections.append(connected)
        asyncio.get_running_loop().create_task(self._notify())

    def http_app(self) -> Any:
        return None

    def fatal(self, platform: str, reason: str) -> None:
        self.fatal_reasons.append(reason)
        asyncio.get_running_loop().create_task(self._notify())

    def keep_running(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        assert name not in self.loops, f"{name} already runs"
        self.loops[name] = asyncio.get_running_loop().create_task(self._keep(name, loop))

    async def _keep(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        while True:
            try:
                await loop()
                self.loop_endings.append((name, None))
            except Exception as exc:
                self.loop_endings.append((name, exc))
            await self._notify()
            await asyncio.sleep(0.05)

    async def answer_dialog(self, dialog_id: str, chat: ChatRef, user_id: str,
                            answer: DialogAnswer) -> str | None:
        return None  # no question was asked here: an answer does not count

    async def stop_running(self, name: str) -> None:
        task = self.loops.pop(name, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
