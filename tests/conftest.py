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
from typing import Any

import pytest

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


# A worker parses the command line again and takes --dist from it, not from the controller: the
# loadgroup chosen above (no --dist given) reached no worker, so none put the xdist_group names
# into its tests' ids and the groups were ignored (a module's tests spread over the workers,
# its module fixture started in each). The controller passes it on in the worker's input.
LOADGROUP = "picobridge_loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # xdist's WorkerController (xdist has no types)
    node.workerinput[LOADGROUP] = node.config.option.dist == "loadgroup"


RUN_DIR = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get(LOADGROUP):
        config.option.loadgroup = True  # read by xdist's worker when it collects
    # In the controller, before the workers start (they inherit the variable).
    if workerinput is not None or RUN_DIR_VARIABLE in os.environ:
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
    if getattr(config.option, "loadgroup", False):
        keep_groups(items)
    # Stable: the order within each part is the collection order, the same in every worker
    # (xdist requires that).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def keep_groups(items: list[pytest.Item]) -> None:
    """Each xdist_group's name at the end of its tests' ids, which is all that loadgroup
    goes by. xdist (3.8) puts it there by setting `_nodeid`, which pytest 9 no longer reads
    (its node id is `_id`): without this the groups were ignored."""
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        suffix = f"@{'_'.join(names)}"
        node_id: Any = getattr(item, "_id", None)
        if names and not item.nodeid.endswith(suffix) and hasattr(node_id, "parse"):
            item._id = type(node_id).parse(item.nodeid + suffix)  # pytest 9's NodeId
