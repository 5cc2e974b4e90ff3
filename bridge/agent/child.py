"""One running agent process seen through its driver: stdout read into the driver, stderr
drained into the log, health checked, and the end of it (exit, kill, stop) turned into one
reason for the worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from picobridge.agent.driver import Driver, DriverContext, Emit
from picobridge.agent.framing import OversizedLine, decode_record, read_lines
from picobridge.agent.process import AgentProcess

log = logging.getLogger("picobridge.agent")

_STDERR_LINE_MAX = 4000
# What the agent printed just before it died is still read, for this long.
_LAST_WORDS = 2.0
_KILL_WAIT = 5.0


class Child:
    def __init__(self, process: AgentProcess, driver_class: type[Driver],
                 context: DriverContext, emit: Emit, worker: str,
                 on_stderr: Callable[[str], None] | None = None) -> None:
        self.process = process
        self._on_stderr = on_stderr
        self.driver = driver_class(process, emit, context)
        self._worker = worker
        self._kill_reason: str | None = None
        self._kill = asyncio.Event()
        self.ready_at: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self, reason: str) -> None:
        """Ask for this process to be killed (the first reason wins)."""
        if not self._kill.is_set():
            self._kill_reason = reason
            self._kill.set()

    async def run(self, health: Coroutine[Any, Any, None], stopping: asyncio.Event,
                  shutdown_timeout: float) -> tuple[str, float | None]:
        """Until the process ends: returns why, and when it became ready (monotonic)."""
        log.info("agent started pid=%d worker=%s protocol=%s", self.pid, self._worker,
                 self.driver.protocol)
        reader = asyncio.create_task(self._read_stdout(), name=f"agent-stdout-{self._worker}")
        drainer = asyncio.create_task(self._drain_stderr(), name=f"agent-stderr-{self._worker}")
        checker = asyncio.create_task(health, name=f"agent-health-{self._worker}")
        exited = asyncio.create_task(self.process.exited())
        kill = asyncio.create_task(self._kill.wait())
        stop = asyncio.create_task(stopping.wait())
        tasks = (reader, drainer, checker, exited, kill, stop)
        try:
            await asyncio.wait({exited, kill, stop}, return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                reason = f"agent exited with code {self.process.returncode}"
            elif stop.done():
                await self._shutdown(shutdown_timeout)
                reason = "stopped"
            else:
                reason = self._kill_reason or "killed"
                log.warning("killing agent pid=%d: %s", self.pid, reason)
            # Whatever it started goes too: tools in their own groups, setsid grandchildren.
            self.process.kill_tree(signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_KILL_WAIT):
                    await self.process.exited()
            # Let the reader hand over what the agent printed before it died.
            await asyncio.wait({reader}, timeout=_LAST_WORDS)
            return reason, self.ready_at
        finally:
            self.driver.closed()
            self.process.release()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _read_stdout(self) -> None:
        stdout = self.process.proc.stdout
        assert stdout is not None
        try:
            async for line in read_lines(stdout):
                if isinstance(line, OversizedLine):
                    await self._unreadable(line)
                    continue
                record = decode_record(line)
                if record is None:
                    continue
                try:
                    await self.driver.on_record(record)
                except Exception:
                    log.exception("worker %s: the %s driver failed on a record", self._worker,
                                  self.driver.protocol)
        except Exception as exc:
            # Reading is this process's lifeline: without it nothing it says arrives.
            log.exception("worker %s: reading the agent's output failed", self._worker)
            self.kill(f"reading its output failed: {exc.__class__.__name__}")

    async def _unreadable(self, head: bytes) -> None:
        try:
            await self.driver.on_unreadable(head)
        except Exception:
            log.exception("worker %s: the %s driver failed on an unreadable line", self._worker,
                          self.driver.protocol)

    async def _drain_stderr(self) -> None:
        stderr = self.process.proc.stderr
        assert stderr is not None
        with contextlib.suppress(Exception):
            async for line in read_lines(stderr):
                text = line.decode("utf-8", "replace").rstrip()
                if text:
                    log.info("agent stderr: %s", text[:_STDERR_LINE_MAX])
                    if self._on_stderr is not None:
                        self._on_stderr(text[:_STDERR_LINE_MAX])

    async def _shutdown(self, timeout: float) -> None:
        """Ask politely, close stdin, then SIGTERM, then SIGKILL, each step bounded."""
        record = self.driver.shutdown_record()
        if record is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await self.process.write(record)
        self.process.close_stdin()
        for sig, wait in ((None, timeout), (signal.SIGTERM, _KILL_WAIT)):
            if sig is not None:
                log.warning("agent pid=%d did not exit, sending %s", self.pid, sig.name)
                self.process.kill_tree(sig)
            try:
                async with asyncio.timeout(wait):
                    await self.process.exited()
                log.info("agent pid=%d exited with code %s", self.pid, self.process.returncode)
                return
            except TimeoutError:
                continue
