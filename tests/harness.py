"""Helpers for end-to-end tests: run the real `picobridge` CLI as a subprocess with a TOML config,
watch its log, and read what the fake agent received.

Tests talk to the daemon only through the fakes (platform and agent) and its process
boundaries (stdin/stdout, exit code, stderr log)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import tomli_w

FAKE_AGENT = Path(__file__).parent / "fakes" / "fake_picobot.py"
# How long a wait for an event (a log line, an answer) lasts by default. Waits end when the
# event comes, so a generous bound costs nothing when things work; it only sets how long a
# broken test takes to fail. The suite runs in parallel, beside other work: at a load of 25
# on the 2 cores a daemon took over 20 s to connect.
WAIT = 60.0
REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (made if missing): for what the whole test run
    makes once (an npm install, a wheel of this checkout) while several xdist workers, or test
    runs, may ask for it at the same moment. Check for the thing again once inside."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def needs_root(why: str) -> None:
    """Fail, saying so, where a test cannot work without root (mounts, a second user)."""
    if os.geteuid() != 0:
        raise AssertionError(f"this test needs root ({why}): run the suite as root, e.g. "
                             "`sudo scripts/test` (CI does)")


# The folder shared by the whole test run, every xdist worker included (tests/conftest.py makes
# it, and removes it at the end); readable by every user, for what the unprivileged user runs.
RUN_DIR_VARIABLE = "PB_TEST_RUN_DIR"


def run_dir() -> Path:
    path = os.environ.get(RUN_DIR_VARIABLE)
    if path is None:  # a helper used outside pytest: a folder for this process
        path = os.environ[RUN_DIR_VARIABLE] = tempfile.mkdtemp(prefix="pb-test-run-")
        os.chmod(path, 0o755)
        atexit.register(shutil.rmtree, path, True)
    return Path(path)


def made_once(name: str, make: Callable[[Path], None]) -> Path:
    """`run_dir()/name`, made by `make(path)` for whichever test asks first; the others (in
    any worker) wait for it and reuse it. For what is costly and the same for every test: a
    wheel of this checkout, an installed copy for another user."""
    target = run_dir() / name
    done = run_dir() / f"{name}.done"
    if not done.exists():
        with exclusive(run_dir() / f"{name}.lock"):
            if not done.exists():
                shutil.rmtree(target, ignore_errors=True)  # a half-made one
                make(target)
                done.touch()
    return target


# Builds of this checkout (`pip wheel .`, `pip install .`) write into its build/ folder: one at
# a time, or two workers' builds trip over each other's files.
BUILD_LOCK = REPO / "build" / ".tests-build.lock"


def agent_command(state: Path, *flags: str) -> list[str]:
    return [sys.executable, str(FAKE_AGENT), "--state", str(state), *flags]


def base_config(tmp: Path, *agent_flags: str, **agent: Any) -> dict[str, Any]:
    """A config with fast health timings suitable for tests, and the fake agent."""
    return {
        "state_dir": str(tmp / "state"),
        "agent": {
            "command": agent_command(tmp / "agent", *agent_flags),
            "ready_timeout": 10,
            "ping_interval": 1,
            "ping_timeout": 1,
            "turn_timeout": 30,
            "shutdown_timeout": 3,
            **agent,
        },
        "log": {"level": "DEBUG"},
    }


def named_agent(tmp: Path, name: str, *flags: str) -> dict[str, Any]:
    """An `[agents.NAME]` table: the fake agent saying who answers (`[NAME] echo: ...`), its
    state in `tmp/agent-NAME` (its AgentJournal), with base_config's fast timings."""
    return {**base_config(tmp)["agent"],
            "command": agent_command(tmp / f"agent-{name}", "--name", name, *flags)}


# For the storage-outage tests: another process's write lock on the database counts as an
# outage after half a second instead of the default 5 s (store.busy_timeout), so they wait for
# the daemon's reaction, not for SQLite's timer.
SHORT_BUSY_TIMEOUT: dict[str, Any] = {"store": {"busy_timeout": 0.5}}


def write_config(tmp: Path, config: dict[str, Any], name: str = "config.toml") -> Path:
    path = tmp / name
    path.write_text(tomli_w.dumps(config), encoding="utf-8")
    return path


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICOBRIDGE_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("NOTIFY_SOCKET", None)
    env.update(extra or {})
    return env


def picobridge_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "picobridge", *args]


async def run_cli(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
                  timeout: float = 60) -> tuple[int, str, str]:
    """Run a short-lived picobridge command; returns (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *picobridge_argv(*args), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=cli_env(env), cwd=REPO)
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate(stdin)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


async def sessions_by_chat(config: Path) -> dict[str, str]:
    """`picobridge sessions list`: each chat key's line (session, agent, activity, waiting)."""
    code, out, err = await run_cli("sessions", "list", "--config", str(config))
    assert code == 0, out + err
    return {line.split("\t")[0]: line for line in out.splitlines()}


class Daemon:
    """A `picobridge run` (or `chat`) subprocess whose stderr log is collected line by line."""

    def __init__(self, config_path: Path, command: str = "run",
                 env: dict[str, str] | None = None,
                 preexec: Callable[[], None] | None = None) -> None:
        self.config_path = config_path
        self.command = command
        self.env = env
        self.preexec = preexec  # runs in the child before picobridge (e.g. setrlimit)
        self.proc: asyncio.subprocess.Process | None = None
        self.log_lines: list[str] = []
        self.stdout_lines: list[str] = []
        self._changed = asyncio.Condition()
        self._readers: list[asyncio.Task[None]] = []

    async def start(self) -> Daemon:
        self.proc = await asyncio.create_subprocess_exec(
            *picobridge_argv(self.command, "--config", str(self.config_path)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=cli_env(self.env), cwd=REPO,
            preexec_fn=self.preexec)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            asyncio.create_task(self._collect(self.proc.stderr, self.log_lines)),
            asyncio.create_task(self._collect(self.proc.stdout, self.stdout_lines)),
        ]
        return self

    async def _collect(self, stream: asyncio.StreamReader, into: list[str]) -> None:
        while True:
            try:
                line = await stream.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if line:
                    into.append(line.decode("utf-8", "replace"))
                break
            except asyncio.LimitOverrunError:
                line = await stream.read(2**20)
            into.append(line.decode("utf-8", "replace").rstrip("\n"))
            async with self._changed:
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    @property
    def log(self) -> str:
        return "\n".join(self.log_lines)

    def log_since(self, mark: int) -> str:
        """The log from line `mark` on: a test on a daemon that several tests share takes
        `len(daemon.log_lines)` at its start."""
        return "\n".join(self.log_lines[mark:])

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = WAIT,
                         what: str = "condition") -> None:
        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(
                    lambda: predicate() or (self.proc is not None
                                            and self.proc.returncode is not None
                                            and all(r.done() for r in self._readers)))
        try:
            async with asyncio.timeout(timeout):
                await wait()
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}; log tail:\n"
                                 + "\n".join(self.log_lines[-40:])) from None
        if not predicate():
            raise AssertionError(f"daemon exited ({self.returncode}) before {what}; log tail:\n"
                                 + "\n".join(self.log_lines[-40:]))

    async def wait_for_log(self, pattern: str, timeout: float = WAIT) -> str:
        regex = re.compile(pattern)
        found: list[str] = []

        def seen() -> bool:
            found[:] = [line for line in self.log_lines if regex.search(line)]
            return bool(found)

        await self.wait_until(seen, timeout, f"log line /{pattern}/")
        return found[0]

    async def send_stdin(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    def close_stdin(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.close()

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    async def wait(self, timeout: float = 30) -> int:
        assert self.proc is not None
        async with asyncio.timeout(timeout):
            code = await self.proc.wait()
        await asyncio.gather(*self._readers, return_exceptions=True)
        return code

    async def stop(self, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
        return await self.wait(timeout)

    async def kill(self) -> None:
        """SIGKILL, as an OOM killer or a power cut at the process level would."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        await self.wait()

    async def __aenter__(self) -> Daemon:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                await self.stop(timeout=20)
            except TimeoutError:
                await self.kill()


async def http_port(daemon: Daemon) -> int:
    """The port of the daemon's HTTP listener, configured as `http.listen = "127.0.0.1:0"`."""
    line = await daemon.wait_for_log(r"http listening on 127\.0\.0\.1:\d+")
    match = re.search(r":(\d+)$", line)
    assert match is not None
    return int(match.group(1))


class AgentJournal:
    """What the fake agent received, from its journal file (written before it acts)."""

    def __init__(self, state: Path) -> None:
        self.path = state / "journal.ndjson"

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_bytes().split(b"\n"):
            if line.strip():
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def messages(self) -> list[dict[str, Any]]:
        return [e["record"] for e in self.entries()
                if isinstance(e.get("record"), dict) and e["record"].get("type") == "message"]

    def starts(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("event") == "start"]

    async def wait_until(self, predicate: Callable[[Self], bool], timeout: float = WAIT,
                         what: str = "agent journal condition") -> None:
        # The journal is another process's file: there is no event to await, so look often.
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.05)


def free_port() -> int:
    """A port on 127.0.0.1 free a moment ago, for a config's http.listen (the daemon's own
    `run` tries again for a while should another test take it meanwhile)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_status_kib(pid: int, field: str) -> int:
    """A kB figure of /proc/PID/status (VmRSS, VmHWM, ...)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def unfinished(db: Path) -> int:
    """How many messages in a daemon's store are not yet answered and delivered, and answers
    not yet sent: none once a daemon that several tests share has finished a test's work."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM inbound"
            "        WHERE status IN ('received', 'dispatched', 'answered'))"
            " + (SELECT count(*) FROM outbox WHERE status = 'pending')").fetchone()
    return int(row[0])


async def settle(db: Path, *also: Callable[[], bool], timeout: float = WAIT) -> None:
    """Until the daemon of the store `db` has nothing left to do (and each of `also` holds):
    what a test on a shared daemon awaits first, so that the work of one before it (one that
    failed midway, say) cannot reach into what it judges."""
    # The store is another process's file: there is no event to await, so look often.
    deadline = time.monotonic() + timeout
    while not (all(check() for check in also) and unfinished(db) == 0):
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the shared daemon to finish the work "
                                 "of the tests before")
        await asyncio.sleep(0.05)
