"""A new platform is one module plus one registry line.

The test writes a throwaway platform ("loopback": its adapter connects to a TCP port the test
listens on, one JSON line per message each way) as one module, registers it with one line
before the CLI starts, and runs `picobridge run` and `picobridge access` with a `[loopback]`
section in the config: its settings, allow list and user-id rule come from the module.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path

from tests.harness import REPO, base_config, cli_env, write_config

PLATFORM = '''
import asyncio
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from picobridge.contract import Adapter, ChatRef, InboundMessage, Platform


class LoopbackSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    port: int = 0
    allowed_users: list[str] = Field(default_factory=list)


class LoopbackAdapter(Adapter):
    platform = "loopback"

    def __init__(self, port: int) -> None:
        self._port = port
        self._writer = None
        self._reader_task = None

    async def start(self, bridge) -> None:
        reader, self._writer = await asyncio.open_connection("127.0.0.1", self._port)
        bridge.connection_changed("loopback", True)

        async def read() -> None:
            while line := await reader.readline():
                msg = json.loads(line)
                await bridge.submit(InboundMessage(
                    chat=ChatRef("loopback", msg["user"]), sender_id=msg["user"],
                    text=msg["text"], platform_message_id=msg["id"]))

        self._reader_task = asyncio.create_task(read())

    async def stop(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._writer is not None:
            self._writer.close()

    async def send_reply(self, chat, reply) -> None:
        self._writer.write(json.dumps({"to": chat.chat_id, "text": reply.text}).encode() + b"\\n")
        await self._writer.drain()


class LoopbackPlatform(Platform):
    name = "loopback"
    section = LoopbackSettings
    enable_hint = "loopback.port"

    def active(self, section: Any) -> bool:
        return section.port > 0

    def allowed_users(self, section: Any) -> frozenset[str]:
        return frozenset(section.allowed_users)

    def user_id_problem(self, user_id: str) -> str | None:
        return None if user_id.islower() else "loopback user ids are lower case"

    def adapter(self, settings: Any) -> Adapter:
        return LoopbackAdapter(settings.section("loopback").port)
'''

LAUNCHER = '''
import sys
from picobridge.adapters import registry

registry.PLATFORMS["loopback"] = "loopback_platform:LoopbackPlatform"

from picobridge.cli import main

sys.exit(main(sys.argv[1:]))
'''


async def _cli(tmp: Path, *args: str) -> asyncio.subprocess.Process:
    env = cli_env({"PYTHONPATH": os.pathsep.join(
        p for p in (str(tmp), os.environ.get("PYTHONPATH", "")) if p)})
    return await asyncio.create_subprocess_exec(
        sys.executable, str(tmp / "launch.py"), *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=REPO)


async def test_a_platform_registered_in_one_line_runs_with_its_own_section(
        tmp_path: Path) -> None:
    (tmp_path / "loopback_platform.py").write_text(textwrap.dedent(PLATFORM))
    (tmp_path / "launch.py").write_text(textwrap.dedent(LAUNCHER))
    connected: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = \
        asyncio.Queue()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await connected.put((reader, writer))

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = base_config(tmp_path)
    config["loopback"] = {"port": port, "allowed_users": ["ann"]}
    path = write_config(tmp_path, config)

    # The user-id rule and the allow list come from the platform's module.
    refused = await _cli(tmp_path, "access", "allow", "loopback:Bob", "--config", str(path))
    _, err = await asyncio.wait_for(refused.communicate(), 60)
    assert refused.returncode == 2 and "loopback user ids are lower case" in err.decode()

    daemon = await _cli(tmp_path, "run", "--config", str(path))
    try:
        reader, writer = await asyncio.wait_for(connected.get(), 30)

        async def say(user: str, text: str, n: int) -> dict[str, str]:
            writer.write(json.dumps({"user": user, "text": text, "id": str(n)}).encode()
                         + b"\n")
            await writer.drain()
            answer: dict[str, str] = json.loads(await asyncio.wait_for(reader.readline(), 30))
            return answer

        assert await say("ann", "hello", 1) == {"to": "ann", "text": "echo: hello"}
        stranger = await say("bob", "let me in", 2)
        assert "picobridge access allow loopback:bob" in stranger["text"]
    finally:
        daemon.terminate()
        _, log = await asyncio.wait_for(daemon.communicate(), 60)
        server.close()
    assert daemon.returncode == 0, log.decode()[-2000:]
