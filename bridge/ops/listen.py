"""Getting the port of `http.listen`: bound once, before the platforms and the agent start,
and handed to the HTTP server when its routes are in place.

`picobridge check` binds it too (and lets go at once), so a port that cannot be had fails
there rather than in `run`. A port another process holds is often the previous instance still
winding down during a deploy: `run` tries again for `http.listen_retry` seconds before it
gives up with an exit code systemd restarts on. Anything else (a host that is not this
machine's, a port below 1024 without the right to it) no retry can fix.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time

log = logging.getLogger("picobridge.http")

RETRY_EVERY = 0.5


class PortInUse(Exception):
    """Another process kept the port for longer than we waited."""


def host_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def bind(listen: str) -> socket.socket:
    """A listening, non-blocking socket on `listen` ("host:port"); OSError when it cannot be
    had (socket.gaierror for a host that does not resolve)."""
    host, port = host_port(listen)
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        # As aiohttp's own sites: a port whose last connections linger in TIME_WAIT is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def why_not(listen: str, exc: OSError) -> str:
    """What went wrong binding `listen`, and what would fix it, in one phrase."""
    if isinstance(exc, socket.gaierror):
        return f"http.listen {listen}: {exc.strerror or exc} (not a host of this machine)"
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EACCES and host_port(listen)[1] < 1024:
        return (f"http.listen {listen}: {reason} (ports below 1024 need root or "
                "CAP_NET_BIND_SERVICE; choose a port of 1024 or more)")
    if exc.errno == errno.EADDRINUSE:
        return f"http.listen {listen}: {reason} (another process has the port)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"http.listen {listen}: {reason} (not an address of this machine)"
    return f"http.listen {listen}: {reason}"


def probe(listen: str) -> None:
    """Bind and let go at once: raises OSError as `bind` when the port cannot be had."""
    bind(listen).close()


async def bind_retrying(listen: str, retry_for: float) -> socket.socket:
    """`bind`, trying again for up to `retry_for` seconds while the port is in use; then
    PortInUse. Other errors are raised at once."""
    deadline = time.monotonic() + retry_for
    told = False
    while True:
        try:
            return bind(listen)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            if time.monotonic() >= deadline:
                waited = f" after trying for {retry_for:g}s" if retry_for else ""
                raise PortInUse(f"{why_not(listen, exc)}{waited}") from None
            if not told:
                log.warning("http.listen %s: the port is in use; trying again for up to "
                            "%gs (http.listen_retry)", listen, retry_for)
                told = True
        await asyncio.sleep(RETRY_EVERY)
