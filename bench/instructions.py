"""What the bridge core costs per message in instructions, a figure a shared machine's load
does not move.

On a machine several people share, bench/bridge_overhead.py's rates and even its CPU times
swing by a third from one run to the next (other processes' cache misses, the GIL waited for
longer, the disk's syncs slower). The instructions the daemon's process executes for a
message hardly move at all (about 1 % between runs): this runs bridge_overhead's throughput
run (picobot-json, coalescing off, one turn per message) under valgrind's cachegrind, which
counts them, once with --warmup messages and once with that many more, and gives the
difference per message, so the start and the stop count for nothing. User space only (the
kernel's part, the WAL's writes and syncs, is bridge_overhead's "writes" line); the agent is a
child process of its own and is not counted. Needs valgrind (apt-get install valgrind); the
run is about 40 times slower than without it, so keep --messages modest.

Usage: python bench/instructions.py [--messages 1000] [--warmup 100] [--chats 20]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import bridge_overhead as overhead  # noqa: E402
from picobridge.cli.wiring import Daemon  # noqa: E402

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


async def _throughput(messages: int, chats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async def body(bridge: Daemon, adapter: overhead.BenchAdapter) -> None:
            for i in range(messages):
                await bridge.intake.submit(overhead.message(f"c{i % chats}", i))
            while len(adapter.delivered) < messages:
                adapter.event.clear()
                await adapter.event.wait()

        await overhead.with_bridge("picobot-json", Path(tmp), False, body)


def counted(valgrind: str, messages: int, chats: int) -> int:
    """Instructions this process's code executes for a throughput run of `messages`."""
    done = subprocess.run(
        [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, __file__, "--run", str(messages), "--chats", str(chats)],
        capture_output=True, text=True, check=False)
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the run under valgrind failed ({done.returncode}):\n"
                         f"{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # the counted child
    args = parser.parse_args()
    if args.run is not None:
        asyncio.run(_throughput(args.run, args.chats))
        return
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind not found (apt-get install valgrind)")
    short = counted(valgrind, args.warmup, args.chats)
    long = counted(valgrind, args.warmup + args.messages, args.chats)
    per = (long - short) / args.messages
    print(f"instructions:      {per / 1e6:.3f} M per message in the throughput run "
          f"(picobot-json, {args.messages} messages after {args.warmup}, {args.chats} chats; "
          "the daemon's process, user space, valgrind cachegrind)")


if __name__ == "__main__":
    main()
