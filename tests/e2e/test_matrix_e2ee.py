"""End-to-end encryption (`[matrix] e2ee = true`) on a real Synapse, with a person whose client
encrypts (mautrix's Client and OlmMachine, tests/synapse/crypto_person.py): their encrypted
messages are answered, every answer (reaction, streamed edits too) arrives encrypted and
decrypts on their device; a restarted daemon keeps its device and keys; a message whose key
never comes is reported, not lost. Without the `e2ee` extra, e2ee = true is a configuration
error that names the pip command.

One daemon (one bot) serves the three tests that need nothing of their own (a room of more
people, files, an undecryptable message), each as its own people in its own room; they form
an xdist group, so one worker starts it once. The tests of restarts, a new device, SIGKILL and
streaming (a gated agent) start their own.
"""

from __future__ import annotations

import re
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from picobridge import exit_codes
from tests.e2e.matrix_support import (
    Shared,
    assert_no_secrets,
    matrix_config,
    shared_daemon,
    synced,
)
from tests.e2e.media_support import PDF, put, script_reply
from tests.e2e.test_telegram_streaming import GATED_AGENT, Gates
from tests.harness import Daemon, run_cli
from tests.synapse.crypto_person import CryptoPerson, Seen
from tests.synapse.server import Account, Synapse

# Each test starts one or two daemons and an encrypting client, besides the worker's Synapse
# start when it is the worker's first: on a loaded machine more than the default 120 s pass.
pytestmark = [pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]
# The tests of the shared daemon: on one worker, one after another.
SHARED = pytest.mark.xdist_group("matrix_e2ee")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory,
              synapse: Synapse) -> AsyncIterator[Shared]:
    # The key wait is the default (10 s): only the undecryptable message's test meets it.
    async with shared_daemon(tmp_path_factory.mktemp("matrix-e2ee"), synapse,
                             ["room_alice", "files", "undecryptable"], reaction_done="",
                             e2ee=True) as shared:
        yield shared


def text(event: Seen) -> str:
    return str(event.get("content", {}).get("body", ""))


def answered(want: str) -> Any:
    return lambda e: text(e) == want


def plain_from(me: CryptoPerson, room: str, bot: Account) -> list[Seen]:
    """What the bot posted without encryption (nothing should be)."""
    return [e for e in me.events.get(room, []) if e.get("sender") == bot.user_id
            and e.get("type") != "m.room.member" and not e["decrypted"]]


def crypto_person(tmp: Path, server: Synapse, account: Account | None = None) -> CryptoPerson:
    return CryptoPerson(server.url, account or server.register(), tmp / "person")


def assert_private(state: Path) -> None:
    for path in (state / "matrix").iterdir():
        if path.name.startswith(("crypto.db", "crypto.key")):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


async def test_an_encrypted_chat_is_answered_encrypted_with_the_same_device_after_a_restart(
        tmp_path: Path, synapse: Synapse) -> None:
    bot = synapse.register()
    async with crypto_person(tmp_path, synapse) as me:
        config = matrix_config(tmp_path, synapse, bot, [me.user_id], e2ee=True)
        async with Daemon(config) as daemon:
            await synced(daemon)
            room = await me.create_encrypted_dm(bot.user_id)
            await me.say(room, "hello **secret**")
            answer = await me.wait_for(room, bot.user_id, answered("echo: hello **secret**"),
                                       what="the decrypted answer")
            assert answer["decrypted"] and answer["event_id"] in me.encrypted_ids
            assert "<strong>secret</strong>" in answer["content"]["formatted_body"]
            reaction = await me.wait_for(room, bot.user_id, lambda e: True, "m.reaction",
                                         "the done reaction")
            assert reaction["decrypted"] and reaction["content"]["m.relates_to"]["key"] == "✅"
            devices = await me.bot_devices(bot.user_id)
            assert list(devices) == [bot.device_id]
        first_logs = daemon.log_lines + daemon.stdout_lines

        # Written while the bot is away, in a new group session: its key waits on the
        # homeserver as a to-device message for the restarted bot.
        await me.new_group_session(room)
        await me.say(room, "while you were away")
        async with Daemon(config) as daemon:
            await synced(daemon)
            await me.wait_for(room, bot.user_id, answered("echo: while you were away"),
                              what="the answer to what came while it was down")
            await me.say(room, "still there?")
            again = await me.wait_for(room, bot.user_id, answered("echo: still there?"),
                                      what="the answer after the restart")
            assert again["decrypted"]
            assert await me.bot_devices(bot.user_id) == devices, \
                "the restarted bot must keep its device and its keys"
        assert not plain_from(me, room, bot), "the bot posted unencrypted into the room"
    state = tmp_path / "state"
    assert_private(state)
    key = (state / "matrix" / "crypto.key").read_text().strip()
    assert_no_secrets(daemon, bot)
    for line in first_logs + daemon.log_lines + daemon.stdout_lines:
        assert key not in line and bot.access_token not in line, line[:200]
        assert "hello" not in line, f"a message's text reached the log: {line[:200]!r}"


async def test_a_new_access_token_gets_a_device_with_new_keys(tmp_path: Path,
                                                              synapse: Synapse) -> None:
    bot = synapse.register()
    async with crypto_person(tmp_path, synapse) as me:
        config = matrix_config(tmp_path, synapse, bot, [me.user_id], reaction_done="",
                               e2ee=True)
        async with Daemon(config) as daemon:
            await synced(daemon)
            room = await me.create_encrypted_dm(bot.user_id)
            await me.say(room, "one")
            await me.wait_for(room, bot.user_id, answered("echo: one"), what="the answer")
        login = synapse.request("POST", "/_matrix/client/v3/login", {
            "type": "m.login.password", "password": bot.password,
            "identifier": {"type": "m.id.user", "user": bot.user_id}})
        assert login["device_id"] != bot.device_id
        config = matrix_config(tmp_path, synapse, bot, [me.user_id], reaction_done="",
                               e2ee=True, access_token=login["access_token"])
        async with Daemon(config) as daemon:
            await synced(daemon)
            await daemon.wait_for_log(r"the Matrix device changed")
            await me.say(room, "two")
            answer = await me.wait_for(room, bot.user_id, answered("echo: two"),
                                       what="the answer from the new device")
            assert answer["decrypted"]
            devices = await me.bot_devices(bot.user_id)
            assert set(devices) == {bot.device_id, login["device_id"]}
        assert login["access_token"] not in daemon.log


@SHARED
async def test_in_a_room_with_more_people_every_member_reads_the_answer(
        tmp_path: Path, env: Shared) -> None:
    synapse, bot = env.server, env.bot
    # Only alice is allowed; bob and carol read along.
    async with crypto_person(tmp_path / "alice", synapse, env.people["room_alice"]) as alice, \
            crypto_person(tmp_path / "bob", synapse) as bob, \
            crypto_person(tmp_path / "carol", synapse) as carol:
        room = await alice.create_encrypted_room([bot.user_id, bob.user_id])
        await bob.join(room)
        await alice.wait_joined(room, bot.user_id)
        await alice.wait_joined(room, bob.user_id)
        await alice.say(room, f"{bot.user_id} what is up")
        for member in (alice, bob):
            answer = await member.wait_for(room, bot.user_id,
                                           lambda e: "what is up" in text(e),
                                           what="the answer to the mention")
            assert answer["decrypted"]
        # Someone new: the bot's next answer is shared with their device too.
        await alice.invite(room, carol.user_id)
        await carol.join(room)
        await alice.wait_joined(room, carol.user_id)
        await alice.say(room, f"{bot.user_id} and now?")
        for member in (alice, bob, carol):
            later = await member.wait_for(room, bot.user_id, lambda e: "and now?" in text(e),
                                          what="the answer after a new member came")
            assert later["decrypted"]
        assert not plain_from(alice, room, bot)


@pytest.mark.slow
async def test_sigkill_mid_backlog_in_an_encrypted_room_loses_nothing(
        tmp_path: Path, synapse: Synapse) -> None:
    bot = synapse.register()
    number = re.compile(r"\bm(\d+)\b")
    async with crypto_person(tmp_path, synapse) as me:
        def answered() -> list[int]:
            return [int(n) for e in me.from_user(room, bot.user_id)
                    for n in number.findall(text(e))]

        config = matrix_config(tmp_path, synapse, bot, [me.user_id], reaction_done="",
                               e2ee=True)
        daemon = await Daemon(config).start()
        await synced(daemon)
        room = await me.create_encrypted_dm(bot.user_id)
        for n in range(4):
            await me.say(room, f"m{n} #slow-once=1")
        await me.wait_until(answered, what="a first answer")
        await daemon.kill()
        # While it is down: a new group session (its key waits as a to-device message) and
        # more messages than one /sync returns (the gap is read back, still encrypted).
        await me.new_group_session(room)
        for n in range(4, 60):
            await me.say(room, f"m{n}")
        async with Daemon(config) as again:
            await me.wait_until(lambda: set(answered()) == set(range(60)), timeout=180,
                                what="every message answered")
            await again.wait_for_log(r"filled a gap of [1-9]\d* events")
        assert sorted(answered()) == list(range(60)), "a message answered twice"
        assert not plain_from(me, room, bot)
    assert "could not be decrypted" not in again.log


async def test_streamed_edits_are_encrypted_and_an_encrypted_edit_updates_a_queued_message(
        tmp_path: Path, synapse: Synapse) -> None:
    bot = synapse.register()
    gates = Gates()
    port = await gates.start()
    agent = {"command": [sys.executable, str(GATED_AGENT), "--gate-port", str(port)]}
    try:
        async with crypto_person(tmp_path, synapse) as me:
            config = matrix_config(tmp_path, synapse, bot, [me.user_id], agent=agent,
                                   stream=True, reaction_done="", e2ee=True,
                                   sections={"bridge": {"coalesce": False}})
            async with Daemon(config) as daemon:
                await synced(daemon)
                room = await me.create_encrypted_dm(bot.user_id)
                said = "stream me " * 30 + "#gate=g"
                await me.say(room, said)
                await gates.reached("g")
                draft = await me.wait_for(room, bot.user_id, lambda e: text(e).endswith("…"),
                                          what="the streamed draft")
                # Queued behind the held turn, then corrected with an (encrypted) edit.
                second = await me.say(room, "secnd")
                await daemon.wait_for_log(rf"matrix event {re.escape(second)} -> accepted")
                await me.send(room, {"msgtype": "m.text", "body": "* second",
                                     "m.new_content": {"msgtype": "m.text", "body": "second"},
                                     "m.relates_to": {"rel_type": "m.replace",
                                                      "event_id": second}})
                await daemon.wait_for_log(rf"queued message {re.escape(second)} updated")
                gates.open("g")
                edit = await me.wait_for(room, bot.user_id,
                                         lambda e: final(e) == f"echo: {said}",
                                         what="the final edit")
                assert draft["decrypted"] and edit["decrypted"]
                assert edit["content"]["m.relates_to"] == {"rel_type": "m.replace",
                                                           "event_id": draft["event_id"]}
                await me.wait_for(room, bot.user_id, lambda e: final(e) == "echo: second",
                                  what="the edited message answered")
            assert not any("secnd" in final(e) for e in me.from_user(room, bot.user_id))
            assert not plain_from(me, room, bot)
    finally:
        gates.close()


def final(event: Seen) -> str:
    """The text an event shows: an edit's new content, else its body."""
    new = event.get("content", {}).get("m.new_content")
    return str(new.get("body", "")) if isinstance(new, dict) else text(event)


@SHARED
async def test_files_go_both_ways_encrypted(tmp_path: Path, env: Shared) -> None:
    synapse, bot = env.server, env.bot
    put(env.tmp, "out/report.pdf", PDF)
    directive = script_reply(env.tmp, "files", "Here.\nMEDIA: out/report.pdf")
    async with crypto_person(tmp_path, synapse, env.people["files"]) as me:
        room = await me.create_encrypted_dm(bot.user_id)
        notes = b"shopping: apples, pears\n"
        await me.send(room, {"msgtype": "m.file", "body": "notes.txt",
                             "file": await me.upload_encrypted(notes, "notes.txt"),
                             "info": {"mimetype": "text/plain", "size": len(notes)}})
        # A text file reaches the agent inlined: the echo holds its (decrypted) text.
        seen = await me.wait_for(room, bot.user_id, lambda e: "apples, pears" in text(e),
                                 what="the file's text read back")
        assert seen["decrypted"]
        await me.say(room, f"send the report {directive}")
        sent = await me.wait_for(room, bot.user_id,
                                 lambda e: e["content"].get("filename") == "report.pdf",
                                 what="the agent's file")
        assert sent["decrypted"] and "url" not in sent["content"], \
            "a file into an encrypted room must be encrypted too"
        assert await me.download_decrypted(sent["content"]["file"]) == PDF


@SHARED
async def test_a_message_that_cannot_be_decrypted_is_reported(tmp_path: Path,
                                                               env: Shared) -> None:
    synapse, bot, daemon = env.server, env.bot, env.daemon
    mark = len(daemon.log_lines)
    async with crypto_person(tmp_path, synapse, env.people["undecryptable"]) as me:
        room = await me.create_encrypted_dm(bot.user_id)
        # Encrypted with a group session the bot never got the key of, twice.
        sealed = {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnABm2ShDcx",
                  "device_id": me.account.device_id, "sender_key": "a" * 43,
                  "session_id": "b" * 43}
        await me.send_raw(room, "m.room.encrypted", sealed)
        notice = await me.wait_for(room, bot.user_id, lambda e: "decrypt" in text(e),
                                   what="the could-not-read notice")
        assert notice["decrypted"] and notice["content"]["msgtype"] == "m.notice"
        await me.send_raw(room, "m.room.encrypted", {**sealed, "ciphertext": "AwgBEnAB"})
        # A to-device message that is not what it claims: logged, the sync goes on.
        await me.send_to_device_raw(bot.user_id, "m.room.encrypted", {
            "algorithm": "m.olm.v1.curve25519-aes-sha2", "sender_key": "c" * 43,
            "ciphertext": {"nokey": {"type": 0, "body": "AwoG"}}})
        await me.say(room, "and this one?")
        await me.wait_for(room, bot.user_id, answered("echo: and this one?"),
                          what="the next message answered")
        # In a direct chat each unreadable message is reported; the session's key is
        # waited for once, not again for each of its messages.
        assert sum("decrypt" in text(e) for e in me.from_user(room, bot.user_id)) == 2
    # The daemon runs on: its log is read as it comes, so wait for the lines, then count them.
    await daemon.wait_until(lambda: daemon.log_since(mark).count("could not be decrypted") >= 2
                            and "encryption: to-device event from" in daemon.log_since(mark),
                            what="both reported in the log, and the to-device event")
    log = daemon.log_since(mark)
    assert log.count("could not be decrypted") == 2
    assert log.count("waiting for the key of") == 1


async def test_e2ee_without_the_extra_is_a_configuration_error(tmp_path: Path) -> None:
    # A module named olm that cannot be imported stands for python-olm not being installed.
    shadow = tmp_path / "no-olm"
    shadow.mkdir()
    (shadow / "olm.py").write_text("raise ImportError(\"No module named 'olm'\")\n")
    config = tmp_path / "config.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[matrix]\nhomeserver = "http://127.0.0.1:9"\n'
        'user_id = "@bot:example.org"\naccess_token = "syt_secret_not_shown"\ne2ee = true\n')
    code, out, err = await run_cli("run", "--config", str(config),
                                   env={"PYTHONPATH": str(shadow)})
    assert code == exit_codes.CONFIG, err
    assert "matrix.e2ee needs the encryption extra (olm not installed)" in err
    assert "pip install 'picobridge[e2ee]'" in err
    assert "syt_secret_not_shown" not in out + err
