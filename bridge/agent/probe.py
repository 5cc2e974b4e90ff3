"""`picobridge check`'s look at the agent: start it once, wait for the protocol's handshake and
one health probe, shut it down. Raises RuntimeError with an operator-readable reason."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from picobridge.agent.child import Child
from picobridge.agent.driver import Driver, DriverContext
from picobridge.agent.port import AgentEvent
from picobridge.agent.process import describe_spawn_error, spawn, workdir
from picobridge.config.sections import AgentSettings


async def _ignore(event: AgentEvent) -> None:
    return None


async def probe_agent(command: Sequence[str], settings: AgentSettings,
                      driver_class: type[Driver], state_dir: Path, name: str = "check") -> str:
    try:
        cwd = await asyncio.to_thread(workdir, settings, state_dir)
        process = await spawn(command, cwd=cwd, env=settings.env)
    except OSError as exc:
        raise RuntimeError(describe_spawn_error(command, exc)) from None
    process.write_timeout = settings.ping_timeout
    stderr_tail: list[str] = []

    def keep(line: str) -> None:
        stderr_tail.append(line[:300])
        del stderr_tail[:-5]

    child = Child(process, driver_class, DriverContext(settings, state_dir, name), _ignore, name,
                  keep)
    done = asyncio.Event()
    verdict: list[tuple[bool, str]] = []

    async def check() -> None:
        started = time.monotonic()
        try:
            async with asyncio.timeout(settings.ready_timeout):
                await child.driver.handshake()
        except TimeoutError:
            verdict.append((False, f"agent sent no ready within {settings.ready_timeout:g}s"))
            done.set()
            return
        try:
            async with asyncio.timeout(settings.ping_timeout):
                await child.driver.probe()
        except (TimeoutError, OSError):
            verdict.append((False, "agent did not answer its health probe within "
                                   f"{settings.ping_timeout:g}s"))
        else:
            verdict.append((True, "ready and answering pings "
                                  f"({time.monotonic() - started:.1f}s to ready)"))
        done.set()

    reason, _ = await child.run(check(), done, settings.shutdown_timeout)
    if verdict and verdict[0][0]:
        return verdict[0][1]
    if verdict:
        raise RuntimeError(verdict[0][1])
    raise RuntimeError(f"{reason} before answering"
                       + (f"; stderr: {stderr_tail[-1]}" if stderr_tail else ""))
