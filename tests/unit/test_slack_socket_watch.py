"""The Socket Mode watch (adapters/slack/socketmode.py) in-process: slack-sdk's client has
known ways of ending up alive but deaf (its processing task gone, a reconnect that failed
half-way); the watch, run under the bridge's supervision, replaces such a client. Its death
cannot be provoked from outside the process, hence this test reaches into the client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import picobridge.adapters.slack.socketmode as socketmode
from picobridge.adapters.slack.adapter import LOOP_SOCKET, SlackAdapter
from picobridge.config.loader import settings_of
from tests.fakes.slack import FakeSlack
from tests.unit.test_slack_adapter import StubBridge


@pytest.fixture
async def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> AsyncIterator[tuple[FakeSlack, StubBridge, SlackAdapter]]:
    monkeypatch.setattr(socketmode, "MONITOR_INTERVAL", 0.05)
    async with FakeSlack(ack_timeout=0.5) as fake:
        # The `slack` section is a field only of the model built at run time (settings_model);
        # type checkers see the core model, hence the untyped keywords.
        sections: dict[str, Any] = {"slack": {
            "bot_token": fake.bot_token, "app_token": fake.app_token,
            "base_url": fake.api_url}}
        settings = settings_of(state_dir=tmp_path, **sections)
        bridge = StubBridge()
        adapter = SlackAdapter(settings)
        await adapter.start(bridge)
        await fake.wait_for_socket()
        try:
            yield fake, bridge, adapter
        finally:
            await adapter.stop()
            await bridge.loops.stop()


async def test_a_client_that_stopped_processing_is_replaced(
        running: tuple[FakeSlack, StubBridge, SlackAdapter]) -> None:
    fake, bridge, adapter = running
    assert bridge.loops.running(LOOP_SOCKET)
    socket = adapter._socket
    assert socket is not None and socket.client is not None
    deaf = socket.client
    deaf.message_processor.cancel()  # what a bug inside the SDK leaves behind
    await fake.send_event(fake.dm_message("can you hear me?"))
    await fake.wait_for(lambda: fake.socket_connects >= 2, "a new connection")
    assert socket.client is not deaf and deaf.closed
    # Slack sends again what the deaf client never acknowledged; the new client takes it.
    await fake.wait_for(lambda: fake.acks, "an acknowledgement", timeout=10)
    assert [m.text for m in bridge.submitted] == ["can you hear me?"]
    assert not bridge.loops.failing()


async def test_the_watch_stops_with_the_adapter(
        running: tuple[FakeSlack, StubBridge, SlackAdapter]) -> None:
    fake, bridge, adapter = running
    await adapter.stop()
    assert not bridge.loops.running(LOOP_SOCKET)
    await fake.wait_for(lambda: fake.connection_count == 0, "the socket closed")
