"""A worker stores the files an answer names before the answer goes on, off the event loop
(a large copy would hold up every chat)."""

from __future__ import annotations

import threading
from pathlib import Path

from picobridge.agent.port import AgentEvent, Reply, Worker
from picobridge.agent.protocols.picobot_json import PicobotDriver
from picobridge.agent.worker import AgentWorker
from picobridge.config.sections import AgentSettings
from picobridge.contract import OutboundFile, OutgoingReply


class ThreadNoting:
    """A FileStage that notes the thread it runs in."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def stage(self, reply: OutgoingReply) -> OutgoingReply:
        self.threads.append(threading.current_thread())
        return OutgoingReply(reply.text + " (stored)")


class Listener:
    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    async def worker_ready(self, worker: Worker) -> None: ...

    async def worker_lost(self, worker: Worker, reason: str) -> None: ...

    async def agent_event(self, worker: Worker, event: AgentEvent) -> None:
        self.events.append(event)

    def turn_running(self, worker: Worker) -> bool:
        return False


async def test_an_answers_files_are_stored_in_a_thread_before_it_goes_on(
        tmp_path: Path) -> None:
    files, listener = ThreadNoting(), Listener()
    worker = AgentWorker("w1", ["unused"], AgentSettings(), PicobotDriver, tmp_path, files=files)
    worker._listener = listener  # as start() sets it, without starting an agent
    await worker._emit(Reply.of("json:s1", "here", (OutboundFile("a.png", "/tmp/a.png"),)))
    assert files.threads and files.threads[0] is not threading.main_thread()
    [event] = listener.events
    assert isinstance(event, Reply) and event.reply.text == "here (stored)"
