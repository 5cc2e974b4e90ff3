"""Several named agents end to end: `picobridge run` against the fake Bot API with two fake
agents that say who they are (`[family] echo: ...`, `[coder] echo: ...`), routed by chat, by
user and by kind; each chat is answered by its agent, after a daemon restart too; one agent
crash-looping or hung never holds up the other's chats, and /healthz says degraded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.telegram_support import OTHER_USER, USER, replies, reply_containing, started
from tests.fakes.telegram import FakeTelegram
from tests.harness import (
    AgentJournal,
    Daemon,
    base_config,
    named_agent,
    run_cli,
    sessions_by_chat,
    write_config,
)

DEV_CHAT = -100500  # a group routed to the coder by chat key
GROUP = -100600  # another group: routed to the coder by kind



def two_agents_config(tmp: Path, fake: FakeTelegram, *, coder_flags: tuple[str, ...] = (),
                      routes: list[dict[str, Any]] | None = None,
                      **extra: Any) -> Path:
    config = base_config(tmp)
    config["agent"] = named_agent(tmp, "family")
    config["agents"] = {"coder": named_agent(tmp, "coder", *coder_flags)}
    config["routes"] = routes if routes is not None else [
        {"agent": "coder", "chats": [f"telegram:{DEV_CHAT}"]},
        {"agent": "coder", "users": [str(OTHER_USER)], "kind": "private"},
        {"agent": "coder", "kind": "group"},
    ]
    config["telegram"] = {
        "token": fake.token, "base_url": fake.base_url, "base_file_url": fake.base_file_url,
        "allowed_users": [USER, OTHER_USER], "rate_limiter": False,
    }
    config.update(extra)
    return write_config(tmp, config)


def mention(fake: FakeTelegram, text: str) -> str:
    return f"@{fake.bot_user['username']} {text}"


async def test_each_chat_is_answered_by_its_agent_also_after_a_restart(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        fake.add_chat(DEV_CHAT, "supergroup", title="dev")
        fake.add_chat(GROUP, "group", title="family group")
        config = two_agents_config(tmp_path, fake)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "hello from ann")
            fake.user_message(OTHER_USER, OTHER_USER, "hello from bob")
            fake.user_message(DEV_CHAT, USER, mention(fake, "build it"), first_name="Ann")
            await reply_containing(fake, USER, "[family] echo: hello from ann")
            await reply_containing(fake, OTHER_USER, "[coder] echo: hello from bob")
            await reply_containing(fake, DEV_CHAT, "[coder] echo: Ann: build it")
            fake.user_message(GROUP, USER, mention(fake, "dinner?"), first_name="Ann")
            await reply_containing(fake, GROUP, "[coder] echo: Ann: dinner?")
            await daemon.wait_for_log(r"agent ready pid=\d+ worker=coder/w1")
        assert daemon.returncode == 0
        lines = await sessions_by_chat(config)
        assert "\tagent default\t" in lines[f"telegram:{USER}"]
        assert "\tagent coder\t" in lines[f"telegram:{OTHER_USER}"]
        assert ".coder." in lines[f"telegram:{DEV_CHAT}"].split("\t")[1]

        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "what did I just say")
            fake.user_message(DEV_CHAT, USER, mention(fake, "what did I just say"),
                              first_name="Ann")
            await reply_containing(fake, USER, "[family] You said: hello from ann")
            await reply_containing(fake, DEV_CHAT, "[coder] You said: Ann: build it")
        # Nothing went to the wrong agent, ever.
        family = [m["content"] for m in AgentJournal(tmp_path / "agent-family").messages()]
        coder = [m["content"] for m in AgentJournal(tmp_path / "agent-coder").messages()]
        assert family == ["hello from ann", "what did I just say"]
        assert sorted(coder) == sorted([
            "hello from bob", "Ann: build it", "Ann: dinner?", "Ann: what did I just say"])
        assert not any("[family]" in (m.text or "") for chat in (OTHER_USER, DEV_CHAT, GROUP)
                       for m in fake.sent_messages(chat))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


async def healthz(port: int) -> tuple[int, dict[str, Any]]:
    # In a thread: the fake platform serves the daemon from this test's event loop.
    status, body = await asyncio.to_thread(get, port, "/healthz")
    return status, json.loads(body)


async def test_a_crash_looping_agent_holds_up_only_its_own_chats(tmp_path: Path) -> None:
    port = free_port()
    async with FakeTelegram() as fake:
        config = two_agents_config(tmp_path, fake, coder_flags=("--crash-on-start",),
                                   http={"listen": f"127.0.0.1:{port}"})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            await daemon.wait_for_log(r"worker coder/w1: agent down")
            fake.user_message(OTHER_USER, OTHER_USER, "for the coder")
            for n in range(3):
                fake.user_message(USER, USER, f"family {n}")
            for n in range(3):  # (some may be answered together: they coalesce)
                await reply_containing(fake, USER, f"family {n}")
            assert all(m.text.startswith("[family] echo: ") for m in fake.sent_messages(USER)
                       if m.text)
            status, body = await healthz(port)
            assert status == 200 and body["status"] == "degraded"
            assert "agent coder is down: its chats wait" in body["warnings"] or any(
                "worker coder/w1" in w for w in body["warnings"])
            assert body["agent"]["agents"]["default"]["state"] == "ready"
            assert body["agent"]["agents"]["coder"]["state"] != "ready"
            assert not replies(fake, OTHER_USER, "echo")  # it waits for its agent, kept
            metrics = (await asyncio.to_thread(get, port, "/metrics"))[1].decode()
            assert 'picobridge_agent_ready{agent="default"} 1.0' in metrics
            assert 'picobridge_agent_ready{agent="coder"} 0.0' in metrics
            assert 'picobridge_worker_up{agent="coder",worker="coder/w1"} 0.0' in metrics
        code, out, _ = await run_cli("sessions", "list", "--config", str(config))
        assert code == 0 and f"telegram:{OTHER_USER}" in out and "1 waiting" in out


async def test_a_hung_agent_holds_up_only_its_own_chats(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = two_agents_config(tmp_path, fake)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(OTHER_USER, OTHER_USER, "stuck #hang")
            await AgentJournal(tmp_path / "agent-coder").wait_until(
                lambda j: any(m["content"] == "stuck #hang" for m in j.messages()),
                what="the coder to receive the hanging turn")
            fake.user_message(USER, USER, "still answered")
            await reply_containing(fake, USER, "[family] echo: still answered")
            assert not replies(fake, OTHER_USER, "echo")


async def test_check_reports_routes_that_can_never_match(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = two_agents_config(tmp_path, fake, routes=[
            {"agent": "coder", "platform": "telegram"},
            {"agent": "default", "chats": [f"telegram:{USER}"]},
        ])
        code, out, _ = await run_cli("check", "--config", str(config))
        assert code == 1
        assert ("FAIL routes    routes[1] (agent default) can never match: routes[0] before it "
                "takes all its chats") in out
        assert "ok   agent default" in out and "ok   agent coder" in out

        bad = two_agents_config(tmp_path, fake, routes=[{"agent": "nobody"}])
        code, out, _ = await run_cli("check", "--config", str(bad))
        assert code != 0 and "routes[0].agent: no agent named 'nobody'" in out


def coder_status(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return [row[0] for row in conn.execute(
            "SELECT i.status FROM inbound i JOIN sessions s ON s.session_id = i.session_id"
            " WHERE s.agent = 'coder'")]


async def test_an_agent_that_stops_reading_holds_up_only_its_own_chats(tmp_path: Path) -> None:
    # The coder is ready but never reads its stdin, and its write timeout (ping_timeout) and
    # pings are far off: a long turn for it fills the pipe and its write waits.
    deaf = {**named_agent(tmp_path, "coder", "--deaf"), "ping_interval": 600, "ping_timeout": 600}
    async with FakeTelegram() as fake:
        config = two_agents_config(tmp_path, fake, agents={"coder": deaf})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            await daemon.wait_for_log(r"agent ready pid=\d+ worker=coder/w1")
            fake.user_message(OTHER_USER, OTHER_USER, "long " + "x" * 400_000)
            db = tmp_path / "state" / "picobridge.db"
            # Handed over (the dispatch is recorded before the write begins): from here the
            # write to the coder cannot finish.
            await AgentJournal(tmp_path / "agent-coder").wait_until(
                lambda _: coder_status(db) == ["dispatched"], what="the coder's turn handed over")
            for n in range(3):
                fake.user_message(USER, USER, f"family {n}")
                await reply_containing(fake, USER, f"[family] echo: family {n}")
            assert "cannot write to agent" not in daemon.log  # the coder's write still waits
            assert not replies(fake, OTHER_USER, "echo")
            assert any(e.get("event") == "deaf"
                       for e in AgentJournal(tmp_path / "agent-coder").entries())
        assert daemon.returncode == 0
        # The coder's message is kept for its next start, not lost with the stuck write.
        assert coder_status(db) == ["received"]
