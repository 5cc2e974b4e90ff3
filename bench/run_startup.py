"""Benchmark: how long `picobridge run` takes from its start to READY=1 (sd_notify: the agent
ready and the platform connected), what CPU its process has used by then, and its resident set.

A Telegram-only daemon on the fake Bot API (tests/fakes/telegram/) with the instant fake agent,
started N times, stopped with SIGTERM after each READY. The CPU figure is the daemon's own
process (utime + stime in /proc/<pid>/stat when READY arrives, the validation before the exec
included: the process is the same; the agent's is not counted); it moves far less than the
wall time on a shared machine. Several `--picobridge` console scripts (other installs: before
and after a change) are run interleaved, one start of each per round, so the load weighs on
them alike.

Run: `python bench/run_startup.py [--runs 10] [--picobridge PATH ...]`. No target: a figure
to compare (the handoff of cli/handoff.py costs one interpreter start).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.harness import base_config, cli_env, write_config  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process `pid` (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


async def until_ready(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    while not (await loop.sock_recv(sock, 4096)).startswith(b"READY=1"):
        pass


async def one_start(picobridge: str, config: Path, tmp: Path) -> tuple[float, float, float]:
    """Wall seconds to READY=1, the daemon's CPU seconds then, its RSS in MB."""
    path = tmp / "notify.sock"
    path.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.setblocking(False)
        env = cli_env({"NOTIFY_SOCKET": str(path)})
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            picobridge, "run", "--config", str(config), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env)
        try:
            ready = asyncio.create_task(until_ready(sock))
            died = asyncio.create_task(proc.wait())
            async with asyncio.timeout(120):
                await asyncio.wait({ready, died}, return_when=asyncio.FIRST_COMPLETED)
            if not ready.done():
                ready.cancel()
                assert proc.stderr is not None
                raise RuntimeError(f"{picobridge} exited {proc.returncode} before READY=1: "
                                   + (await proc.stderr.read()).decode()[-2000:])
            wall = time.perf_counter() - started
            figures = wall, cpu_seconds(proc.pid), rss_mb(proc.pid)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            await proc.communicate()
    return figures


async def measure(installs: list[str], runs: int) -> dict[str, list[tuple[float, float, float]]]:
    samples: dict[str, list[tuple[float, float, float]]] = {p: [] for p in installs}
    with tempfile.TemporaryDirectory(prefix="picobridge-bench-run-") as tmp_name:
        tmp = Path(tmp_name)
        async with FakeTelegram() as fake:
            # A state_dir per install: one may have migrated the database beyond another.
            paths = {}
            for n, picobridge in enumerate(installs):
                config = base_config(tmp / str(n), "--instant")
                config["log"] = {"level": "INFO"}
                config["telegram"] = {"token": fake.token, "base_url": fake.base_url,
                                      "base_file_url": fake.base_file_url,
                                      "rate_limiter": False, "allowed_users": [4242]}
                (tmp / str(n)).mkdir()
                paths[picobridge] = write_config(tmp / str(n), config)
            for picobridge in installs:  # warm the page cache and the .pyc files first
                await one_start(picobridge, paths[picobridge], tmp)
            for _ in range(runs):
                for picobridge in installs:
                    samples[picobridge].append(
                        await one_start(picobridge, paths[picobridge], tmp))
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--picobridge", action="append",
                        help="a console script to time, repeatable (default: this "
                             "interpreter's)")
    args = parser.parse_args()
    installs = args.picobridge or [str(Path(sys.executable).with_name("picobridge"))]
    load = os.getloadavg()[0]
    samples = asyncio.run(measure(installs, args.runs))
    print(f"picobridge run to READY=1 (Telegram, fake agent), median of {args.runs} runs each, "
          f"interleaved; 1-min load {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    for picobridge, values in samples.items():
        wall = statistics.median(w for w, _, _ in values)
        cpu = statistics.median(c for _, c, _ in values)
        rss = statistics.median(r for _, _, r in values)
        print(f"{picobridge}: ready in {wall * 1000:7.1f} ms  (CPU {cpu * 1000:6.1f} ms, "
              f"RSS at ready {rss:5.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
