"""Synapse in a venv of its own, installed once and shared by every test process.

Synapse is a test prerequisite, not a dependency of picobridge: in its own venv its pins
(Twisted, cryptography, pillow, ...) can neither clash with the product's nor hide a
dependency the product forgot to declare. CI starts this install in the background while
the product installs (`python -m tests.synapse.install`); a test that needs Synapse waits on
the same lock, so it finds the install done or finishes it itself.

The venv's place: $SYNAPSE_TEST_VENV, else .synapse-venv in the repository.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The range CI installs and the tests are known to pass with (1.163 observed).
REQUIREMENT = "matrix-synapse>=1.160,<2"
MARKER = ".picobridge-synapse-installed"


def venv_dir() -> Path:
    configured = os.environ.get("SYNAPSE_TEST_VENV")
    return Path(configured) if configured else REPO / ".synapse-venv"


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure(venv: Path | None = None) -> Path:
    """The Python of an installed Synapse venv, installing it first when needed."""
    venv = venv or venv_dir()
    venv.parent.mkdir(parents=True, exist_ok=True)
    lock_path = venv.with_name(f"{venv.name}.lock")
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = venv / MARKER
        if marker.is_file() and marker.read_text() == REQUIREMENT:
            return python_of(venv)
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python_of(venv)), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", REQUIREMENT], check=True)
        marker.write_text(REQUIREMENT)
        print(f"synapse installed in {venv} in {time.monotonic() - started:.1f}s",
              file=sys.stderr)
        return python_of(venv)


if __name__ == "__main__":
    ensure(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
