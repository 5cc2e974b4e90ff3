"""The long-lived agent process: spawn, ready handshake, ping health checks, restarts with
exponential backoff, and a bounded graceful shutdown.

Protocol-neutral: records are produced and interpreted by an `AgentCodec`; this module only
knows that the agent is a child speaking JSON lines on stdin/stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

from picobridge.agent.framing import decode_record, encode_record, read_lines
from picobridge.agent.port import (
    AgentCodec,
    AgentListener,
    AgentRequest,
    AgentState,
    Failure,
    Pong,
    Progress,
    Ready,
    Reply,
    Unknown,
)
from picobridge.config.settings import AgentSettings

log = logging.getLogger("picobridge.agent")

BACKOFF_FIRST = 0.5
BACKOFF_CAP = 60.0
STABLE_AFTER = 60.0
_STDERR_LINE_MAX = 4000
# Variables that belong to picobridge's own service manager or hold its secrets: the agent
# must not ping systemd's watchdog as if it were us, nor read our tokens.
_DROP_ENV_PREFIXES = ("NOTIFY_SOCKET", "WATCHDOG_", "LISTEN_", "PICOBRIDGE_",
                      "CREDENTIALS_DIRECTORY", "JOURNAL_STREAM", "INVOCATION_ID")


class AgentUnavailable(Exception):
    """The agent is not ready to take a message."""


def agent_environment(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith(_DROP_ENV_PREFIXES)}
    env.update(extra)
    return env


def backoff_delay(failures: int) -> float:
    """Delay before restart number `failures` (1-based): 0.5 s doubling, capped at a minute."""
    return float(min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** max(0, failures - 1)))


class _Child:
    """One running agent process and its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.ready = asyncio.Event()
        self.pong = asyncio.Event()
        self.write_lock = asyncio.Lock()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal_group(self, sig: int) -> None:
        # The agent leads its own process group (start_new_session), so its tool
        # subprocesses go down with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def write(self, record: dict[str, Any], timeout: float) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        async with self.write_lock:
            stdin.write(encode_record(record))
            # An agent that stopped reading fills the pipe; don't wait on it forever.
            # (asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that lands as the wait completes, and these run inside loops that must stop.)
            async with asyncio.timeout(timeout):
                await stdin.drain()


async def spawn(settings: AgentSettings) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *settings.command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=settings.workdir,
        env=agent_environment(os.environ, settings.env),
        start_new_session=True,
        limit=2**16,
    )


def describe_spawn_error(command: list[str], exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"agent command not found: {command[0]!r} (agent.command)"
    if isinstance(exc, PermissionError):
        return f"agent command not executable: {command[0]!r} (agent.command)"
    return f"cannot start agent {command[0]!r}: {exc.strerror or exc}"


class AgentSupervisor:
    def __init__(self, settings: AgentSettings, codec: AgentCodec,
                 listener: AgentListener) -> None:
        self._settings = settings
        self._codec = codec
        self._listener = listener
        self._child: _Child | None = None
        self._kill_reason: str | None = None
        self._kill = asyncio.Event()
        self._stopping = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self.state = AgentState.STOPPED
        self.last_pong: float | None = None  # wall clock, for health reports
        self.restarts = 0
        self.last_error: str | None = None
        self.state_since = time.monotonic()
        self.first_ready = asyncio.Event()
        # Since when no agent has been ready (monotonic), across restarts; None while ready.
        self.unready_since: float | None = time.monotonic()
        self.start_failures = 0  # consecutive starts that never reached ready
        self._ready_at: float | None = None

    # -- public ----------------------------------------------------------------------------

    def start(self) -> None:
        self._runner = asyncio.create_task(self._run(), name="agent-supervisor")

    @property
    def ready(self) -> bool:
        return self.state is AgentState.READY

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    async def send(self, request: AgentRequest) -> None:
        child = self._child
        if child is None or not self.ready:
            raise AgentUnavailable("agent not ready")
        try:
            await child.write(self._codec.message(request), self._settings.ping_timeout)
        except (TimeoutError, ConnectionError, BrokenPipeError) as exc:
            self.restart(f"cannot write to agent: {exc.__class__.__name__}")
            raise AgentUnavailable("agent not accepting input") from exc

    def restart(self, reason: str) -> None:
        """Kill the current process; the supervisor starts a new one after its backoff."""
        if self._child is not None and not self._kill.is_set():
            self._kill_reason = reason
            self._kill.set()

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        self._set_state(AgentState.STOPPED)

    # -- internals -------------------------------------------------------------------------

    def _set_state(self, state: AgentState) -> None:
        if state is not self.state:
            self.state = state
            self.state_since = time.monotonic()
            if state is AgentState.READY:
                self.unready_since = None
            elif self.unready_since is None:
                self.unready_since = self.state_since

    async def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            self._set_state(AgentState.STARTING)
            ready_at: float | None = None
            try:
                proc = await spawn(self._settings)
            except OSError as exc:
                reason = describe_spawn_error(self._settings.command, exc)
                log.error("%s", reason)
            else:
                reason, ready_at = await self._supervise(_Child(proc))
            if self._stopping.is_set():
                break
            self.last_error = reason
            self.start_failures = 0 if ready_at is not None else self.start_failures + 1
            await self._listener.agent_lost(reason)
            if ready_at is not None and time.monotonic() - ready_at >= STABLE_AFTER:
                failures = 0
            failures += 1
            self.restarts += 1
            delay = backoff_delay(failures)
            log.warning("agent down (%s); restarting in %.1fs", reason, delay)
            self._set_state(AgentState.RESTARTING)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()

    async def _supervise(self, child: _Child) -> tuple[str, float | None]:
        """Run one agent process until it exits, is killed or we stop; returns why it ended."""
        self._child = child
        self._kill.clear()
        self._kill_reason = None
        log.info("agent started pid=%d command=%s", child.pid, self._settings.command[0])
        reader = asyncio.create_task(self._read_stdout(child), name="agent-stdout")
        drainer = asyncio.create_task(self._drain_stderr(child), name="agent-stderr")
        health = asyncio.create_task(self._health(child), name="agent-health")
        exited = asyncio.create_task(child.proc.wait(), name="agent-wait")
        kill = asyncio.create_task(self._kill.wait())
        stopping = asyncio.create_task(self._stopping.wait())
        ready_at: float | None = None
        try:
            await asyncio.wait({exited, kill, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if child.ready.is_set():
                ready_at = self._ready_at
            if exited.done():
                reason = f"agent exited with code {child.proc.returncode}"
            elif stopping.done():
                await self._shutdown(child)
                reason = "stopped"
            else:
                reason = self._kill_reason or "killed"
                log.warning("killing agent pid=%d: %s", child.pid, reason)
                child.signal_group(signal.SIGKILL)
            await exited
            # Let the reader hand over what the agent printed before it died.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), 2.0)
            return reason, ready_at
        finally:
            self._child = None
            for task in (reader, drainer, health, kill, stopping, exited):
                task.cancel()
            await asyncio.gather(reader, drainer, health, kill, stopping, exited,
                                 return_exceptions=True)

    async def _read_stdout(self, child: _Child) -> None:
        assert child.proc.stdout is not None
        async for line in read_lines(child.proc.stdout):
            record = decode_record(line)
            if record is None:
                continue
            event = self._codec.decode(record)
            if isinstance(event, Ready):
                if not child.ready.is_set():
                    child.ready.set()
            elif isinstance(event, Pong):
                self.last_pong = time.time()
                child.pong.set()
            elif isinstance(event, Reply | Progress | Failure):
                try:
                    await self._listener.agent_event(event)
                except Exception:
                    log.exception("handling an agent event failed")
            elif isinstance(event, Unknown):
                log.debug("agent record of unknown type ignored: %.200s", record.get("type"))

    async def _drain_stderr(self, child: _Child) -> None:
        assert child.proc.stderr is not None
        async for line in read_lines(child.proc.stderr):
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                log.info("agent stderr: %s", text[:_STDERR_LINE_MAX])

    async def _health(self, child: _Child) -> None:
        settings = self._settings
        try:
            async with asyncio.timeout(settings.ready_timeout):
                await child.ready.wait()
        except TimeoutError:
            self.restart(f"no ready within {settings.ready_timeout:g}s")
            return
        self._ready_at = time.monotonic()
        self.last_pong = time.time()
        self._set_state(AgentState.READY)
        self.first_ready.set()
        log.info("agent ready pid=%d", child.pid)
        await self._listener.agent_ready()
        recheck = False
        while True:
            if not recheck:
                await asyncio.sleep(settings.ping_interval)
            recheck = False
            child.pong.clear()
            # A ping sent while a turn runs may be ignored by a busy agent even if the turn
            # ends before the pong is due: judge by both moments, or an agent that just
            # answered would be killed for it.
            busy_at_ping = self._listener.turn_running()
            try:
                await child.write(self._codec.ping(), settings.ping_timeout)
                async with asyncio.timeout(settings.ping_timeout):
                    await child.pong.wait()
            except (TimeoutError, ConnectionError, BrokenPipeError):
                if self._listener.turn_running():
                    # Busy agents may answer pings late; turn_timeout guards a turn instead.
                    log.debug("agent missed a pong during a turn")
                    continue
                if busy_at_ping:
                    # The turn ended meanwhile: ask again at once, so an agent that hung
                    # right after its turn is still caught within one ping_timeout.
                    recheck = True
                    continue
                self.restart(f"no pong within {settings.ping_timeout:g}s")
                return

    async def _shutdown(self, child: _Child) -> None:
        """Ask politely, close stdin, then SIGTERM, then SIGKILL, each step bounded."""
        timeout = self._settings.shutdown_timeout
        stdin = child.proc.stdin
        with contextlib.suppress(Exception):
            await child.write(self._codec.shutdown(), 1.0)
        if stdin is not None:
            with contextlib.suppress(Exception):
                stdin.close()
        for sig, wait in ((None, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if sig is not None:
                log.warning("agent pid=%d did not exit, sending %s", child.pid, sig.name)
                child.signal_group(sig)
            try:
                await asyncio.wait_for(asyncio.shield(child.proc.wait()), wait)
                log.info("agent pid=%d exited with code %s", child.pid, child.proc.returncode)
                return
            except TimeoutError:
                continue


async def probe_agent(settings: AgentSettings, codec: AgentCodec) -> str:
    """Start the agent once, wait for ready and a pong, shut it down; for `picobridge check`.

    Raises RuntimeError with an operator-readable reason.
    """
    try:
        proc = await spawn(settings)
    except OSError as exc:
        raise RuntimeError(describe_spawn_error(settings.command, exc)) from None
    child = _Child(proc)
    assert proc.stdout is not None and proc.stderr is not None
    stderr_tail: list[str] = []

    async def drain() -> None:
        assert proc.stderr is not None
        async for line in read_lines(proc.stderr):
            stderr_tail.append(line.decode("utf-8", "replace")[:300])
            del stderr_tail[:-5]

    async def wait_for(kind: type) -> None:
        assert proc.stdout is not None
        async for line in read_lines(proc.stdout):
            record = decode_record(line)
            if record is not None and isinstance(codec.decode(record), kind):
                return
        raise RuntimeError(f"agent exited with code {await proc.wait()} before answering"
                           + (f"; stderr: {stderr_tail[-1]}" if stderr_tail else ""))

    drainer = asyncio.create_task(drain())
    started = time.monotonic()
    try:
        try:
            await asyncio.wait_for(wait_for(Ready), settings.ready_timeout)
        except TimeoutError:
            raise RuntimeError(f"agent sent no ready within {settings.ready_timeout:g}s") from None
        await child.write(codec.ping(), settings.ping_timeout)
        try:
            await asyncio.wait_for(wait_for(Pong), settings.ping_timeout)
        except TimeoutError:
            raise RuntimeError(f"agent did not answer ping within {settings.ping_timeout:g}s"
                               ) from None
        return f"ready and answering pings ({time.monotonic() - started:.1f}s to ready)"
    finally:
        with contextlib.suppress(Exception):
            await child.write(codec.shutdown(), 1.0)
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), settings.shutdown_timeout)
        except TimeoutError:
            child.signal_group(signal.SIGKILL)
            await proc.wait()
        drainer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await drainer
