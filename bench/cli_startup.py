"""Benchmark: how long the command line takes to start, against the interpreter's own start.

Side by side, interleaved (one run of each case, then the next round, so a shared machine's
load weighs on all of them alike), median of N runs (default 10):
- `python -c pass` and `python -c "import pydantic_settings"` on the same interpreter;
- `picobridge --version`, `picobridge --help` and `picobridge access list` (a config with
  a state_dir of its own, no database: what an operator's script meets first).
The targets are on the wall time; the CPU time (user + system, of the child) is printed too,
since on a shared machine it moves far less with the load.
Run: `python bench/cli_startup.py [--runs 10] [--picobridge PATH]` (PATH: another install's
console script, to compare before and after). Targets: --version within 3x and --help within
5x of `python -c pass`; access list within 1.5x of `import pydantic_settings`.
"""

from __future__ import annotations

import argparse
import os
import resource
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


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds (user + system) of the child: on a busy machine the
    wall time grows with the load, the CPU time much less."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(picobridge: str, runs: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds per case."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PICOBRIDGE_")}
    with tempfile.TemporaryDirectory(prefix="picobridge-bench-cli-") as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(f'state_dir = "{tmp}/state"\n', encoding="utf-8")
        argvs = cases(picobridge, config)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in argvs}
        for argv in argvs.values():
            timed(argv, env)  # warm the page cache and the .pyc files first
        for _ in range(runs):
            for name, argv in argvs.items():
                samples[name].append(timed(argv, env))
    return {name: (statistics.median(w for w, _ in values),
                   statistics.median(c for _, c in values)) for name, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--picobridge", default=str(Path(sys.executable).with_name("picobridge")),
                        help="the console script to time (default: this interpreter's)")
    args = parser.parse_args()
    medians = measure(args.picobridge, args.runs)
    print(f"CLI start, median of {args.runs} runs each, interleaved ({args.picobridge})")
    met = True
    for name, (wall, cpu) in medians.items():
        line = f"{name:<26} {wall * 1000:8.1f} ms  (CPU {cpu * 1000:6.1f} ms)"
        if name in TARGETS:
            against, target = TARGETS[name]
            ratio = wall / medians[against][0]
            met = met and ratio <= target
            line += (f"  {ratio:5.2f}x {against} (target <= {target:g}x; CPU "
                     f"{cpu / max(medians[against][1], 1e-6):.2f}x)")
        print(line)
    print(f"targets {'met' if met else 'missed'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
