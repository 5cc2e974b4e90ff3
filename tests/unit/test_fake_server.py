"""The base of the fake platforms (tests/fakes/server.py): lifecycle, the call log, wait_for,
and the fault vocabulary, on a minimal platform whose errors are plain JSON."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from tests.fakes.server import JSON, Call, FakeServer, Fault
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram


class EchoServer(FakeServer):
    """Every POST /{method} is logged and answered {"ok": true} unless a fault says otherwise."""

    FLOOD_METHODS = frozenset({"send"})

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/{method}", self._handle)

    def error_envelope(self, fault: Fault) -> tuple[JSON, dict[str, str]]:
        headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
        return {"ok": False, "error": fault.error or "boom", **(fault.extra or {})}, headers

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        call = self.record(Call(request.match_info["method"], await request.json()))
        scripted = await self.guard(call.method, request, call)
        if scripted is not None:
            return scripted
        call.response = {"ok": True}
        self.notify()
        return web.json_response(call.response)


@pytest.fixture
async def server() -> AsyncIterator[EchoServer]:
    async with EchoServer() as fake:
        yield fake


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def call(http: aiohttp.ClientSession, server: EchoServer, method: str,
               **params: object) -> tuple[int, JSON, str | None]:
    async with http.post(f"{server.url}/{method}", json=params) as resp:
        return resp.status, await resp.json(), resp.headers.get("Retry-After")


async def test_call_log_and_wait_for(server: EchoServer, http: aiohttp.ClientSession) -> None:
    task = asyncio.create_task(server.wait_for_call("send", lambda c: c.params["n"] == 2))
    for n in range(3):
        await call(http, server, "send", n=n)
    found = await task
    assert found.params == {"n": 2} and found.ok and found.status == 200
    assert [c.params["n"] for c in server.calls_to("send")] == [0, 1, 2]
    assert await server.wait_for(lambda: server.calls_to("send")) == server.calls
    with pytest.raises(TimeoutError, match=r"nothing else.*send->200"):
        await server.wait_for(lambda: False, "nothing else", timeout=0.05)


async def test_a_condition_met_without_notify_fails_the_wait(server: EchoServer) -> None:
    # A change nobody announced is found at the deadline: a bug in the fake, never a pass.
    changed: list[int] = []
    asyncio.get_running_loop().call_soon(changed.append, 1)
    with pytest.raises(AssertionError, match=r"silent change came true but nothing called"):
        await server.wait_for(lambda: changed, "silent change", timeout=0.05)
    assert await server.wait_for(lambda: changed) == [1]  # true already: no wait at all


async def test_fail_next_counts_and_429_has_retry_after(server: EchoServer,
                                                        http: aiohttp.ClientSession) -> None:
    server.fail_next("send", 429, times=2)
    server.fail_next("send", 503, error="later", extra={"why": "maintenance"})
    results = [await call(http, server, "send") for _ in range(4)]
    assert [(status, retry) for status, _, retry in results] == [
        (429, "1"), (429, "1"), (503, None), (200, None)]
    assert results[2][1] == {"ok": False, "error": "later", "why": "maintenance"}
    assert [c.status for c in server.calls] == [429, 429, 503, 200]
    assert (await call(http, server, "other"))[0] == 200  # faults are per method


async def test_fail_until_cleared_and_raw_body(server: EchoServer,
                                               http: aiohttp.ClientSession) -> None:
    server.fail_next("send", 500, times=None)
    assert [(await call(http, server, "send"))[0] for _ in range(3)] == [500] * 3
    server.clear_faults("send")
    assert (await call(http, server, "send"))[0] == 200
    server.fail_next("send", 502, body=b"<html>bad gateway</html>")
    async with http.post(f"{server.url}/send", json={}) as resp:
        assert (resp.status, await resp.text()) == (502, "<html>bad gateway</html>")


async def test_stall_holds_until_released(server: EchoServer,
                                          http: aiohttp.ClientSession) -> None:
    server.stall_next("send", times=None)
    held = asyncio.create_task(call(http, server, "send", n=1))
    await server.wait_for_call("send")
    done, _ = await asyncio.wait({held}, timeout=0.1)
    assert not done
    server.release("other")  # another method's release does not let it go
    done, _ = await asyncio.wait({held}, timeout=0.1)
    assert not done
    server.release("send")
    assert (await held)[0] == 200
    assert (await call(http, server, "send"))[0] == 200  # release also ends times=None


async def test_stop_answers_stalled_calls_and_restart_keeps_the_port(
        server: EchoServer, http: aiohttp.ClientSession) -> None:
    server.stall_next("send")
    held = asyncio.create_task(call(http, server, "send"))
    await server.wait_for_call("send")
    port = server.port
    await server.stop()
    assert (await held)[0] == 502
    with pytest.raises(aiohttp.ClientConnectionError):
        await call(http, server, "send")
    await server.start()
    assert server.port == port and (await call(http, server, "send"))[0] == 200


async def test_disconnect_and_flood(server: EchoServer, http: aiohttp.ClientSession) -> None:
    server.disconnect_next("send")
    with pytest.raises(aiohttp.ClientError):
        await call(http, server, "send")
    server.set_flood(2, retry_after=4)
    statuses = [await call(http, server, "send") for _ in range(4)]
    assert [(s, r) for s, _, r in statuses] == [(200, None), (429, "4"), (200, None),
                                                (429, "4")]
    assert (await call(http, server, "other"))[0] == 200  # not a flooded method
    server.set_flood(0)
    assert (await call(http, server, "send"))[0] == 200


async def test_background_work_is_awaitable_and_cancelled_on_stop(server: EchoServer) -> None:
    release = asyncio.Event()
    server.spawn(release.wait())
    assert not server.idle
    release.set()
    await server.wait_for(lambda: server.idle, "the task to end")
    server.spawn(asyncio.Event().wait())
    await server.stop()
    assert server.idle


@pytest.mark.parametrize("fake_type", [FakeTelegram, FakeSlack])
def test_both_platforms_speak_the_same_fault_vocabulary(fake_type: type[FakeServer]) -> None:
    for name in ("fail_next", "stall_next", "disconnect_next", "release", "set_flood",
                 "revoke", "clear_faults", "redeliver", "wait_for", "wait_for_call",
                 "calls_to"):
        assert callable(getattr(fake_type, name)), name
    assert fake_type.FLOOD_METHODS
