"""Slack end to end: files an agent sends (picobot `attachments`, `MEDIA:` lines, Markdown
images) arrive through files_upload_v2 (getUploadURLExternal, the uploads, one
completeUploadExternal) with their exact bytes, in the DM or the thread, the text as the
initial comment when it fits one message and before the files when it does not.

One daemon serves the module; each test talks in its own conversation and judges only the
uploads made during it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.media_support import JPEG, PDF, PNG, put, script_reply
from tests.e2e.slack_support import all_acked, assert_no_secrets, reply_to, slack_config
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.harness import Daemon, settle

# One worker runs the whole module (xdist would start the module's daemon again in each).
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_slack_media")]

ALICE = "U0ALICE"


@dataclass
class Env:
    fake: FakeSlack
    daemon: Daemon
    tmp: Path

    async def settled(self) -> None:
        """Once the daemon has finished what the tests before gave it."""
        await settle(self.tmp / "state" / "picobridge.db", lambda: all_acked(self.fake))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("slack-media")
    async with FakeSlack() as fake:
        daemon = Daemon(slack_config(tmp, fake, allowed_users=[DEFAULT_USER, ALICE]))
        async with daemon:
            await fake.wait_for_socket()
            yield Env(fake, daemon, tmp)
        assert_no_secrets(daemon, fake)
        assert "Traceback" not in daemon.log


async def test_attachments_media_lines_and_images_arrive_in_one_upload(env: Env) -> None:
    fake, tmp = env.fake, env.tmp
    await env.settled()
    uploaded = len(fake.uploaded_files)
    completed = len(fake.calls_to("files.completeUploadExternal"))
    put(tmp, "out/report.pdf", PDF)
    put(tmp, "chart.png", PNG)
    photo = put(tmp, "shots/pic.jpg", JPEG)
    put(tmp, "secret-link", b"")
    directive = script_reply(
        tmp, "files", "Here you go.\nMEDIA: out/report.pdf\n![the chart](chart.png)\n"
        "MEDIA: /etc/passwd\nDone.",
        [{"name": "notes.md", "content": "# Notes\n"}, {"name": "pic.jpg", "path": str(photo)}])
    event = fake.dm_message(f"files please {directive}")
    await fake.send_event(event)
    share = await fake.wait_for_message(channel=event["channel"],
                                        predicate=lambda m: m.kind == "file_share")
    completes = fake.calls_to("files.completeUploadExternal")[completed:]
    assert len(completes) == 1  # several files, one upload
    uploads = {u.filename: u for u in fake.uploaded_files[uploaded:]}
    assert sorted(uploads) == ["chart.png", "notes.md", "pic.jpg", "report.pdf"]
    assert uploads["notes.md"].content == b"# Notes\n"
    assert uploads["pic.jpg"].content == JPEG
    assert uploads["report.pdf"].content == PDF
    assert uploads["chart.png"].content == PNG
    assert uploads["chart.png"].title == "the chart"
    assert uploads["chart.png"].alt_txt == "the chart"
    assert [f["name"] for f in share.files] == ["notes.md", "pic.jpg", "report.pdf", "chart.png"]
    # The text is the upload's comment, without the lines that named files, with a note for
    # the one withheld.
    assert share.text.startswith("Here you go.")
    assert "Done." in share.text and "MEDIA:" not in share.text and "![" not in share.text
    assert "passwd was not sent: withheld" in share.text
    assert share.thread_ts is None
    assert [m.kind for m in fake.posted_messages(event["channel"])] == ["file_share"]


async def test_a_long_text_goes_first_and_the_files_follow_in_the_thread(env: Env) -> None:
    fake, tmp = env.fake, env.tmp
    await env.settled()
    uploaded = len(fake.uploaded_files)
    put(tmp, "a.png", PNG)
    long_text = "A long answer, paragraph after paragraph.\n\n" * 120
    directive = script_reply(tmp, "long", long_text + "MEDIA: a.png")
    _, mention = await fake.send_mention(f"answer at length {directive}",
                                         channel="C0MEDIA", user=ALICE)
    ts = mention["payload"]["event"]["ts"]
    share = await fake.wait_for_message(channel="C0MEDIA", thread_ts=ts,
                                        predicate=lambda m: m.kind == "file_share")
    await reply_to(fake, "C0MEDIA", "A long answer", thread_ts=ts)
    sent = fake.posted_messages("C0MEDIA")
    assert [m.kind for m in sent][-1] == "file_share"
    assert all(m.kind == "message" and m.thread_ts == ts for m in sent[:-1])
    assert "".join(m.text for m in sent[:-1]).count("A long answer") == 120
    assert share.text == "" and share.thread_ts == ts
    (upload,) = fake.uploaded_files[uploaded:]
    assert upload.content == PNG and upload.thread_ts == ts
