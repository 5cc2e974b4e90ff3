"""Assembly and lifecycle: store, outbox, agent pool, router, intake and adapters, built in one
direction (each component gets what it needs in its constructor), started in order and
stopped in the order that loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from picobridge import exit_codes
from picobridge.adapters.registry import allow_lists
from picobridge.agent.agents import AgentSet, worker_name
from picobridge.agent.filestore import OutboundFiles
from picobridge.agent.pool import WorkerPool
from picobridge.agent.protocols import driver_class
from picobridge.agent.worker import AgentWorker
from picobridge.cli.affinity import AffinityRecorder
from picobridge.cli.errors import CliError
from picobridge.cli.routing import build_routing
from picobridge.cli.signals import HeldSignals, Signals
from picobridge.config.settings import Settings
from picobridge.contract import DEFAULT_AGENT, Adapter, catalogue
from picobridge.core.access import AccessPolicy
from picobridge.core.answers import Answers
from picobridge.core.choices import SessionChoices
from picobridge.core.commands import Commands
from picobridge.core.controls import AgentControls, Exports
from picobridge.core.dialogs import Dialogs
from picobridge.core.history import History
from picobridge.core.intake import Intake
from picobridge.core.menus import ChatMenus
from picobridge.core.modes import BusyModes
from picobridge.core.orphans import Orphans
from picobridge.core.outbox import Outbox
from picobridge.core.quotas import Quotas
from picobridge.core.retries import Retries
from picobridge.core.revocation import Revocations
from picobridge.core.router import Router
from picobridge.core.speech import speaker, transcriber
from picobridge.core.switching import AgentSwitch
from picobridge.core.voice import VoiceInbox, VoiceOut
from picobridge.ops import listen
from picobridge.ops.fd_limit import raise_fd_limit
from picobridge.ops.health import agent_grace_seconds
from picobridge.ops.operations import Operations, Sources
from picobridge.ops.sdnotify import Notifier
from picobridge.private import private_dir
from picobridge.store import Store
from picobridge.supervision import TaskSupervisor

if TYPE_CHECKING:
    from picobridge.ops.http_server import HttpServer

log = logging.getLogger("picobridge.daemon")


class StartupError(CliError):
    """The daemon cannot start for a reason the operator must fix; one line and an exit code."""


@dataclass
class Daemon:
    """The assembled bridge, for the lifecycle below and `picobridge chat`."""

    settings: Settings
    store: Store
    outbox: Outbox
    router: Router
    pool: AgentSet
    intake: Intake
    adapters: dict[str, Adapter]
    tasks: TaskSupervisor
    affinity: AffinityRecorder
    http: HttpServer | None = None
    revocations: Revocations | None = None
    retries: Retries | None = None
    voice: VoiceInbox | None = None
    orphans: Orphans | None = None
    menus: ChatMenus | None = None


def build_pool(settings: Settings, assigned: Mapping[str, str] | None = None,
               on_assign: Callable[[str, str], None] | None = None,
               agent_name: str = DEFAULT_AGENT,
               files: OutboundFiles | None = None) -> WorkerPool:
    """The worker pool of one named agent (workers named by agent: `w1`, `coder/w1`)."""
    agent = settings.named_agents()[agent_name]
    where = "agent" if agent_name == DEFAULT_AGENT else f"agents.{agent_name}"
    driver = driver_class(agent.protocol)
    files = files if files is not None else outbound_files(settings)
    if agent.workers:
        workers = [AgentWorker(worker_name(agent_name, w.name or f"w{i}"), w.command, agent,
                               driver, settings.state_dir, agent=agent_name, files=files,
                               origin=f"{where}.workers[{i - 1}].command")
                   for i, w in enumerate(agent.workers, 1)]
        weights = {worker.name: w.weight for worker, w in zip(workers, agent.workers,
                                                              strict=True)}
    else:
        workers = [AgentWorker(worker_name(agent_name, f"w{i}"), agent.command, agent, driver,
                               settings.state_dir, agent=agent_name, origin=f"{where}.command",
                               files=files)
                   for i in range(1, agent.pool_size + 1)]
        weights = {}
    per_worker = min(agent.max_in_flight, driver.max_turns or agent.max_in_flight)
    if per_worker < agent.max_in_flight:
        log.info("%s.max_in_flight %d is more than %s takes: %d turn(s) per worker", where,
                 agent.max_in_flight, agent.protocol, per_worker)
    return WorkerPool(workers, max_in_flight=per_worker, weights=weights,
                      portable=driver.sessions_portable, assigned=assigned, on_assign=on_assign,
                      capabilities=driver.capabilities())


def build_agents(settings: Settings, assigned: Mapping[str, str] | None = None,
                 on_assign: Callable[[str, str], None] | None = None) -> AgentSet:
    files = outbound_files(settings)
    return AgentSet({name: build_pool(settings, assigned, on_assign, name, files)
                     for name in settings.named_agents()})


def build_commands(settings: Settings, store: Store, router: Router, pool: AgentSet,
                   choices: SessionChoices, quotas: Quotas, switch: AgentSwitch) -> Commands:
    models = {name: agent.models for name, agent in settings.named_agents().items()}
    exports = Exports(settings.state_dir / "exports", outbound_files(settings))
    controls = AgentControls(store, router, choices, models, exports)
    modes = BusyModes(store, settings.bridge.busy_mode, pool.capabilities)
    router.busy_modes = modes
    handlers = {**controls.handlers(), **History(store).handlers(), **modes.handlers()}
    return Commands(store, router, pool, handlers, controls.status_lines, quotas=quotas,
                    switch=switch)


async def assemble(settings: Settings, store: Store, adapters: Sequence[Adapter]) -> Daemon:
    by_platform = {a.platform: a for a in adapters}
    outbox = Outbox(store, by_platform)
    await store.forget_ended_assignments()
    affinity = AffinityRecorder(store)
    pool = build_agents(settings, await store.worker_assignments(), affinity)
    agents = settings.named_agents()
    tasks = TaskSupervisor()
    dialogs = Dialogs(store, outbox, settings.bridge.dialog_timeout)
    choices = SessionChoices(store)
    voice = settings.voice
    answers = Answers(store, outbox, VoiceOut(speaker(voice), voice.reply,
                                              outbound_files(settings), voice.timeout))
    router = Router(store, outbox, by_platform, pool,
                    turn_timeout=settings.agent.turn_timeout,
                    max_attempts=settings.bridge.max_attempts,
                    coalesce=settings.bridge.coalesce, tasks=tasks, dialogs=dialogs,
                    turn_timeouts={name: a.turn_timeout for name, a in agents.items()},
                    answers=answers, choices=choices)
    voice_in = VoiceInbox(transcriber(voice), store, router.arrive_soon, voice.timeout)
    http = _http_server(settings)
    limits = settings.limits
    quotas = Quotas(store, limits.messages_per_hour, limits.messages_per_day,
                    limits.exempt_users)
    routing = build_routing(settings, await store.chosen_agents())
    menus = ChatMenus(store, by_platform, lambda a: catalogue(pool.capabilities(a).commands),
                      routing.bot_agent)
    switch = AgentSwitch(store, routing, menus)
    commands = build_commands(settings, store, router, pool, choices, quotas, switch)
    access = AccessPolicy(store, allow_lists(settings))
    intake = Intake(store, router, outbox, access, commands, pool, http.app if http else None,
                    tell_after={name: a.restart_budget for name, a in agents.items()},
                    tasks=tasks, dialogs=dialogs, routing=routing, quotas=quotas,
                    voice=voice_in, menus=menus)
    orphans = Orphans(store, routing, pool.names, outbox)
    return Daemon(settings, store, outbox, router, pool, intake, by_platform, tasks, affinity,
                  http, Revocations(store, router, access, dialogs),
                  Retries(store, router, outbox, orphans=orphans), voice_in, orphans, menus)


def _http_server(settings: Settings) -> HttpServer | None:
    """The listener of http.listen; without one, aiohttp's server is never loaded."""
    http = settings.http
    if not http.listen:
        return None
    from picobridge.ops.http_server import HttpServer
    from picobridge.ops.listener_guard import ListenerLimits

    return HttpServer(http.listen, ListenerLimits(http.max_connections, http.header_timeout,
                                                  http.body_timeout))


def outbound_files(settings: Settings) -> OutboundFiles:
    """Where the files agents send may come from, and where their copies are kept."""
    dirs = settings.attachments.outbound_dirs
    if dirs is None:
        outbox = settings.state_dir / "outbox"
        private_dir(outbox)  # a folder agents may drop files into
        dirs = [*(a.workdir_in(settings.state_dir) for a in settings.named_agents().values()),
                outbox]
    return OutboundFiles(settings.media_dir / "outbound", dirs,
                         settings.attachments.outbound_max_bytes)


def sources(daemon: Daemon) -> Sources:
    agents = daemon.settings.named_agents()

    async def first_ready() -> None:
        waits = [asyncio.create_task(w.first_ready.wait()) for w in daemon.pool.workers]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()

    return Sources(
        platforms=list(daemon.adapters), workers=daemon.pool.infos, router=daemon.router.stats,
        intake=daemon.intake.stats, outbox=daemon.outbox.stats, store=daemon.store,
        failing=daemon.tasks.failing, first_ready=first_ready,
        connections_changed=daemon.intake.connections_changed,
        restart_budget=max(a.restart_budget for a in agents.values()),
        agent_grace=max(agent_grace_seconds(a.ready_timeout) for a in agents.values()))


async def start(daemon: Daemon) -> None:
    # The port first: a port that cannot be had is found before platforms connect and the
    # agent starts, and it is served once the adapters have added their routes.
    sock = await _bind_listener(daemon.settings) if daemon.http is not None else None
    try:
        # Outbox first: what the last run left undelivered goes out before anything the
        # router stores while it loads (a give-up notice), and is not read back a second time.
        await daemon.outbox.start()
        if daemon.orphans is not None:
            await daemon.orphans.adopt_waiting()
        await daemon.router.start()
        daemon.pool.start(daemon.router)
        daemon.tasks.start("outage-notices", daemon.intake.watch_outages)
        if daemon.revocations is not None:
            daemon.tasks.start("access-revocations", daemon.revocations.watch)
        if daemon.retries is not None:
            daemon.tasks.start("operator-retries", daemon.retries.watch)
        for adapter in daemon.adapters.values():
            await adapter.start(daemon.intake)
            log.info("platform %s started", adapter.platform)
        if daemon.http is not None:
            await daemon.http.start(sock)
    except BaseException:
        if sock is not None:
            sock.close()
        raise


async def _bind_listener(settings: Settings) -> socket.socket:
    """http.listen's socket; a port still in use after http.listen_retry seconds exits with
    a code systemd restarts on, anything else with the configuration's."""
    http = settings.http
    assert http.listen is not None
    try:
        return await listen.bind_retrying(http.listen, http.listen_retry)
    except listen.PortInUse as exc:
        raise StartupError(str(exc), exit_codes.BUSY) from None
    except OSError as exc:  # the host is not ours or not a host, a port we may not have
        raise StartupError(listen.why_not(http.listen, exc), exit_codes.CONFIG) from None


async def stop(daemon: Daemon) -> None:
    grace = daemon.settings.agent.shutdown_timeout
    # Adapters keep accepting (durably) while turns finish and replies go out; they stop last
    # because delivering needs them.
    if daemon.voice is not None:
        await daemon.voice.stop()  # its messages are stored; the next start sends them
    await daemon.router.stop(grace)
    await daemon.pool.stop()
    await daemon.affinity.settle()
    await daemon.outbox.stop(grace)
    if daemon.menus is not None:
        await daemon.menus.stop()
    for adapter in daemon.adapters.values():
        try:
            await adapter.stop()
        except Exception:
            log.exception("stopping %s failed", adapter.platform)
    if daemon.http is not None:
        await daemon.http.stop()
    await daemon.tasks.stop()


async def run(
    settings: Settings,
    store: Store,
    adapters: Sequence[Adapter],
    *,
    finished: Callable[[Daemon], Coroutine[Any, Any, None]] | None = None,
    held: HeldSignals | None = None,
) -> int:
    """Run until SIGTERM/SIGINT, a fatal platform error, or `finished` returns; `held`
    signals came while the daemon proper started (cli/handoff.py)."""
    raise_fd_limit()
    daemon = await assemble(settings, store, adapters)
    views = sources(daemon)
    ops = Operations(views, Notifier(os.environ))
    if daemon.http is not None:
        from picobridge.ops.endpoints import add_routes  # with aiohttp's server, metrics

        add_routes(daemon.http.app, views, daemon.adapters)
    signals = Signals(asyncio.get_running_loop(), held)
    signals.install()
    code = exit_codes.OK
    try:
        await start(daemon)
        ops.start()
        code = await _until_done(daemon, signals, finished)
        if code == exit_codes.OK and signals.first is signal.SIGINT:
            code = exit_codes.INTERRUPTED  # Ctrl-C: 130, as a shell reports it
        log.info("shutting down")
    finally:
        try:
            await ops.stop()
            await stop(daemon)
        finally:
            signals.remove()
    return code


async def _until_done(daemon: Daemon, signals: Signals,
                      finished: Callable[[Daemon], Coroutine[Any, Any, None]] | None) -> int:
    stopper = asyncio.create_task(signals.stop_requested.wait())
    waiters: set[asyncio.Future[Any]] = {stopper, daemon.intake.fatal_error}
    ender = asyncio.create_task(finished(daemon)) if finished is not None else None
    if ender is not None:
        waiters.add(ender)
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    code = exit_codes.PLATFORM_AUTH if daemon.intake.fatal_error.done() else exit_codes.OK
    if ender is not None:
        if not ender.done():
            ender.cancel()
        elif ender.exception() is not None:
            raise ender.exception()  # type: ignore[misc]
    return code


async def wait_until_settled(daemon: Daemon, chat_key: str, changed: asyncio.Event) -> None:
    """Return once nothing for this chat waits for the agent or for delivery."""
    while True:
        changed.clear()
        counts = await daemon.store.open_for_chat(chat_key)
        if counts == 0:
            return
        with contextlib.suppress(TimeoutError):
            # The event fires when a reply is printed; the timeout covers failures elsewhere.
            async with asyncio.timeout(1.0):
                await changed.wait()
