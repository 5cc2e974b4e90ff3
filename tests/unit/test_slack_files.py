"""Fetching users' Slack files (adapters/slack_files.py) from FakeSlack's file host."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from picobridge.adapters.common import downloads
from picobridge.adapters.common.attachments import AttachmentPolicy, AttachmentRefused
from picobridge.adapters.slack.files import SlackFiles, host_allowed, looks_like_login_page
from picobridge.config.sections import AttachmentSettings
from tests.fakes.server import DOWNLOAD
from tests.fakes.slack import LOGIN_PAGE_HTML, FakeSlack


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as f:
        yield f


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def files(fake: FakeSlack, session: aiohttp.ClientSession, tmp_path: Path, *,
          token: str | None = None, hosts: list[str] | None = None,
          **limits: Any) -> SlackFiles:
    policy = AttachmentPolicy(AttachmentSettings(**limits), tmp_path / "media")

    async def info(file_id: str) -> dict[str, Any]:
        return fake.file_info(file_id)

    return SlackFiles(session, token or fake.bot_token,
                      hosts if hosts is not None else ["127.0.0.1"], policy, info)


async def test_text_inline_and_binary_saved(fake: FakeSlack, session: aiohttp.ClientSession,
                                            tmp_path: Path) -> None:
    fetch = files(fake, session, tmp_path).fetch
    text = await fetch(fake.add_file("héllo\n".encode(), "a.txt", "text/plain"))
    assert (text.name, text.content, text.path) == ("a.txt", "héllo\n", None)
    data = bytes(range(256))
    binary = await fetch(fake.add_file(data, ".my photo (1).bin", "application/x-thing"))
    assert binary.content is None and binary.path is not None
    saved = Path(binary.path)
    assert await asyncio.to_thread(saved.read_bytes) == data
    assert saved.parent == (tmp_path / "media" / "slack").resolve()
    assert saved.name.endswith("my_photo_1_.bin")
    assert all(d.authorized for d in fake.downloads)


async def test_sign_in_page_is_not_taken_for_the_file(
        fake: FakeSlack, session: aiohttp.ClientSession, tmp_path: Path) -> None:
    fetch = files(fake, session, tmp_path, token="xoxb-0-not-the-right-one").fetch
    with pytest.raises(AttachmentRefused, match="sign-in page"):
        await fetch(fake.add_file(b"%PDF-1.7 ...", "report.pdf", "application/pdf"))
    # Even when the file itself is HTML, Slack's sign-in form gives it away.
    with pytest.raises(AttachmentRefused, match="sign-in page"):
        await fetch(fake.add_file(b"<html><body>mine</body></html>", "page.html", "text/html"))
    assert [d.authorized for d in fake.downloads] == [False, False]
    assert not (tmp_path / "media").exists()


async def test_token_only_goes_to_listed_hosts(fake: FakeSlack, session: aiohttp.ClientSession,
                                               tmp_path: Path) -> None:
    fetch = files(fake, session, tmp_path, hosts=["files.slack.com"]).fetch
    with pytest.raises(AttachmentRefused, match="may not fetch"):
        await fetch(fake.add_file(b"data", "a.txt"))
    assert fake.downloads == []


async def test_size_limits_before_and_during_download(
        fake: FakeSlack, session: aiohttp.ClientSession, tmp_path: Path) -> None:
    fetch = files(fake, session, tmp_path, max_bytes=1000, inline_max_bytes=100).fetch
    with pytest.raises(AttachmentRefused, match=r"big\.bin"):
        await fetch(fake.add_file(b"x" * 2000, "big.bin"))
    assert fake.downloads == []  # the declared size was enough to refuse
    liar = {**fake.add_file(b"x" * 200_000, "liar.bin"), "size": 10}
    with pytest.raises(AttachmentRefused, match=r"liar\.bin"):
        await fetch(liar)
    assert len(fake.downloads) == 1


async def test_transient_host_errors_are_retried(fake: FakeSlack, session: aiohttp.ClientSession,
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(downloads, "RETRY_DELAY", 0.01)
    fetch = files(fake, session, tmp_path).fetch
    fake.fail_next(DOWNLOAD, 503)
    got = await fetch(fake.add_file(b"after a hiccup", "h.txt"))
    assert got.content == "after a hiccup"
    fake.fail_next(DOWNLOAD, 500, times=3)
    with pytest.raises(AttachmentRefused, match="send it again"):
        await fetch(fake.add_file(b"never", "n.txt"))


async def test_file_known_only_by_id_is_looked_up(
        fake: FakeSlack, session: aiohttp.ClientSession, tmp_path: Path) -> None:
    full = fake.add_file(b"via files.info", "info.txt")
    got = await files(fake, session, tmp_path).fetch(
        {"id": full["id"], "file_access": "check_file_info"})
    assert got.content == "via files.info"


@pytest.mark.parametrize(("url", "ok"), [
    ("https://files.slack.com/files-pri/T1-F1/a.txt", True),
    ("http://files.slack.com/files-pri/T1-F1/a.txt", False),  # never the token in clear
    ("https://files.slack.com.evil.com/a.txt", False),
    ("https://evil.com/?files.slack.com", False),
    ("http://127.0.0.1:8080/a", True),
    ("https://127.0.0.1:8080/a", True),
])
def test_host_allowed(url: str, ok: bool) -> None:
    assert host_allowed(url, ["files.slack.com", "127.0.0.1"]) is ok


def test_login_page_detection() -> None:
    page = LOGIN_PAGE_HTML.encode()
    assert looks_like_login_page(page, "text/html", "image/png")
    assert looks_like_login_page(page, "text/html", "text/html")
    assert not looks_like_login_page(b"<html>my page</html>", "text/html", "text/html")
    assert not looks_like_login_page(page, "text/plain", "text/plain")
