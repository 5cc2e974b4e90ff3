"""The prime-rpc driver's controls (bridge/agent/protocols/prime_rpc_controls.py): a session's
model and thinking level set again after every switch (pi puts its command line's model back),
steered and follow-up messages accounted for by the answer that covers them, and those the
run never took handed back with the session switched in again (which drops them in pi)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from picobridge.agent.port import (
    AgentRequest,
    ControlFailed,
    ControlKind,
    ControlRequest,
    ModelChoice,
    Reply,
    SessionSettings,
)
from tests.unit.test_prime_rpc_driver import Rig, assistant, end

JSON = dict[str, Any]
BETA = SessionSettings("fakellm/fake-beta", "high")


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def user(text: str) -> JSON:
    return {"type": "message_start", "message": {"role": "user",
                                                 "content": [{"type": "text", "text": text}]}}


async def started(rig: Rig, session: str, settings: SessionSettings, *,
                  switch: bool = True) -> list[JSON]:
    """Start a turn; answer the switch and the settings requests; what was written."""
    start = asyncio.create_task(rig.driver.start_turn(AgentRequest(session, "hi",
                                                                   settings=settings)))
    written = []
    if switch:
        written.append(await rig.answer("switch_session", data={"cancelled": False}))
    while True:
        request = await rig.pipe.next()
        written.append(request)
        if request["type"] == "prompt":
            break
        await rig.driver.on_record({"id": request["id"], "type": "response",
                                    "command": request["type"], "success": True})
    await asyncio.wait_for(start, 1)
    return written


async def test_models_come_with_their_levels_and_the_agents_default(rig: Rig) -> None:
    handshake = asyncio.create_task(rig.driver.handshake())
    await rig.answer("get_state", data={"model": {"provider": "fakellm", "id": "fake-model"}})
    await handshake
    asking = asyncio.create_task(rig.driver.control(ControlRequest(ControlKind.MODELS)))
    await rig.answer("get_available_models", data={"models": [
        {"provider": "fakellm", "id": "fake-model", "name": "Fake", "reasoning": False},
        {"provider": "fakellm", "id": "fake-beta", "reasoning": True}, {"junk": 1}]})
    result = await asking
    assert result.text == "fakellm/fake-model"
    assert result.models == (ModelChoice("fakellm/fake-model", "Fake", ("off",)),
                             ModelChoice("fakellm/fake-beta", "fake-beta",
                                         ("off", "minimal", "low", "medium", "high")))


async def test_the_choice_is_set_after_every_switch_and_only_then(rig: Rig) -> None:
    await rig.ready()
    kinds = [r["type"] for r in await started(rig, "a", BETA)]
    assert kinds == ["switch_session", "set_model", "set_thinking_level", "prompt"]
    await rig.feed(end(assistant("one")))
    # The same session again: pi still has it all.
    assert [r["type"] for r in await started(rig, "a", BETA, switch=False)] == ["prompt"]
    await rig.feed(end(assistant("two")))
    # Another session (no choice) in between, then back: set again.
    assert [r["type"] for r in await started(rig, "b", SessionSettings())] == [
        "switch_session", "prompt"]
    await rig.feed(end(assistant("three")))
    written = await started(rig, "a", BETA)
    assert [r["type"] for r in written] == ["switch_session", "set_model",
                                            "set_thinking_level", "prompt"]
    assert written[1] == {"id": written[1]["id"], "type": "set_model", "provider": "fakellm",
                          "modelId": "fake-beta"}


async def test_steered_and_followed_messages_are_accounted_for(rig: Rig) -> None:
    await rig.ready()
    await rig.turn("s1")
    steer = asyncio.create_task(rig.driver.control(
        ControlRequest(ControlKind.STEER, "s1", "go left", tag="m2")))
    assert (await rig.answer("steer"))["message"] == "go left"
    await steer
    follow = asyncio.create_task(rig.driver.control(
        ControlRequest(ControlKind.FOLLOW_UP, "s1", "and then?", tag="m3")))
    await rig.answer("follow_up")
    await follow
    await rig.feed(user("hello"), user("go left"),
                   {"type": "message_end", "message": assistant("went left")},
                   user("and then?"))
    assert rig.events == [Reply.of("s1", "went left", delivered=("m2",), continues="m3")]
    await rig.feed({"type": "message_end", "message": assistant("then home")},
                   end(assistant("went left"), assistant("then home")))
    assert rig.events[-1] == Reply.of("s1", "then home")


async def test_a_message_the_run_never_took_comes_back_and_pi_drops_it(rig: Rig) -> None:
    await rig.ready()
    await rig.turn("s1")
    steer = asyncio.create_task(rig.driver.control(
        ControlRequest(ControlKind.STEER, "s1", "too late", tag="m9")))
    await rig.answer("steer")
    await steer
    await rig.feed(end(assistant("done")))
    assert rig.events == [Reply.of("s1", "done", undelivered=("m9",))]
    # pi kept it for its next prompt: the next turn switches the session in again.
    await rig.turn("s1", switch=True)
    with pytest.raises(ControlFailed):  # no turn of it runs now: the router queues it
        await rig.driver.control(ControlRequest(ControlKind.STEER, "s2", "x", tag="m10"))


async def test_compact_switches_the_session_in_with_its_model_first(rig: Rig) -> None:
    await rig.ready()
    compact = asyncio.create_task(rig.driver.control(
        ControlRequest(ControlKind.COMPACT, "s1", "keep names", BETA)))
    await rig.answer("switch_session", data={"cancelled": False})
    await rig.answer("set_model")
    await rig.answer("set_thinking_level")
    request = await rig.answer("compact", data={"tokensBefore": 1234, "summary": "..."})
    assert request["customInstructions"] == "keep names"
    assert (await compact).text == "The agent's memory of it held 1234 tokens before."
