"""What the bot posts on a real Synapse: Markdown as HTML, long replies split without cutting
code, streaming by edits, the homeserver's rate limit waited out in order, files received,
and an encrypted room told once that the bot cannot read it.

One daemon (one bot, its inbound file limit 4,096 bytes: the refused file's test; the other
files are smaller) serves the module's tests but two: every test talks as its own person, in
a room it makes. Streaming (a gated agent) and the rate limit (a bot whose messages Synapse
limits) start their own.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.matrix_support import (
    Shared,
    body,
    matrix_config,
    person,
    shared_daemon,
    synced,
)
from tests.e2e.media_support import PDF, PNG, put, script_reply
from tests.e2e.test_telegram_streaming import GATED_AGENT, Gates
from tests.harness import Daemon
from tests.synapse.person import Event, Person
from tests.synapse.server import Account, Synapse

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("matrix_replies")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory,
              synapse: Synapse) -> AsyncIterator[Shared]:
    roles = ["markdown", "files_in", "encrypted", "files_out", "too_big"]
    async with shared_daemon(tmp_path_factory.mktemp("matrix-replies"), synapse, roles,
                             reaction_done="",
                             sections={"attachments": {"max_bytes": 4096}}) as shared:
        yield shared


async def direct_room(me: Person, bot: Account) -> str:
    room = await me.create_room([bot.user_id], direct=True)
    await me.wait_joined(room, bot.user_id)
    return room


def edits(me: Person, room: str, bot: str) -> list[Event]:
    return [e for e in me.from_bot(room, bot)
            if e["content"].get("m.relates_to", {}).get("rel_type") == "m.replace"]


async def test_markdown_arrives_as_html_and_long_replies_split_whole(env: Shared) -> None:
    synapse, bot = env.server, env.bot
    async with person(synapse, env.people["markdown"]) as me:
        room = await direct_room(me, bot)
        await me.say(room, "**bold** and `code` <b>raw</b>")
        answer = await me.wait_for_message(room, bot.user_id)
        content = answer["content"]
        assert content["body"] == "echo: **bold** and `code` <b>raw</b>"
        assert content["format"] == "org.matrix.custom.html"
        assert "<strong>bold</strong>" in content["formatted_body"]
        assert "<code>code</code>" in content["formatted_body"]
        assert "&lt;b&gt;raw&lt;/b&gt;" in content["formatted_body"]  # shown, not obeyed

        code = "\n".join(f"line {n:05d} = {'x' * 40}" for n in range(400))
        long = f"intro\n\n```python\n{code}\n```\n\noutro"
        await me.say(room, long)
        await me.wait_until(lambda: any(body(e).rstrip().endswith("outro")
                                        for e in me.messages_from(room, bot.user_id)),
                            what="the last part")
        parts = [e for e in me.messages_from(room, bot.user_id) if e is not answer]
        assert len(parts) >= 2
        for part in parts:
            assert body(part).count("```") % 2 == 0, "a part cuts a code block open"
            if "line 0" in body(part):
                assert "<pre><code" in part["content"]["formatted_body"]
        lines = [line for part in parts for line in body(part).split("\n")
                 if line.startswith("line ")]
        assert lines == code.split("\n")


async def test_files_are_received(env: Shared) -> None:
    synapse, bot = env.server, env.bot
    async with person(synapse, env.people["files_in"]) as me:
        room = await direct_room(me, bot)
        notes = b"shopping: apples, pears\n"
        uri = await me.upload(notes, "notes.txt", "text/plain")
        await me.send(room, {"msgtype": "m.file", "body": "notes.txt", "url": uri,
                             "info": {"mimetype": "text/plain", "size": len(notes)}})
        answer = await me.wait_for_message(room, bot.user_id)
        assert "apples, pears" in body(answer)
        picture = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
        uri = await me.upload(picture, "cat.png", "image/png")
        await me.send(room, {"msgtype": "m.image", "body": "look at this", "filename": "cat.png",
                             "url": uri, "info": {"mimetype": "image/png",
                                                  "size": len(picture)}})
        seen = await me.wait_for_message(room, bot.user_id, lambda e: "look at this" in body(e))
        saved = [p for p in (env.tmp / "state" / "media" / "matrix").iterdir()
                 if p.name.endswith("cat.png")]
        assert len(saved) == 1 and saved[0].read_bytes() == picture
        assert str(saved[0]) in body(seen)


async def test_an_encrypted_room_is_told_once(env: Shared) -> None:
    synapse, bot = env.server, env.bot
    async with person(synapse, env.people["encrypted"]) as me:
        room = await me.create_room([bot.user_id], direct=True, encrypted=True)
        await me.wait_joined(room, bot.user_id)
        sealed = {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEn...",
                  "device_id": "X", "sender_key": "k", "session_id": "s"}
        await me.send(room, sealed, kind="m.room.encrypted")
        notice = await me.wait_for_message(room, bot.user_id)
        assert "encrypted" in body(notice) and notice["content"]["msgtype"] == "m.notice"
        await me.send(room, sealed, kind="m.room.encrypted")
        await me.say(room, "plain hello")  # unencrypted messages are still read
        await me.wait_for_message(room, bot.user_id, lambda e: body(e) == "echo: plain hello")
        assert sum("encrypted" in body(e) for e in me.messages_from(room, bot.user_id)) == 1


async def test_files_the_agent_sends_are_uploaded(env: Shared) -> None:
    synapse, bot = env.server, env.bot
    put(env.tmp, "chart.png", PNG)
    put(env.tmp, "out/report.pdf", PDF)
    directive = script_reply(env.tmp, "files", "Here you go.\nMEDIA: out/report.pdf\n"
                             "![the chart](chart.png)",
                             [{"name": "notes.md", "content": "# Notes\nline two\n"}])
    async with person(synapse, env.people["files_out"]) as me:
        room = await direct_room(me, bot)
        await me.say(room, f"send me the files {directive}")
        await me.wait_until(lambda: len(me.messages_from(room, bot.user_id)) >= 4,
                            what="the text and three files")
        text, *files = me.messages_from(room, bot.user_id)
        assert body(text) == "Here you go."
        got = [(e["content"]["msgtype"], e["content"]["filename"], body(e)) for e in files]
        assert sorted(got) == sorted([("m.file", "notes.md", "notes.md"),
                                      ("m.file", "report.pdf", "report.pdf"),
                                      ("m.image", "chart.png", "the chart")])
        blobs = {e["content"]["filename"]: await me.download(e["content"]["url"])
                 for e in files}
        assert blobs == {"notes.md": b"# Notes\nline two\n", "report.pdf": PDF,
                         "chart.png": PNG}


async def test_a_file_over_the_limit_is_refused_whatever_its_size_claims(env: Shared) -> None:
    synapse, bot = env.server, env.bot
    async with person(synapse, env.people["too_big"]) as me:
        room = await direct_room(me, bot)
        big = b"\x00\x01" * 20_000
        uri = await me.upload(big, "big.bin", "application/octet-stream")
        await me.send(room, {"msgtype": "m.file", "body": "big.bin", "url": uri,
                             "info": {"mimetype": "application/octet-stream", "size": 100}})
        refusal = await me.wait_for_message(room, bot.user_id)
        assert "big.bin" in body(refusal) and "4,096 bytes" in body(refusal)
        await me.say(room, "still there?")
        await me.wait_for_message(room, bot.user_id, lambda e: body(e) == "echo: still there?")
        assert not list((env.tmp / "state" / "media").rglob("*big.bin"))
        assert "echo: big" not in " ".join(body(e) for e in me.messages_from(room, bot.user_id))


# The two from here on start their own daemon (another agent; a rate-limited bot).


async def test_streaming_edits_one_message_into_the_answer(tmp_path: Path,
                                                            synapse: Synapse) -> None:
    bot, alice = synapse.register(), synapse.register()
    gates = Gates()
    port = await gates.start()
    agent = {"command": [sys.executable, str(GATED_AGENT), "--gate-port", str(port)]}
    config = matrix_config(tmp_path, synapse, bot, [alice.user_id], agent=agent,
                           stream=True, reaction_done="")
    try:
        async with Daemon(config) as daemon, person(synapse, alice) as me:
            await synced(daemon)
            room = await direct_room(me, bot)
            text = "stream me " * 30 + "#gate=g"
            await me.say(room, text)
            await gates.reached("g")
            # Half the answer is streamed; the agent holds the rest until the gate opens.
            draft = await me.wait_for_message(room, bot.user_id, what="the draft")
            assert body(draft).startswith("echo: stream me") and body(draft).endswith("…")
            gates.open("g")
            want = f"echo: {text}"
            await me.wait_until(lambda: any(
                e["content"].get("m.new_content", {}).get("body") == want
                for e in edits(me, room, bot.user_id)), what="the answer as an edit")
            assert me.messages_from(room, bot.user_id) == [draft], \
                "the answer must replace the draft, not follow it"
            for edit in edits(me, room, bot.user_id):
                assert edit["content"]["m.relates_to"]["event_id"] == draft["event_id"]
    finally:
        gates.close()


async def test_the_rate_limit_is_waited_out_in_order(tmp_path: Path,
                                                     synapse: Synapse) -> None:
    bot = synapse.register(unlimited=False)  # a burst of 2, then one every 3.3 s
    alice = synapse.register()
    config = matrix_config(tmp_path, synapse, bot, [alice.user_id], reaction_done="",
                           sections={"bridge": {"coalesce": False}}, agent={"turn_timeout": 90})
    async with Daemon(config) as daemon, person(synapse, alice) as me:
        await synced(daemon)
        room = await direct_room(me, bot)
        for n in range(5):
            await me.say(room, f"n{n}")
        await me.wait_until(lambda: len(me.messages_from(room, bot.user_id)) >= 5,
                            timeout=90, what="every answer")
        await daemon.wait_for_log(r"not delivered \(Matrix rate limit: retry after")
        assert [body(e) for e in me.messages_from(room, bot.user_id)] == \
            [f"echo: n{n}" for n in range(5)]
