"""Benchmark: the daemon's memory when Telegram's getFile lies about a file's size.

getFile claims 100 bytes; the fake file server streams `--megabytes` (default 300) without a
Content-Length. Prints the daemon's resident set when idle, its peak (VmHWM, reset just before
the download) and how many bytes the server got to send before the daemon hung up.

Run: `python bench/download_cap.py [--megabytes 300]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.harness import Daemon, proc_status_kib  # noqa: E402


async def main(megabytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with (FakeTelegram() as fake,
                    Daemon(telegram_config(Path(tmp), fake)) as daemon):
            await started(daemon, fake)
            fake.user_message(USER, USER, "warm up")
            await reply_containing(fake, USER, "echo: warm up")
            assert daemon.proc is not None
            pid = daemon.proc.pid
            idle = proc_status_kib(pid, "VmRSS")
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # noqa: ASYNC240 (VmHWM from here)
            stored = fake.add_file(b"", "huge.bin", file_size=100,
                                   streamed_size=megabytes * 1024 * 1024)
            fake.user_message(USER, USER, caption="take this", document=stored)
            await reply_containing(fake, USER, "echo: take this", timeout=120)
            peak = proc_status_kib(pid, "VmHWM")
            await fake.wait_for(lambda: stored.file_path in fake.streamed_bytes)
    sent = fake.streamed_bytes[stored.file_path]
    print(f"idle RSS {idle / 1024:.1f} MB; peak during the lying download {peak / 1024:.1f} MB "
          f"(+{(peak - idle) / 1024:.1f} MB); the server sent {sent / 2**20:.1f} MB of "
          f"{megabytes} MB before the daemon hung up")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=300)
    asyncio.run(main(parser.parse_args().megabytes))
