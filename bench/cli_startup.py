"""Benchmark: how long the command line takes to start, against the interpreter's own start.

Side by side, interleaved (one run of each case, then the next round, so a shared machine's
load weighs on all of them alike), median of N runs (default 10):
- `python -c pass` and `python -c "import pydantic_settings"` on the same interpreter;
- `picobridge --version`, `picobridge --help` and `picobridge access list` (a config with
  a state_dir of its own, no database: what an operator's script meets first).
Run: `python bench/cli_startup.py [--runs 10] [--picobridge PATH]` (PATH: another install's
console script, to compare before and after). Targets: --version within 3x and --help within
5x of `python -c pass`; access list within 1.5x of `import pydantic_settings`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"--version": ("python -c pass", 3.0), "--help": ("python -c pass", 5.0),
           "access list": ("import pydantic_settings", 1.5)}


def cases(picobridge: str, config: Path) -> dict[str, list[str]]:
    python = str(Path(picobridge).with_name("python")) if Path(picobridge).is_absolute() \
        else sys.executable
    return {
        "python -c pass": [python, "-c", "pass"],
        "import pydantic_settings": [python, "-c", "import pydantic_settings"],
        "--version": [picobridge, "--version"],
        "--help": [picobridge, "--help"],
        "access list": [picobridge, "access", "list", "--config", str(config)],
    }


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def measure(picobridge: str, runs: int) -> dict[str, float]:
    """Median seconds per case."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICOBRIDGE_")}
    with tempfile.TemporaryDirectory(prefix="picobridge-bench-cli-") as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(f'state_dir = "{tmp}/state"\n', encoding="utf-8")
        argvs = cases(picobridge, config)
        samples: dict[str, list[float]] = {name: [] for name in argvs}
        for argv in argvs.values():
            timed(argv, env)  # warm the page cache and the .pyc files first
        for _ in range(runs):
            for name, argv in argvs.items():
                samples[name].append(timed(argv, env))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--picobridge", default=str(Path(sys.executable).with_name("picobridge")),
                        help="the console script to time (default: this interpreter's)")
    args = parser.parse_args()
    medians = measure(args.picobridge, args.runs)
    print(f"CLI start, median of {args.runs} runs each, interleaved ({args.picobridge})")
    met = True
    for name, seconds in medians.items():
        line = f"{name:<26} {seconds * 1000:8.1f} ms"
        if name in TARGETS:
            against, target = TARGETS[name]
            ratio = seconds / medians[against]
            met = met and ratio <= target
            line += f"  {ratio:5.2f}x {against} (target <= {target:g}x)"
        print(line)
    print(f"targets {'met' if met else 'missed'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
