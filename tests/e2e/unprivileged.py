"""Running the real `picobridge` as a normal user (nobody), as a person without root would.

The test's own venv may sit where nobody cannot reach it (CI makes it in a private temporary
folder), so the user gets a copy of picobridge and its runtime dependencies in a folder every
user may read, and the base interpreter with `-S` (no site-packages of any venv).
As root the commands run through `setpriv` as nobody; as a normal user they run as that user.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from functools import cache
from importlib.metadata import distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.harness import BUILD_LOCK, exclusive, made_once

NOBODY = 65534
REPO = Path(__file__).resolve().parents[2]


def shared_dir(prefix: str) -> Path:
    """A fresh folder under /tmp that the unprivileged user may enter and write, removed at
    the end of the test session."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o777)
    atexit.register(shutil.rmtree, path, True)
    return path


def give_to_user(path: Path) -> None:
    """Hand a folder to the user the commands run as (a no-op when that is us)."""
    if os.geteuid() == 0:
        for root, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                os.chown(os.path.join(root, name), NOBODY, NOBODY)
        os.chown(path, NOBODY, NOBODY)


def _copy_distribution(name: str, target: Path) -> None:
    # The .pyc files too: the user cannot write them into a folder of root's, so without them
    # every command compiled pydantic and the rest from source again (about 0.5 s of CPU each).
    # copy2 keeps each source's mtime, which is what a .pyc is checked against.
    for file in distribution(name).files or []:
        if file.parts[0] == "..":
            continue  # console scripts outside site-packages
        source = Path(str(file.locate()))
        if source.is_file():
            (target / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / file)


def runtime_dependencies() -> set[str]:
    """Every distribution a plain `pip install picobridge` brings (canonical names), from the
    installed metadata."""
    seen: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [("picobridge", frozenset())]
    while todo:
        name, extras = todo.pop()
        for text in distribution(name).requires or []:
            req = Requirement(text)
            if req.marker and not any(req.marker.evaluate({"extra": e})
                                      for e in (extras or {""})):
                continue
            if canonicalize_name(req.name) not in seen:
                seen.add(canonicalize_name(req.name))
                todo.append((req.name, frozenset(req.extras)))
    return seen


def _copy_dependencies(site: Path) -> None:
    for name in sorted(runtime_dependencies()):
        _copy_distribution(name, site)
    for root, dirs, _ in os.walk(site):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    site.chmod(0o755)


def build_wheel(folder: Path) -> None:
    """`pip wheel .` of this checkout into `folder`, with what pip printed beside it."""
    with exclusive(BUILD_LOCK):
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir",
                               str(folder), str(REPO)], check=True, capture_output=True,
                              text=True)
    (folder / "pip-output.txt").write_text(done.stdout + done.stderr, encoding="utf-8")


def wheel_folder() -> Path:
    """The folder of this checkout's wheel, built once for the test run (test_packaging
    checks the wheel itself)."""
    return made_once("wheel", build_wheel)


def _install_source(site: Path) -> None:
    # From the run's one wheel: building the checkout a second time cost 7.9 s of CPU, the
    # install from the wheel 2.1 s (the same files).
    [wheel] = wheel_folder().glob("picobridge-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(site), str(wheel)], check=True, capture_output=True)
    site.chmod(0o755)


@cache
def dependencies_site() -> Path:
    """picobridge's runtime dependencies (not picobridge), copied where anyone may read, once
    for the whole test run."""
    return made_once("deps-site", _copy_dependencies)


@cache
def source_site() -> Path:
    """This checkout installed (not editable) where anyone may read, once for the run."""
    return made_once("source-site", _install_source)


def _reachable_by_others(path: str) -> bool:
    """Every folder on the way searchable and the file executable by any user."""
    real = Path(os.path.realpath(path))
    return all(p.stat().st_mode & stat.S_IXOTH for p in (real, *real.parents))


@cache
def interpreter() -> str:
    """An interpreter of the test's Python version that the unprivileged user can run: the
    test venv's base interpreter when others may reach it, else the system's."""
    if os.geteuid() != 0:
        return sys.executable
    wanted = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, getattr(sys, "_base_executable", sys.executable),
                  *filter(None, (shutil.which(f"python{wanted}", path="/usr/local/bin:/usr/bin"),
                                 shutil.which("python3", path="/usr/local/bin:/usr/bin")))]
    for candidate in candidates:
        if not _reachable_by_others(candidate):
            continue
        version = subprocess.run([candidate, "-c", "import sys; print(*sys.version_info[:2], "
                                  "sep='.')"], capture_output=True, text=True).stdout.strip()
        if version == wanted:
            return candidate
    raise AssertionError(f"no Python {wanted} that user {NOBODY} may run among {candidates}")


def as_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


def picobridge(site: Path, *args: str, home: Path, cwd: Path | None = None,
               stdin: str | None = None, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`picobridge ARGS` as the unprivileged user with `site` (picobridge) and the copied
    dependencies on its path, HOME=`home`, and nothing else of ours in its environment."""
    environ = {"HOME": str(home), "PATH": "/usr/bin:/bin",
               "PYTHONPATH": f"{site}:{dependencies_site()}", **(env or {})}
    argv = as_user([interpreter(), "-S", "-m", "picobridge", *args])
    return subprocess.run(argv, cwd=cwd or home, env=environ, input=stdin, text=True,
                          capture_output=True, timeout=timeout)
