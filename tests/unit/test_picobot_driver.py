"""The picobot JSON-channel driver: records in and out, and every event stamped with its turn."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from picobridge.agent.driver import DriverContext
from picobridge.agent.port import AgentEvent, AgentRequest, Failure, Progress, Reply
from picobridge.agent.protocols import PROTOCOLS, driver_class
from picobridge.agent.protocols.picobot_json import PicobotDriver
from picobridge.config.sections import AgentSettings
from picobridge.contract import Attachment


class Pipe:
    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    async def write(self, record: dict[str, Any]) -> None:
        self.written.append(record)


@pytest.fixture
def rig(tmp_path: Path) -> tuple[PicobotDriver, Pipe, list[AgentEvent]]:
    events: list[AgentEvent] = []

    async def emit(event: AgentEvent) -> None:
        events.append(event)

    pipe = Pipe()
    driver = PicobotDriver(pipe, emit, DriverContext(AgentSettings(), tmp_path, "w1"))
    return driver, pipe, events


Rig = tuple[PicobotDriver, Pipe, list[AgentEvent]]


def test_the_registry_names_it_with_its_default_command() -> None:
    assert driver_class("picobot-json") is PicobotDriver
    assert PROTOCOLS["picobot-json"].default_command == ("picobot", "agent", "--json")


async def test_handshake_waits_for_ready_and_probe_for_pong(rig: Rig) -> None:
    driver, pipe, _ = rig
    handshake = asyncio.create_task(driver.handshake())
    await asyncio.sleep(0)
    assert not handshake.done()
    await driver.on_record({"type": "ready"})
    await asyncio.wait_for(handshake, 1)
    probe = asyncio.create_task(driver.probe())
    await asyncio.sleep(0)
    assert pipe.written == [{"type": "ping"}] and not probe.done()
    await driver.on_record({"type": "pong"})
    await asyncio.wait_for(probe, 1)
    assert driver.shutdown_record() == {"type": "shutdown"}


async def test_a_turn_is_one_message_record_with_its_attachments(rig: Rig) -> None:
    driver, pipe, _ = rig
    await driver.start_turn(AgentRequest("s1", "look", (
        Attachment("notes.txt", content="a,b"),
        Attachment("photo.jpg", path="/state/media/photo.jpg", size=12, mime="image/jpeg"))))
    [record] = pipe.written
    assert record["type"] == "message" and record["session"] == "s1"
    assert record["content"] == "look"
    assert record["attachments"][0] == {"name": "notes.txt", "content": "a,b"}
    assert "/state/media/photo.jpg" in record["attachments"][1]["content"]
    assert driver.running() == {"s1"}


async def test_records_without_a_session_are_stamped_with_the_turn_sent(rig: Rig) -> None:
    driver, _, events = rig
    await driver.start_turn(AgentRequest("s1", "hello"))
    await driver.on_record({"type": "progress", "event": "text_delta", "text": "hel"})
    await driver.on_record({"type": "progress", "event": "tool_call_start", "name": "ls"})
    await driver.on_record({"type": "error", "message": "model overloaded"})
    assert events == [Progress("s1", "text", "hel"), Progress("s1", "tool_start", "", "ls"),
                      Failure("s1", "model overloaded", None)]
    assert driver.running() == frozenset()


async def test_the_scope_is_stripped_and_unsolicited_answers_pass(rig: Rig) -> None:
    driver, _, events = rig
    await driver.start_turn(AgentRequest("s1", "hello"))
    await driver.on_record({"type": "response", "content": "job done", "session": "json:s9"})
    await driver.on_record({"type": "response", "content": "hi", "session": "json:s1"})
    assert events == [Reply.of("s9", "job done"), Reply.of("s1", "hi")]
    assert driver.running() == frozenset()


async def test_sessionless_records_with_two_turns_running_are_dropped(rig: Rig) -> None:
    driver, _, events = rig
    await driver.start_turn(AgentRequest("s1", "a"))
    await driver.start_turn(AgentRequest("s2", "b"))
    await driver.on_record({"type": "progress", "event": "text_delta", "text": "whose?"})
    await driver.on_record({"type": "error", "message": "whose?"})
    assert events == []
    assert driver.running() == {"s1", "s2"}


async def test_a_flood_of_sessionless_progress_is_warned_about_once(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    driver, _, events = rig
    await driver.start_turn(AgentRequest("s1", "a"))
    await driver.start_turn(AgentRequest("s2", "b"))
    caplog.set_level(logging.DEBUG, logger="picobridge.agent")
    for n in range(500):
        await driver.on_record({"type": "progress", "event": "text_delta", "text": f"{n}"})
    await driver.on_record({"type": "error", "message": "whose?"})
    await driver.on_record({"type": "error", "message": "whose?"})
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 3, warnings  # the flood once, each lost error on its own
    assert "further progress" in warnings[0] and "failure" in warnings[1]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 499
    assert events == []


@pytest.mark.parametrize("content", [None, {"a": 1}, 42, ["x"]])
async def test_an_answer_without_text_is_an_agent_error(rig: Rig, content: object) -> None:
    driver, _, events = rig
    await driver.start_turn(AgentRequest("s1", "hello"))
    record: dict[str, Any] = {"type": "response", "session": "json:s1"}
    if content is not None:
        record["content"] = content
    await driver.on_record(record)
    assert events == [Failure("s1", "the agent sent an answer without text", "bad_response")]


async def test_a_failed_write_forgets_the_turn(rig: Rig) -> None:
    driver, pipe, _ = rig

    async def broken(record: dict[str, Any]) -> None:
        raise BrokenPipeError

    pipe.write = broken  # type: ignore[method-assign]
    with pytest.raises(BrokenPipeError):
        await driver.start_turn(AgentRequest("s1", "hello"))
    assert driver.running() == frozenset()
