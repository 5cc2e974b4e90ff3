"""One agent child process: spawned in a session of its own with a clean environment, its exit
noticed from the process itself, and killed together with everything it started.

asyncio's `Process.wait()` returns only once the child has exited AND all its pipes are
closed, so an agent whose grandchild keeps the pipes open would look alive forever; the exit
is taken from the protocol's `process_exited` instead. Tools the agent runs may leave its
process group (pi puts its bash tool's commands in groups of their own) or even its session
(setsid): every process the agent started carries a marker variable in its environment, and
`kill_tree` finds them by it as well as by session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from picobridge.agent.framing import encode_record
from picobridge.config.sections import AgentSettings
from picobridge.private import private_dir

log = logging.getLogger("picobridge.agent")

# Variables that belong to picobridge's own service manager or hold its secrets: the agent
# must not ping systemd's watchdog as if it were us, nor read our tokens.
_DROP_ENV_PREFIXES = ("NOTIFY_SOCKET", "WATCHDOG_", "LISTEN_", "PICOBRIDGE_",
                      "CREDENTIALS_DIRECTORY", "JOURNAL_STREAM", "INVOCATION_ID")
# Inherited by everything the agent starts, so its leftovers can be found and killed.
MARKER_VAR = "AGENT_BRIDGE_CHILD"
_PIPE_LIMIT = 2**16
_READ_CHUNK = 64 * 1024  # see _read_in_heap_sized_chunks


def agent_environment(base: Mapping[str, str], extra: Mapping[str, str],
                      marker: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith(_DROP_ENV_PREFIXES)}
    env.update(extra)
    if marker is not None:
        env[MARKER_VAR] = marker
    return env


def workdir(settings: AgentSettings, state_dir: Path) -> Path:
    """The agent's working directory (AgentSettings.workdir_in), created when missing."""
    return private_dir(settings.workdir_in(state_dir))


def describe_spawn_error(command: Sequence[str], exc: OSError,
                         origin: str = "agent.command") -> str:
    """`origin` names the setting the command came from, for the operator to fix."""
    if isinstance(exc, FileNotFoundError):
        return f"agent command not found: {command[0]!r} ({origin})"
    if isinstance(exc, PermissionError):
        return f"agent command not executable: {command[0]!r} ({origin})"
    return f"cannot start agent {command[0]!r}: {exc.strerror or exc}"


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


class AgentProcess:
    """A running agent child and its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process, exited: asyncio.Event,
                 marker: str) -> None:
        self.proc = proc
        self._exited = exited
        self.marker = marker
        self._write_lock = asyncio.Lock()
        self.write_timeout = 10.0

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def exited(self) -> int | None:
        await self._exited.wait()
        return self.proc.returncode

    async def write(self, record: dict[str, Any]) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            raise BrokenPipeError("agent stdin closed")
        async with self._write_lock:
            stdin.write(encode_record(record))
            if not stdin.transport.get_write_buffer_size():
                # All in the pipe already: drain cannot wait (no timer needed, one per turn
                # less), and still says if the pipe is gone.
                await stdin.drain()
                return
            # An agent that stopped reading fills the pipe; don't wait on it forever.
            # (asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.)
            async with asyncio.timeout(self.write_timeout):
                await stdin.drain()

    def close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(Exception):
                self.proc.stdin.close()

    def kill_tree(self, sig: int = signal.SIGKILL) -> int:
        """Signal the agent and everything it started; returns how many processes."""
        return kill_marked(self.pid, self.marker, sig, leader_gone=self._exited.is_set())

    def release(self) -> None:
        """Drop the pipes (a grandchild may hold their other ends forever)."""
        transport = getattr(self.proc, "_transport", None)
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()


async def spawn(command: Sequence[str], *, cwd: Path | None,
                env: Mapping[str, str]) -> AgentProcess:
    loop = asyncio.get_running_loop()
    marker = uuid.uuid4().hex
    protocol: _Protocol | None = None

    def factory() -> _Protocol:
        nonlocal protocol
        protocol = _Protocol(_PIPE_LIMIT, loop)
        return protocol

    transport, _ = await loop.subprocess_exec(
        factory, *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=cwd,
        env=agent_environment(os.environ, env, marker), start_new_session=True)
    assert protocol is not None
    _read_in_heap_sized_chunks(transport)
    return AgentProcess(asyncio.subprocess.Process(transport, protocol, loop), protocol.exited,
                        marker)


def _read_in_heap_sized_chunks(transport: asyncio.SubprocessTransport) -> None:
    """asyncio reads a pipe 256 KiB at a time, in a buffer of that size that it then shrinks
    to what came. That is over glibc's threshold for taking memory from the OS (128 KiB until
    a larger block happens to be freed), so each of the agent's records cost an mmap, an
    mremap and a munmap (and the page faults and other threads' TLB flushes with them).
    64 KiB reads come from the heap; a long line takes a few more of them."""
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        if pipe is not None and hasattr(pipe, "max_size"):
            pipe.max_size = _READ_CHUNK


def _session_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # Fields after the command name, which may itself hold spaces and parentheses.
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[3]) if len(fields) > 3 else None


def _carries(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def kill_marked(leader: int, marker: str, sig: int = signal.SIGKILL, *,
                leader_gone: bool = False) -> int:
    """Signal the agent's session and every process carrying its marker.

    Once the agent itself has been reaped (`leader_gone`), its pid, and the id of its session
    and group with it, may already be another process's: pids wrap at 32768 on many systems,
    and a busy one (a test suite in parallel) gets there in minutes. Then only the processes
    carrying the marker are signalled, never "the leader" or "its session"."""
    needle = f"{MARKER_VAR}={marker}".encode()
    me = os.getpid()
    targets = set() if leader_gone else {leader}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            pid = int(entry)
            if (not leader_gone and _session_of(pid) == leader) or _carries(pid, needle):
                targets.add(pid)
    sent = 0
    if not leader_gone:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, sig)  # also what the group forks while /proc is read
    for pid in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            sent += 1
    return sent
