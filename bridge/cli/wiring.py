"""Assembly and lifecycle: store, outbox, router, agent and adapters, started in order and
stopped in the order that loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from picobridge import exit_codes
from picobridge.agent.protocols.picobot_json import PicobotCodec
from picobridge.agent.worker import AgentSupervisor
from picobridge.config.settings import Settings
from picobridge.contract import Adapter
from picobridge.core.access import AccessPolicy
from picobridge.core.commands import AgentSummary, Commands
from picobridge.core.intake import Intake
from picobridge.core.outbox import Outbox
from picobridge.core.router import Router
from picobridge.ops.http_server import HttpServer
from picobridge.ops.metrics import Metrics
from picobridge.ops.operations import Operations
from picobridge.ops.sdnotify import Notifier
from picobridge.store import Store

log = logging.getLogger("picobridge.daemon")


@dataclass
class Bridge:
    """The running core, handed to whatever needs to look inside (health, chat mode)."""

    settings: Settings
    store: Store
    outbox: Outbox
    router: Router
    agent: AgentSupervisor
    intake: Intake
    adapters: dict[str, Adapter]
    http: HttpServer | None = None

    def agent_summary(self) -> AgentSummary:
        return AgentSummary(self.agent.state.value, self.agent.pid, self.agent.restarts,
                            self.agent.last_error)


def allow_lists(settings: Settings) -> dict[str, frozenset[str]]:
    return {
        "telegram": frozenset(str(u) for u in settings.telegram.allowed_users),
        "slack": frozenset(settings.slack.allowed_users),
    }


async def assemble(settings: Settings, store: Store, adapters: Sequence[Adapter]) -> Bridge:
    by_platform = {a.platform: a for a in adapters}
    outbox = Outbox(store, by_platform)
    router = Router(
        store, outbox, by_platform,
        max_in_flight=settings.agent.max_in_flight,
        turn_timeout=settings.agent.turn_timeout,
        max_attempts=settings.bridge.max_attempts,
        coalesce=settings.bridge.coalesce,
    )
    agent = AgentSupervisor(settings.agent, PicobotCodec(), router)
    router.attach_agent(agent)
    http = HttpServer(settings.http.listen) if settings.http.listen else None
    bridge: Bridge
    commands = Commands(store, router, lambda: bridge.agent_summary())
    intake = Intake(store, router, outbox, AccessPolicy(store, allow_lists(settings)), commands,
                    http.app if http else None, agent_down_since=lambda: agent.unready_since,
                    tell_after=settings.agent.restart_budget)
    bridge = Bridge(settings, store, outbox, router, agent, intake, by_platform, http)
    return bridge


async def start(bridge: Bridge) -> None:
    # Outbox first: what the last run left undelivered goes out before anything the router
    # stores while it loads (a give-up notice), and is not read back a second time.
    await bridge.outbox.start()
    await bridge.router.start()
    bridge.agent.start()
    for adapter in bridge.adapters.values():
        await adapter.start(bridge.intake)
        log.info("platform %s started", adapter.platform)
    if bridge.http is not None:
        await bridge.http.start()


async def stop(bridge: Bridge) -> None:
    grace = bridge.settings.agent.shutdown_timeout
    # Adapters keep accepting (durably) while turns finish and replies go out; they stop last
    # because delivering needs them.
    await bridge.router.stop(grace)
    await bridge.agent.stop()
    await bridge.outbox.stop(grace)
    for adapter in bridge.adapters.values():
        try:
            await adapter.stop()
        except Exception:
            log.exception("stopping %s failed", adapter.platform)
    if bridge.http is not None:
        await bridge.http.stop()


async def run(
    settings: Settings,
    store: Store,
    adapters: Sequence[Adapter],
    *,
    finished: Callable[[Bridge], Coroutine[Any, Any, None]] | None = None,
) -> int:
    """Run until SIGTERM/SIGINT, a fatal platform error, or `finished` returns."""
    bridge = await assemble(settings, store, adapters)
    ops = Operations(bridge, Notifier(os.environ), Metrics(bridge.adapters))
    ops.add_routes()
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_requested.set)
    code = exit_codes.OK
    try:
        await start(bridge)
        ops.start()
        stopper = asyncio.create_task(stop_requested.wait())
        waiters: set[asyncio.Future[Any]] = {stopper, bridge.intake.fatal_error}
        ender = asyncio.create_task(finished(bridge)) if finished is not None else None
        if ender is not None:
            waiters.add(ender)
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if bridge.intake.fatal_error.done():
            code = exit_codes.PLATFORM_AUTH
        if ender is not None:
            if not ender.done():
                ender.cancel()
            elif ender.exception() is not None:
                raise ender.exception()  # type: ignore[misc]
        log.info("shutting down")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await ops.stop()
        await stop(bridge)
    return code


async def wait_until_settled(bridge: Bridge, chat_key: str, changed: asyncio.Event) -> None:
    """Return once nothing for this chat waits for the agent or for delivery."""
    while True:
        changed.clear()
        counts = await bridge.store.open_for_chat(chat_key)
        if counts == 0:
            return
        with contextlib.suppress(TimeoutError):
            # The event fires when a reply is printed; the timeout covers failures elsewhere.
            async with asyncio.timeout(1.0):
                await changed.wait()
