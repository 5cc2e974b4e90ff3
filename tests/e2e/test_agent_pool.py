"""The agent pool end to end: `picobridge run` with several agent workers, driven through the
fake Bot API, judged by what users get and by the fake agents' shared journal (which agent
process, by pid, received each turn, and the order of receipts, answers and exits).

Concurrency is shown by overlap in that journal, never by wall time.

Two daemons serve the tests that need only a running pool (one of four workers, one of two),
each test in chats of its own and judging what happened during it; the tests about a stop, a
SIGKILL, a restart or a worker that cannot start have their own daemon."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.pool_support import READY, Pool, all_ready, journal, pool_config, shared_pool
from tests.e2e.telegram_support import replies, reply_containing, started
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, agent_command, http_port, run_cli

pytestmark = pytest.mark.asyncio(loop_scope="module")
# The tests on each shared daemon run on one worker (xdist would start it again in each).
POOL_OF_FOUR = pytest.mark.xdist_group("test_agent_pool_4")
POOL_OF_TWO = pytest.mark.xdist_group("test_agent_pool_2")

CHATS = [8100 + n for n in range(8)]
# The chats of the tests on the shared daemons, each test its own.
CRASH_CHATS = [8110 + n for n in range(3)]
HANG_CHATS = [8120 + n for n in range(3)]
SPREAD_CHATS = [8200 + n for n in range(4)]
STATUS_CHATS = [8210 + n for n in range(2)]
TAG = re.compile(r"\bc(\d+)-(\d+)\b")
# The shared pool of four: a hung turn ends after this (the other turns there take at most 3 s).
TURN_TIMEOUT = 8


# -- helpers ---------------------------------------------------------------------------------


def is_message(entry: dict[str, Any]) -> bool:
    record = entry.get("record")
    return isinstance(record, dict) and record.get("type") == "message"


def tags(text: str) -> set[tuple[int, int]]:
    return {(int(c), int(i)) for c, i in TAG.findall(text)}


def receipts(entries: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(pid, content) of every message the agents received, in the order received."""
    return [(e["pid"], str(e["record"].get("content"))) for e in entries if is_message(e)]


def pids_of_chats(entries: list[dict[str, Any]]) -> dict[int, set[int]]:
    """Chat -> the pids of the agents that received its messages."""
    found: dict[int, set[int]] = {}
    for pid, content in receipts(entries):
        for chat, _ in tags(content):
            found.setdefault(chat, set()).add(pid)
    return found


def received_count(entries: list[dict[str, Any]]) -> Counter[str]:
    return Counter(content for _, content in receipts(entries))


def worker_of_pid(daemon: Daemon) -> dict[int, str]:
    return {int(pid): name for pid, name in READY.findall(daemon.log)}


async def answered(fake: FakeTelegram, texts: dict[int, str], timeout: float = 30) -> None:
    """Every chat got a reply containing its text."""
    await fake.wait_for(lambda: all(replies(fake, chat, text) for chat, text in texts.items()),
                        f"answers {sorted(texts.values())}", timeout)


def gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# -- the shared daemons ----------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool_of_four(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pool]:
    async with shared_pool(tmp_path_factory.mktemp("pool-of-four"),
                           CHATS + CRASH_CHATS + HANG_CHATS, 4,
                           turn_timeout=TURN_TIMEOUT) as pool:
        yield pool


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool_of_two(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pool]:
    async with shared_pool(tmp_path_factory.mktemp("pool-of-two"),
                           SPREAD_CHATS + STATUS_CHATS, 2) as pool:
        yield pool


# -- tests -----------------------------------------------------------------------------------


@POOL_OF_FOUR
async def test_chats_are_served_at_once_by_different_workers(pool_of_four: Pool) -> None:
    fake, since = pool_of_four.fake, await pool_of_four.settled()
    texts = {chat: f"#slow=2 c{chat}-0" for chat in CHATS}
    for chat, text in texts.items():
        fake.user_message(chat, chat, text)
    await answered(fake, {chat: f"echo: {text}" for chat, text in texts.items()})
    for chat in CHATS:
        assert fake.texts(chat) == [f"echo: {texts[chat]}"]
    entries = since.entries()
    assert received_count(entries) == Counter(texts.values())
    # Overlap: four agents had each received a turn before any turn was answered.
    first_answer = next(i for i, e in enumerate(entries) if e.get("event") == "answer")
    early = {pid for pid, _ in receipts(entries[:first_answer])}
    assert len(early) == 4, receipts(entries[:first_answer])
    # ...and no agent ever had two turns at once (max_in_flight 1 per worker).
    running: Counter[int] = Counter()
    for entry in entries:
        if is_message(entry):
            running[entry["pid"]] += 1
            assert running[entry["pid"]] == 1, f"pid {entry['pid']} got a second turn"
        elif entry.get("event") == "answer":
            running[entry["pid"]] -= 1
    assert len({pid for pid, _ in receipts(entries)}) == 4


@POOL_OF_TWO
async def test_each_chat_stays_on_its_worker_and_waits_for_it_when_busy(
        pool_of_two: Pool) -> None:
    fake, since, chats = pool_of_two.fake, await pool_of_two.settled(), SPREAD_CHATS
    # Four new chats at once on two workers: they spread.
    for chat in chats:
        fake.user_message(chat, chat, f"#slow=1 c{chat}-0")
    await answered(fake, {chat: f"c{chat}-0" for chat in chats})
    for i in (1, 2):
        for chat in reversed(chats):
            fake.user_message(chat, chat, f"c{chat}-{i}")
        await answered(fake, {chat: f"echo: c{chat}-{i}" for chat in chats})
    homes = pids_of_chats(since.entries())
    assert all(len(homes[chat]) == 1 for chat in chats), homes
    # Two chats share a worker (four chats, two workers): one keeps it busy, the other
    # writes meanwhile while the other worker is idle.
    pid = Counter(next(iter(homes[c])) for c in chats).most_common(1)[0][0]
    busy, waiting = [c for c in chats if homes[c] == {pid}][:2]
    fake.user_message(busy, busy, f"#slow=2 c{busy}-3")
    await pool_of_two.journal.wait_until(
        lambda _: any(f"c{busy}-3" in text for _, text in receipts(since.entries())),
        what="the busy chat's turn received")
    fake.user_message(waiting, waiting, f"c{waiting}-3")
    await answered(fake, {busy: f"c{busy}-3", waiting: f"echo: c{waiting}-3"})
    entries = since.entries()
    homes = pids_of_chats(entries)
    assert all(len(homes[chat]) == 1 for chat in chats), homes
    assert len(set().union(*homes.values())) == 2
    # The waiting chat's message reached its agent only after the busy turn was answered.
    mine = [e for e in entries if e["pid"] == pid]
    busy_at = next(i for i, e in enumerate(mine)
                   if is_message(e) and f"c{busy}-3" in e["record"]["content"])
    waited_at = next(i for i, e in enumerate(mine)
                     if is_message(e) and f"c{waiting}-3" in e["record"]["content"])
    assert any(e.get("event") == "answer" for e in mine[busy_at:waited_at])


@POOL_OF_FOUR
async def test_a_crashed_worker_only_its_turn_is_sent_again(pool_of_four: Pool) -> None:
    fake, since, chats = pool_of_four.fake, await pool_of_four.settled(), CRASH_CHATS
    slow, crash = [f"#slow=3 c{c}-0" for c in chats[:2]], f"#crash-once c{chats[2]}-0"
    for chat, text in zip(chats, slow, strict=False):
        fake.user_message(chat, chat, text)
    await pool_of_four.journal.wait_until(
        lambda _: len(receipts(since.entries())) == 2, what="two slow turns received")
    fake.user_message(chats[2], chats[2], crash)
    await answered(fake, {chat: f"echo: {text}"
                          for chat, text in zip(chats, [*slow, crash], strict=True)})
    down = [line for line in since.log_lines if ": agent down (" in line]
    entries = since.entries()
    assert received_count(entries) == Counter({slow[0]: 1, slow[1]: 1, crash: 2})
    (exit_at,) = [i for i, e in enumerate(entries) if e.get("reason") == "crash directive"]
    crashed = entries[exit_at]["pid"]
    assert next(pid for pid, text in receipts(entries) if text == crash) == crashed
    # The crash came while the other two turns ran: they were answered after it, once.
    slow_pids = {pid for pid, text in receipts(entries) if text in slow}
    assert len(slow_pids) == 2 and crashed not in slow_pids
    assert {e["pid"] for e in entries[exit_at:] if e.get("event") == "answer"} >= slow_pids
    # One worker went down and came back; the others kept their process.
    assert len(down) == 1 and "agent exited with code 3" in down[0]
    assert len(since.starts()) == 1
    for chat in chats:
        assert len(fake.texts(chat)) == 1, fake.texts(chat)


@POOL_OF_FOUR
async def test_a_hung_worker_does_not_hold_up_the_others(pool_of_four: Pool) -> None:
    fake, since, chats = pool_of_four.fake, await pool_of_four.settled(), HANG_CHATS
    hang = f"#hang-once c{chats[0]}-0"
    fake.user_message(chats[0], chats[0], hang)
    await pool_of_four.journal.wait_until(
        lambda _: any(e.get("event") == "hang" for e in since.entries()), what="the hang")
    for chat in chats[1:]:
        fake.user_message(chat, chat, f"c{chat}-0")
    await answered(fake, {chat: f"echo: c{chat}-0" for chat in chats[1:]})
    # Answered while the hung agent was still the one holding the first chat's turn.
    assert len(since.starts()) == 0
    assert replies(fake, chats[0], "echo") == []
    await reply_containing(fake, chats[0], f"echo: {hang}", timeout=30)
    assert any(f"turn timeout after {TURN_TIMEOUT}s" in line for line in since.log_lines)
    # Its worker comes back with a new process (after the backoff).
    await pool_of_four.journal.wait_until(lambda _: len(since.starts()) == 1,
                                          what="the hung worker replaced")
    entries = since.entries()
    (hung,) = [e["pid"] for e in entries if e.get("event") == "hang"]
    firsts = receipts(entries)
    assert next(pid for pid, text in firsts if text == hang) == hung
    assert received_count(entries) == Counter({hang: 2, **{f"c{c}-0": 1 for c in chats[1:]}})
    # Only the hung worker was replaced; its process is gone.
    assert len(since.starts()) == 1
    assert gone(hung)
    # The user of the hung chat got the answer and nothing else.
    assert fake.texts(chats[0]) == [f"echo: {hang}"]


async def test_sigkill_with_a_backlog_across_workers_loses_nothing(tmp_path: Path) -> None:
    chats, per_chat = CHATS[:6], 3
    everything = {(chat, i) for chat in chats for i in range(per_chat)}
    async with FakeTelegram() as fake:
        config = pool_config(tmp_path, fake, chats, pool_size=3)
        daemon = await Daemon(config).start()
        await started(daemon, fake)
        await all_ready(daemon, 3)
        for i in range(per_chat):
            for chat in chats:
                fake.user_message(chat, chat, f"#slow=1 c{chat}-{i}")
        await journal(tmp_path).wait_until(
            lambda j: len({pid for pid, _ in receipts(j.entries())}) == 3,
            what="turns running on three workers")
        await daemon.kill()
        old = {e["pid"] for e in journal(tmp_path).starts()}
        # Their stdin closed with the daemon: each old agent ends (and says so) by itself.
        await journal(tmp_path).wait_until(
            lambda j: {e["pid"] for e in j.entries() if e.get("event") == "exit"} >= old,
            what="the old agents gone")
        before = journal(tmp_path).entries()
        assert len({t for _, text in receipts(before) for t in tags(text)}) < len(everything)

        async with Daemon(config):
            await fake.wait_for(
                lambda: {t for m in fake.sent_messages() for t in tags(m.text or "")}
                >= everything, "every message answered after the restart", 60)
    after = journal(tmp_path).entries()[len(before):]
    again = ({t for _, text in receipts(before) for t in tags(text)}
             & {t for _, text in receipts(after) for t in tags(text)})
    # Only what an agent was working on at the kill is asked again: each old agent's last turn.
    in_flight: set[tuple[int, int]] = set()
    for pid in old:
        mine = [text for p, text in receipts(before) if p == pid]
        if mine:
            in_flight |= tags(mine[-1])
    assert again <= in_flight, (again, in_flight)
    asked = Counter(t for _, text in receipts(before + after) for t in tags(text))
    assert set(asked) == everything
    assert all(n <= 2 for n in asked.values())


async def test_sigterm_leaves_no_agent_process_behind(tmp_path: Path) -> None:
    chats = CHATS[:3]
    async with FakeTelegram() as fake:
        config = pool_config(tmp_path, fake, chats, pool_size=3)
        daemon = await Daemon(config).start()
        await started(daemon, fake)
        await all_ready(daemon, 3)
        # Two agents wedged for good, one busy for longer than the stop waits.
        fake.user_message(chats[0], chats[0], f"#hang c{chats[0]}-0")
        fake.user_message(chats[1], chats[1], f"#hang c{chats[1]}-0")
        fake.user_message(chats[2], chats[2], f"#slow=60 c{chats[2]}-0")
        await journal(tmp_path).wait_until(
            lambda j: len(receipts(j.entries())) == 3
            and sum(e.get("event") == "hang" for e in j.entries()) == 2,
            what="two hung agents and a busy one")
        pids = {e["pid"] for e in journal(tmp_path).starts()}
        assert len(pids) == 3 and not any(gone(pid) for pid in pids)
        assert await daemon.stop() == 0
    assert all(gone(pid) for pid in pids), [p for p in pids if not gone(p)]
    entries = journal(tmp_path).entries()
    assert {e["pid"] for e in entries if e.get("record") == {"type": "shutdown"}} == pids
    # The workers stopped together: every agent had been asked to shut down before the first
    # one wedged had to be terminated.
    first_term = next(i for i, e in enumerate(entries) if e.get("event") == "signal")
    asked = {e["pid"] for e in entries[:first_term] if e.get("record") == {"type": "shutdown"}}
    assert asked == pids
    hung = {e["pid"] for e in entries if e.get("event") == "hang"}
    assert {e["pid"] for e in entries if e.get("event") == "signal"} == hung
    assert not any(line for line in daemon.log_lines if "Traceback" in line)


async def test_a_worker_that_cannot_start_leaves_the_others_serving(tmp_path: Path) -> None:
    chats = CHATS[:3]
    workers = [
        {"name": "good1", "command": agent_command(tmp_path / "agent")},
        {"name": "broken", "command": ["/nonexistent/picobot", "agent", "--json"]},
        {"name": "good2", "command": agent_command(tmp_path / "agent")},
    ]
    texts = {chat: f"#slow=1 c{chat}-0" for chat in chats}
    async with FakeTelegram() as fake:
        config = pool_config(tmp_path, fake, chats, workers=workers,
                             sections={"http": {"listen": "127.0.0.1:0"}})
        async with Daemon(config) as daemon:
            port = await http_port(daemon)
            await started(daemon, fake)
            await all_ready(daemon, 2)
            for chat, text in texts.items():
                fake.user_message(chat, chat, text)
            await answered(fake, {chat: f"echo: {text}" for chat, text in texts.items()})
            status, body = await asyncio.to_thread(get, f"http://127.0.0.1:{port}/healthz")
            _, metrics = await asyncio.to_thread(get, f"http://127.0.0.1:{port}/metrics")
            assert "worker broken: agent command not found: '/nonexistent/picobot'" in daemon.log
        code, out, err = await run_cli("check", "--config", str(config))
    health = json.loads(body)
    assert status == 200 and health["status"] == "degraded", body
    assert health["agent"]["workers_ready"] == 2
    assert any("worker broken" in warning for warning in health["warnings"]), body
    states = {w["name"]: w["state"] for w in health["agent"]["workers"]}
    assert states["good1"] == states["good2"] == "ready" and states["broken"] != "ready"
    up = dict(re.findall(r'^picobridge_worker_up\{agent="default",worker="(\w+)"\} (\S+)$',
                         metrics, re.M))
    assert {name: float(v) for name, v in up.items()} == {"good1": 1, "broken": 0, "good2": 1}
    # Both good workers took turns; the broken one none.
    assert len({pid for pid, _ in receipts(journal(tmp_path).entries())}) == 2
    assert code == 1, out + err
    lines = out.splitlines()
    assert any(line.startswith("FAIL agent broken agent command not found: "
                               "'/nonexistent/picobot'") for line in lines), out
    assert any(line.startswith("ok   agent good1 ready") for line in lines), out
    assert any(line.startswith("ok   agent good2 ready") for line in lines), out


@POOL_OF_TWO
async def test_status_names_the_chats_worker(pool_of_two: Pool) -> None:
    fake, since, chats = pool_of_two.fake, await pool_of_two.settled(), STATUS_CHATS
    for chat in chats:
        fake.user_message(chat, chat, f"#slow=1 c{chat}-0")
    await answered(fake, {chat: f"echo: #slow=1 c{chat}-0" for chat in chats})
    for chat in chats:
        fake.user_message(chat, chat, "/status")
    await answered(fake, dict.fromkeys(chats, "Agent: worker"))
    names = worker_of_pid(pool_of_two.daemon)
    homes = pids_of_chats(since.entries())
    seen = set()
    for chat in chats:
        (pid,) = homes[chat]
        (status,) = replies(fake, chat, "Agent: worker")
        assert f"Agent: worker {names[pid]} ready (pid {pid})" in (status.text or "")
        assert "2 of 2 workers ready" in (status.text or "")
        seen.add(names[pid])
    assert len(seen) == 2


async def test_chats_keep_their_workers_across_a_daemon_restart(tmp_path: Path) -> None:
    chats = CHATS[:3]
    # w3 takes a while to come up (as a remote worker might): a chat of its waits for it
    # after the restart instead of moving to a worker that was ready sooner.
    workers = [{"name": f"w{n}", "command": agent_command(tmp_path / "agent", *flags)}
               for n, flags in ((1, ()), (2, ()), (3, ("--ready-delay=3",)))]
    async with FakeTelegram() as fake:
        config = pool_config(tmp_path, fake, chats, workers=workers)
        async with Daemon(config) as first:
            await started(first, fake)
            await all_ready(first, 3)
            for chat in chats:
                fake.user_message(chat, chat, f"#slow=1 c{chat}-0")
            await answered(fake, {chat: f"echo: #slow=1 c{chat}-0" for chat in chats})
            names = worker_of_pid(first)
        before = {chat: names[pid] for chat, (pid,) in
                  pids_of_chats(journal(tmp_path).entries()).items()}
        assert sorted(before.values()) == ["w1", "w2", "w3"]
        seen = len(journal(tmp_path).entries())

        # Written while the daemon is down: the backlog the restart finds.
        for chat in chats:
            fake.user_message(chat, chat, f"c{chat}-1")
        async with Daemon(config) as second:
            await answered(fake, {chat: f"echo: c{chat}-1" for chat in chats})
            for chat in reversed(chats):  # one at a time: an idle pool would pick w1 for all
                fake.user_message(chat, chat, f"c{chat}-2")
                await reply_containing(fake, chat, f"echo: c{chat}-2")
                fake.user_message(chat, chat, "/status")
                await reply_containing(fake, chat, "Agent: worker")
            names = worker_of_pid(second)
    after = pids_of_chats(journal(tmp_path).entries()[seen:])
    for chat in chats:
        assert {names[pid] for pid in after[chat]} == {before[chat]}, (chat, before, after)
        (status,) = replies(fake, chat, "Agent: worker")
        assert f"Agent: worker {before[chat]} ready" in (status.text or "")
    assert "moves from worker" not in second.log


async def test_a_chat_whose_worker_fails_to_come_back_after_a_restart_moves(
        tmp_path: Path) -> None:
    chats = CHATS[:2]
    workers = [{"name": f"w{n}", "command": agent_command(tmp_path / "agent")} for n in (1, 2)]
    async with FakeTelegram() as fake:
        config = pool_config(tmp_path, fake, chats, workers=workers)
        async with Daemon(config) as first:
            await started(first, fake)
            await all_ready(first, 2)
            for chat in chats:
                fake.user_message(chat, chat, f"#slow=1 c{chat}-0")
            await answered(fake, {chat: f"echo: #slow=1 c{chat}-0" for chat in chats})
            names = worker_of_pid(first)
        before = {names[pid]: chat for chat, (pid,) in
                  pids_of_chats(journal(tmp_path).entries()).items()}
        assert sorted(before) == ["w1", "w2"]
        # w2's host is gone: its command now fails a moment after starting, every time.
        workers[1]["command"] = ["sh", "-c", "sleep 1; exit 4"]
        config = pool_config(tmp_path, fake, chats, workers=workers)
        for chat in chats:
            fake.user_message(chat, chat, f"c{chat}-1")
        async with Daemon(config) as second:
            await answered(fake, {chat: f"echo: c{chat}-1" for chat in chats})
            names = worker_of_pid(second)
            await second.wait_for_log(r"worker w2: agent down \(agent exited with code 4\)")
    moved = before["w2"]
    (pid,) = {p for p, text in receipts(journal(tmp_path).entries()) if f"c{moved}-1" in text}
    assert names[pid] == "w1"
    assert re.search(r"session \S+ moves from worker w2 \(restarting\) to w1", second.log)
