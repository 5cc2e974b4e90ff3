"""A daemon loads what it uses: a Telegram-only `picobridge run` loads no other platform's
libraries, no HTTP server without http.listen, no second HTTP stack, even once users have sent
it files (httpx's httpcore, anyio and h11 are about 4 MB resident), and never PTB's application
framework (telegram.ext, about 3 MB), not even for the rate limiter. Counted in modules
(sys.modules at exit), a figure that is the same on a busy machine; bench/memory.py gives the
megabytes."""

from __future__ import annotations

import os
from pathlib import Path

from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon

# Imported at start by every Python process with this folder on its path; writes the daemon's
# sys.modules when it exits (the fake agent it starts is left alone). `run` is the daemon
# proper it re-executes itself into (cli/handoff.py), `chat` the command line itself.
HOOK = """
import atexit
import sys

def _write():
    if (any("picobridge.cli.handoff" in arg for arg in sys.orig_argv)
            or sys.orig_argv[1:3] == ["-m", "picobridge"]):
        with open({listing!r}, "w") as out:
            out.write("\\n".join(sorted(sys.modules)))

atexit.register(_write)
"""

# Never in a Telegram-only daemon without a listener, whatever its users send.
NOT_FOR_TELEGRAM = ("telegram.ext", "httpcore", "anyio", "h11", "slack_sdk", "slack_bolt",
                    "mautrix", "discord", "aiohttp.web", "prometheus_client", "rich", "click",
                    "pygments",
                    "picobridge.adapters.slack.adapter", "picobridge.adapters.telegram.webhook",
                    "picobridge.ops.endpoints", "picobridge.ops.http_server")


def probed(tmp: Path) -> tuple[dict[str, str], Path]:
    """The environment that makes a daemon write its modules, and where it writes them."""
    hook, listing = tmp / "hook", tmp / "modules.txt"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK.format(listing=str(listing)), encoding="utf-8")
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path}, listing


def unwanted(names: list[str], unwanted: tuple[str, ...] = NOT_FOR_TELEGRAM) -> list[str]:
    return [n for n in names if any(n == m or n.startswith(m + ".") for m in unwanted)]


async def test_a_telegram_daemon_that_took_files_loads_no_second_http_stack(
        tmp_path: Path) -> None:
    env, listing = probed(tmp_path)
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake), env=env) as daemon:
            await started(daemon, fake)
            fake.user_document(USER, USER, b"%PDF-1.4 bytes", "report.pdf", "application/pdf",
                               caption="read this")
            answer = await reply_containing(fake, USER, "read this")
            fake.user_document(USER, USER, b"second file", "notes.bin",
                               "application/octet-stream", caption="and this")
            await reply_containing(fake, USER, "and this")
        assert daemon.proc is not None and daemon.proc.returncode == 0, daemon.log[-2000:]
    assert "[Attachment: report.pdf]" in (answer.text or "")  # the agent had the file
    assert len(fake.downloads) == 2, fake.downloads  # both files came over the network
    names = listing.read_text(encoding="utf-8").split("\n")
    # What is counted is a daemon that fetched files with its Telegram adapter, and rendered
    # its replies' Markdown.
    assert {"telegram", "aiohttp", "picobridge.adapters.telegram.files",
            "telegramify_markdown", "pyromark"} <= set(names)
    # Without the rate limiter (these tests' default), not its bucket library either.
    assert unwanted(names, (*NOT_FOR_TELEGRAM, "aiolimiter")) == [], unwanted(names)


# Loaded by the first message, not by an idle daemon: the Markdown renderer (telegramify_markdown
# and pyromark, about 1.9 MB resident; our splitter, 0.2 MB), the limiter's bucket library
# (aiolimiter reads its package metadata when imported: importlib.metadata, zipfile, csv); never
# the settings of a platform the configuration does not name, nor zipfile for the migrations'
# listing.
NOT_WHEN_IDLE = ("telegramify_markdown", "pyromark", "picobridge.adapters.common.textsplit",
                 "aiolimiter", "importlib.metadata", "zipfile",
                 "picobridge.adapters.slack.settings", "picobridge.adapters.matrix.settings",
                 "picobridge.adapters.discord.settings")


async def test_an_idle_daemon_has_not_loaded_what_the_first_message_needs(
        tmp_path: Path) -> None:
    env, listing = probed(tmp_path)
    async with FakeTelegram() as fake:
        # The rate limiter on, as by default.
        async with Daemon(telegram_config(tmp_path, fake, rate_limiter=True), env=env) as daemon:
            await started(daemon, fake)
            await fake.wait_for_poll()
        assert daemon.proc is not None and daemon.proc.returncode == 0, daemon.log[-2000:]
    names = listing.read_text(encoding="utf-8").split("\n")
    # The adapter, its renderer and its limiter were there, and the store had migrated.
    assert {"picobridge.adapters.telegram.render", "picobridge.adapters.telegram.limiter",
            "picobridge.store.schema"} <= set(names)
    loaded = unwanted(names, (*NOT_FOR_TELEGRAM, *NOT_WHEN_IDLE))
    assert loaded == [], loaded


async def test_the_rate_limiter_answers_without_ptbs_framework(tmp_path: Path) -> None:
    env, listing = probed(tmp_path)
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, rate_limiter=True)
        async with Daemon(config, env=env) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "limited hello")
            await reply_containing(fake, USER, "echo: limited hello")
        assert daemon.proc is not None and daemon.proc.returncode == 0, daemon.log[-2000:]
    names = listing.read_text(encoding="utf-8").split("\n")
    # The limiter, its bucket library and the renderer were there; telegram.ext never was.
    assert {"aiolimiter", "picobridge.adapters.telegram.limiter", "telegramify_markdown",
            "pyromark", "picobridge.adapters.common.textsplit"} <= set(names)
    assert unwanted(names) == [], unwanted(names)
