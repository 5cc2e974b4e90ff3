"""The suite runs in parallel (pytest-xdist): `python -m pytest` spreads the tests over
worker processes unless told otherwise (`-n 0` for one process, e.g. to use `--pdb` or `-s`).

Rules for every test, so that any two can run at the same time, in any order:
- Ports: bind port 0 and read the port back (the fakes do; a daemon's listener: set
  `http.listen = "127.0.0.1:0"` and read it with `tests.harness.http_port`). Never pick a
  "free" port and release it for someone else to bind later: another worker may take it.
- Files: only under `tmp_path` (or `tmp_path_factory`); nothing fixed under /tmp, $HOME or the
  checkout. What must be made once for the whole run (the real pi from npm, a wheel of this
  checkout) is made under `tests.harness.exclusive` (a file lock), and checked for again once
  the lock is held: several workers may ask at the same moment.
- Shared by the whole run (every worker): `tests.harness.made_once(name, make)` makes a thing
  once in the run's folder (`run_dir()`, removed at the end) for whichever test asks first.
  Use it rather than a module-scoped fixture, which xdist would run again in each worker,
  and again whenever a worker's tests of that module are not one after another.
- Processes: every process a test starts is stopped by that test (`Daemon` does it for the
  daemon); find your processes by something unique to the test (its tmp_path), never by name.
- No module globals that a test changes; environment changes through `monkeypatch` or a
  child's own `env`.
- Tests that must share one worker: `pytestmark = pytest.mark.xdist_group("name")` (the
  suite runs with `--dist loadgroup`).

The slowest tests (marked `slow`) are put first, so that they start at once on some worker
instead of starting last and making everyone wait for them.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from _pytest.nodeid import NodeId

from tests.harness import RUN_DIR_VARIABLE

# Most tests wait on subprocesses (the daemon, fake agents) rather than compute, so twice as
# many workers as cores keep the cores busy. Measured on the 2-core machine while 7 others used
# it (noisy): the whole suite 25.8 min in one process, 15.6 min with 4 workers; 50 end-to-end
# tests at a load of 25, 7.0 min with 2 workers and 5.4 min with 4.
WORKERS_PER_CORE = 2


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Parallel by default when pytest-xdist is installed and `-n` was not given (not in a
    worker, which gets its options from the controller, nor under --pdb), with the groups
    kept together."""
    if hasattr(config, "workerinput") or not hasattr(config.option, "numprocesses"):
        return
    if (config.option.numprocesses is None and not config.getoption("usepdb")
            and not config.getoption("collectonly")):
        config.option.numprocesses = "auto"
    if config.option.numprocesses and config.option.dist == "no":
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    wanted = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if wanted.isdigit():
        return int(wanted)
    return WORKERS_PER_CORE * len(os.sched_getaffinity(0))


RUN_DIR = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    # In the controller, before the workers start (they inherit the variable).
    if hasattr(config, "workerinput") or RUN_DIR_VARIABLE in os.environ:
        return
    path = tempfile.mkdtemp(prefix="pb-test-run-")
    os.chmod(path, 0o755)  # the unprivileged user runs what is made there
    os.environ[RUN_DIR_VARIABLE] = config.stash[RUN_DIR] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(RUN_DIR, None)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
        os.environ.pop(RUN_DIR_VARIABLE, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Stable: the order within each part is the collection order, the same in every worker
    # (xdist requires that).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if hasattr(config, "workerinput"):
        keep_groups_together(items)


def keep_groups_together(items: list[pytest.Item]) -> None:
    """Mark each grouped test's nodeid with its group (`...@group`), as pytest-xdist's workers
    do for loadgroup scheduling. Without this every xdist_group mark was ignored: xdist 3.8 sets
    `item._nodeid`, which pytest 9 no longer reads (it keeps `_id`), and the workers did not
    even try, the loadgroup set above not reaching them; a module's tests went to any worker,
    its module fixture started again in each. (The suffix is harmless to other schedulers.)"""
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")
