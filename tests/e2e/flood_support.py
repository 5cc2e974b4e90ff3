"""An attacker's half-open connections against the daemon's HTTP listener, and a prober that
times /healthz through them: shared by the listener test and bench/listener_flood.py.
Everything on 127.0.0.1, every loop bounded."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from dataclasses import dataclass, field

from aiohttp import ClientSession, ClientTimeout

# Headers begun and never finished (slowloris), and a POST announcing 1 MB that sends a byte.
HALF_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
SHORT_BODY = (b"POST /telegram/webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")


def soft_fd_limit(limit: int) -> None:
    """For a preexec_fn: the daemon starts with this soft open-file limit (systemd's 1024)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


def room_for(connections: int) -> None:
    """This (test) process needs a descriptor per connection it holds open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))


@dataclass
class Flood:
    port: int
    count: int
    opened_at: float = 0.0
    closed_after: list[float] = field(default_factory=list)  # seconds, per closed connection
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)
    _watchers: list[asyncio.Task[None]] = field(default_factory=list)

    async def open(self, batch: int = 100) -> None:
        """Open `count` connections, half of each kind, and watch each for its close."""
        self.opened_at = time.monotonic()
        for start in range(0, self.count, batch):
            kinds = [HALF_HEAD if i % 2 else SHORT_BODY
                     for i in range(start, min(start + batch, self.count))]
            await asyncio.gather(*(self._one(kind) for kind in kinds))

    async def _one(self, first_bytes: bytes) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:  # refused at once: counts as closed
            self.closed_after.append(time.monotonic() - self.opened_at)
            return
        self._writers.append(writer)
        with contextlib.suppress(OSError):
            writer.write(first_bytes)
        self._watchers.append(asyncio.create_task(self._until_closed(reader)))

    async def _until_closed(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError):
            while await reader.read(65536):
                pass
        self.closed_after.append(time.monotonic() - self.opened_at)

    async def all_closed(self, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*self._watchers)

    def close(self) -> None:
        for task in self._watchers:
            task.cancel()
        for writer in self._writers:
            writer.transport.abort()


async def probe_health(port: int, timeout: float = 2.0) -> float:
    """Seconds /healthz took to answer (on a fresh connection, as a prober makes one);
    raises when it does not answer within `timeout`."""
    started = time.monotonic()
    async with (ClientSession(timeout=ClientTimeout(total=timeout)) as session,
                session.get(f"http://127.0.0.1:{port}/healthz") as resp):
        await resp.read()
        assert resp.status in (200, 503), resp.status
        assert "status" in await resp.json()
    return time.monotonic() - started


def log_bytes(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8", "replace")) + 1 for line in lines)
