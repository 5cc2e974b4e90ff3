"""A worker: one agent child process at a time with its protocol driver, health checks and
restart state.

The worker spawns the agent, lets a fresh driver do the handshake, probes it every
`ping_interval`, restarts it when it exits or stops answering (backoff 0.5 s doubling to a
minute, reset after a stable minute), and stops it politely then firmly. Its loop survives
anything a child, a driver or the listener throws: an exception is logged with its worker and
counts as a crash, never as a silently dead task.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from picobridge.agent.child import Child
from picobridge.agent.driver import Driver, DriverContext
from picobridge.agent.filestore import NO_FILES, FileStage
from picobridge.agent.port import (
    AgentEvent,
    AgentListener,
    AgentRequest,
    AgentUnavailable,
    ControlRequest,
    ControlResult,
    Failure,
    Reply,
    WorkerInfo,
    WorkerState,
)
from picobridge.agent.process import describe_spawn_error, spawn, workdir
from picobridge.config.sections import AgentSettings
from picobridge.contract import DEFAULT_AGENT, DialogAnswer

log = logging.getLogger("picobridge.agent")

BACKOFF_FIRST = 0.5
BACKOFF_CAP = 60.0
STABLE_AFTER = 60.0

DriverFactory = Callable[..., Driver]


def backoff_delay(failures: int) -> float:
    """Delay before restart number `failures` (1-based): 0.5 s doubling, capped at a minute."""
    return float(min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** max(0, failures - 1)))


class AgentWorker:
    def __init__(self, name: str, command: Sequence[str], settings: AgentSettings,
                 driver_class: type[Driver], state_dir: Path,
                 clock: Callable[[], float] = time.monotonic,
                 origin: str = "agent.command", files: FileStage = NO_FILES,
                 agent: str = DEFAULT_AGENT) -> None:
        self._name = name
        self.agent = agent
        self._files = files
        self._origin = origin
        self._command = list(command)
        self._settings = settings
        self._driver_class = driver_class
        self._state_dir = state_dir
        self._clock = clock
        self._listener: AgentListener | None = None
        self._child: Child | None = None
        self._stopping = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._aborts: set[asyncio.Task[None]] = set()
        # Turns being aborted, set when their outcome arrives.
        self._ending: dict[str, asyncio.Event] = {}
        self.state = WorkerState.STOPPED
        self.restarts = 0
        self.turns = 0
        self.last_error: str | None = None
        self.last_pong: float | None = None
        self.first_ready = asyncio.Event()
        # Since when this worker has had no ready process (monotonic); None while ready.
        self.down_since: float | None = clock()
        self.start_failures = 0  # consecutive starts that never reached ready

    # -- Worker ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def ready(self) -> bool:
        return self.state is WorkerState.READY

    @property
    def first_start_pending(self) -> bool:
        """No process of this worker has been ready yet and none has failed to start."""
        return not self.first_ready.is_set() and self.start_failures == 0

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    async def send(self, request: AgentRequest) -> None:
        child = self._child
        if child is None or not self.ready:
            raise AgentUnavailable(f"worker {self._name} not ready")
        try:
            await child.driver.start_turn(request)
        except (TimeoutError, OSError) as exc:
            self.restart(f"cannot write to agent: {exc.__class__.__name__}")
            raise AgentUnavailable(f"worker {self._name} not accepting input") from exc

    def restart(self, reason: str) -> None:
        if self._child is not None:
            self._child.kill(reason)

    @property
    def can_abort(self) -> bool:
        return self._driver_class.can_abort

    async def answer_dialog(self, request_id: str, answer: DialogAnswer) -> None:
        child = self._child
        if child is None:
            return  # the agent that asked is gone; its turn runs again and may ask again
        try:
            await child.driver.answer_dialog(request_id, answer)
        except (TimeoutError, OSError) as exc:
            self.restart(f"cannot write to agent: {exc.__class__.__name__}")

    async def control(self, request: ControlRequest) -> ControlResult:
        child = self._child
        if child is None or not self.ready:
            raise AgentUnavailable(f"worker {self._name} not ready")
        try:
            return await child.driver.control(request)
        except (TimeoutError, OSError, ConnectionError) as exc:
            raise AgentUnavailable(f"worker {self._name}: {exc.__class__.__name__}") from exc

    def cancel_turn(self, session: str, reason: str) -> None:
        child = self._child
        if child is None:
            return
        if not child.driver.can_abort:
            self.restart(reason)
            return
        log.warning("worker %s: aborting the turn of session %s: %s", self._name, session,
                    reason)
        self._ending.setdefault(session, asyncio.Event())
        task = asyncio.create_task(self._abort(child, session, reason),
                                   name=f"abort-{self._name}")
        self._aborts.add(task)
        task.add_done_callback(self._aborts.discard)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, listener: AgentListener) -> None:
        self._listener = listener
        self._runner = asyncio.create_task(self._run(), name=f"agent-worker-{self._name}")

    async def stop(self) -> None:
        self._stopping.set()
        for task in list(self._aborts):
            task.cancel()
        if self._runner is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        self._set_state(WorkerState.STOPPED)

    def info(self) -> WorkerInfo:
        # From the live task, not a flag: a worker whose loop is gone is down, whatever its
        # state said last.
        state = self.state if self.alive or self._runner is None else WorkerState.STOPPED
        return WorkerInfo(self._name, state, self.pid, self.restarts, self.last_error,
                          self.last_pong, self.down_since, self.turns, self.agent)

    @property
    def alive(self) -> bool:
        """Whether the supervising loop runs (it only ends with stop())."""
        return self._runner is not None and not self._runner.done()

    # -- internals -------------------------------------------------------------------------

    def _set_state(self, state: WorkerState) -> None:
        if state is self.state:
            return
        self.state = state
        if state is WorkerState.READY:
            self.down_since = None
        elif self.down_since is None:
            self.down_since = self._clock()

    async def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            self._set_state(WorkerState.STARTING)
            try:
                reason, ready_at = await self._one_process()
            except Exception as exc:
                log.exception("worker %s: supervising the agent failed", self._name)
                reason, ready_at = f"supervision failed: {exc.__class__.__name__}", None
            if self._stopping.is_set():
                break
            self.last_error = reason
            self.start_failures = 0 if ready_at is not None else self.start_failures + 1
            self._set_state(WorkerState.RESTARTING)
            await self._report_lost(reason)
            if ready_at is not None and self._clock() - ready_at >= STABLE_AFTER:
                failures = 0
            failures += 1
            self.restarts += 1
            delay = backoff_delay(failures)
            log.warning("worker %s: agent down (%s); restarting in %.1fs", self._name, reason,
                        delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()

    async def _one_process(self) -> tuple[str, float | None]:
        """Run one agent process until it ends; returns why, and when it became ready."""
        try:
            cwd = await asyncio.to_thread(workdir, self._settings, self._state_dir)
            process = await spawn(self._command, cwd=cwd, env=self._settings.env)
        except OSError as exc:
            reason = describe_spawn_error(self._command, exc, self._origin)
            log.error("worker %s: %s", self._name, reason)
            return reason, None
        process.write_timeout = self._settings.ping_timeout
        context = DriverContext(self._settings, self._state_dir, self._name)
        child = Child(process, self._driver_class, context, self._emit, self._name)
        self._child = child
        try:
            return await child.run(self._health(child), self._stopping,
                                   self._settings.shutdown_timeout)
        finally:
            self._child = None

    async def _emit(self, event: AgentEvent) -> None:
        assert self._listener is not None
        if isinstance(event, Reply) and event.reply.files:
            # Before anything more is written to the agent, which may delete its files then;
            # in a thread, as copying a large file would hold up every chat. The answer's
            # other facts (what it covers of messages sent into the turn) stay.
            staged = await asyncio.to_thread(self._files.stage, event.reply)
            event = dataclasses.replace(event, reply=staged)
        ends_turn = not (isinstance(event, Reply) and event.continues is not None)
        if isinstance(event, Reply | Failure) and event.session is not None and ends_turn:
            self.turns += 1
            ended = self._ending.pop(event.session, None)
            if ended is not None:
                ended.set()
        try:
            await self._listener.agent_event(self, event)
        except Exception:
            log.exception("worker %s: handling an agent event failed", self._name)

    async def _report_lost(self, reason: str) -> None:
        assert self._listener is not None
        try:
            await self._listener.worker_lost(self, reason)
        except Exception:
            log.exception("worker %s: reporting the lost agent failed", self._name)

    async def _health(self, child: Child) -> None:
        """Handshake, then probes until one is missed; ends by asking for a restart."""
        settings = self._settings
        try:
            async with asyncio.timeout(settings.ready_timeout):
                await child.driver.handshake()
        except TimeoutError:
            child.kill(f"no ready within {settings.ready_timeout:g}s")
            return
        child.ready_at = self._clock()
        self.last_pong = time.time()
        self._set_state(WorkerState.READY)
        self.first_ready.set()
        log.info("agent ready pid=%d worker=%s", child.pid, self._name)
        assert self._listener is not None
        try:
            await self._listener.worker_ready(self)
        except Exception:
            log.exception("worker %s: reporting the ready agent failed", self._name)
        reason = await self._probe_until_missed(child)
        child.kill(reason)

    async def _probe_until_missed(self, child: Child) -> str:
        settings = self._settings
        assert self._listener is not None
        recheck = False
        while True:
            if not recheck:
                await asyncio.sleep(settings.ping_interval)
            recheck = False
            # A probe sent while a turn runs may be ignored by a busy agent even if the turn
            # ends before the answer is due: judge by both moments, or an agent that just
            # answered would be killed for it.
            busy_at_probe = self._listener.turn_running(self)
            try:
                async with asyncio.timeout(settings.ping_timeout):
                    await child.driver.probe()
                self.last_pong = time.time()
                continue
            except (TimeoutError, OSError):
                pass
            if not child.driver.probes_while_busy:
                if self._listener.turn_running(self):
                    log.debug("worker %s: agent missed a pong during a turn", self._name)
                    continue
                if busy_at_probe:
                    # The turn ended meanwhile: ask again at once, so an agent that hung
                    # right after its turn is still caught within one ping_timeout.
                    recheck = True
                    continue
            return f"no pong within {settings.ping_timeout:g}s"

    async def _abort(self, child: Child, session: str, reason: str) -> None:
        ended = self._ending.setdefault(session, asyncio.Event())
        try:
            await child.driver.abort(session)
        except Exception as exc:
            log.warning("worker %s: abort failed (%s)", self._name, exc.__class__.__name__)
        try:
            async with asyncio.timeout(self._settings.abort_grace):
                await ended.wait()
        except TimeoutError:
            if self._child is child:
                child.kill(f"{reason}; the turn did not end after an abort")
        finally:
            self._ending.pop(session, None)
