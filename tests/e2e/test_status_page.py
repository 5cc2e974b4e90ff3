"""The status page on http.listen as a person sees it: rendered by headless Chromium (Debian's
chromium package) from a running `picobridge run`, with a screenshot in the test's folder."""

from __future__ import annotations

import asyncio
import html
import re
import shutil
import struct
import subprocess
import urllib.request
from pathlib import Path

from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, http_port

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]
SECRET_WORDS = "my bank pin is 4711"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, ("headless Chromium is needed: apt-get install -y --no-install-recommends "
                   "chromium (scripts/test does this when run as root)")
    return found


def browse(url: str, folder: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    profile = folder / f"profile-{len(list(folder.glob('profile-*')))}"
    return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *mode,
                           url], capture_output=True, text=True, timeout=90, check=True)


def visible_text(dom: str) -> str:
    body = re.sub(r"<(style|head)\b.*?</\1>", " ", dom, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_the_status_page_shows_the_agent_the_queue_and_deliveries(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake,
                                 sections={"http": {"listen": "127.0.0.1:0"}})
        async with Daemon(config) as daemon:
            url = f"http://127.0.0.1:{await http_port(daemon)}/"
            await started(daemon, fake)
            fake.user_message(USER, USER, SECRET_WORDS)
            await reply_containing(fake, USER, "echo: my bank pin")
            # A turn that keeps the agent busy while the page is looked at.
            fake.user_message(USER, USER, "#slow=30 keep the agent busy")
            await AgentJournal(tmp_path / "agent").wait_until(
                lambda j: len(j.messages()) == 2, what="the slow turn reaching the agent")

            dom = (await asyncio.to_thread(browse, url, tmp_path, "--dump-dom")).stdout
            shot = tmp_path / "status-page.png"
            await asyncio.to_thread(browse, url, tmp_path, f"--screenshot={shot}",
                                    "--window-size=1200,900")
            raw = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read())

    text = visible_text(dom)
    assert "picobridge" in text and "degraded" not in text
    # The agent's state per worker: name, state, turns running.
    assert re.search(r"Agent worker state turns running .* w1 ready 1 ", text), text
    # The queue: one message in its turn.
    assert "1 queue depth 1 turns in flight" in text, text
    assert "telegram connected" in text
    assert re.search(r"Recent deliveries and failures .* telegram:[0-9a-f]{10} delivered",
                     text), text
    assert str(USER) not in dom and str(USER) not in raw.decode()  # no user or chat id
    # Nothing secret and no message text, in what is shown or in the page's source.
    page = raw.decode()
    for never in (SECRET_WORDS, "echo:", "keep the agent busy", fake.token):
        assert never not in dom and never not in page
    assert '<meta http-equiv="refresh" content="5">' in page
    assert png_size(shot) == (1200, 900) and shot.stat().st_size > 20_000
