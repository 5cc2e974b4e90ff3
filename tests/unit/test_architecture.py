"""The shape of the code: small modules and functions, layers that show in the folders, no
platform named in the core, and every package shipped."""

from __future__ import annotations

import ast
import asyncio
import re
import sys
import tomllib
from pathlib import Path

import pytest

from picobridge.adapters import registry

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("bridge", "adapters", "config", "migrations")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Where no platform may be named: the contract, the core, the store and the agent side.
PLATFORM_FREE = ("bridge/contract", "bridge/core", "bridge/store", "bridge/agent",
                 "config/sections.py")
PLATFORMS = tuple(registry.PLATFORMS)
# Test code that tasks loop on (the fakes' waits, the daemon harness), held to the same rule.
FIXTURES = (REPO / "tests" / "fakes" / "server.py", REPO / "tests" / "harness.py")


def product_modules() -> list[Path]:
    return sorted(p for top in PRODUCT for p in (REPO / top).rglob("*.py"))


def test_no_module_is_over_the_limit() -> None:
    long = {str(p.relative_to(REPO)): n for p in product_modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_the_limit() -> None:
    long = {}
    for path in product_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(REPO)}:{node.name}"] = size
    assert long == {}


def test_the_core_names_no_platform() -> None:
    named = []
    pattern = re.compile(r"\b(" + "|".join(PLATFORMS) + r")\b", re.IGNORECASE)
    for place in PLATFORM_FREE:
        root = REPO / place
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line):
                    named.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert named == []


def test_no_asyncio_wait_for() -> None:
    """On Python 3.11 (supported) asyncio.wait_for swallows a cancellation that meets the
    awaited thing's completion, so a loop that awaits it may never stop (the next test shows
    it); asyncio.timeout does not."""
    used = [f"{p.relative_to(REPO)}:{n}" for p in [*product_modules(), *FIXTURES]
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if "asyncio.wait_for(" in line]
    assert used == []


async def test_why_wait_for_is_not_used_on_this_python() -> None:
    event = asyncio.Event()

    async def waits(use_timeout: bool) -> None:
        if use_timeout:
            async with asyncio.timeout(10):
                await event.wait()
        else:
            await asyncio.wait_for(event.wait(), 10)

    outcomes = []
    for use_timeout in (False, True):
        event.clear()
        task = asyncio.create_task(waits(use_timeout))
        await asyncio.sleep(0)
        event.set()
        task.cancel()  # in the same turn of the loop as the wake-up
        await asyncio.gather(task, return_exceptions=True)
        outcomes.append(task.cancelled())
    assert outcomes[1] is True  # asyncio.timeout: cancelled, always
    if sys.version_info < (3, 12):
        assert outcomes[0] is False  # wait_for: the cancellation is lost


def test_every_package_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    mapping = setuptools["package-dir"]
    listed = set(setuptools["packages"])
    found = set()
    for package, folder in mapping.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(package if rel == Path(".") else f"{package}.{'.'.join(rel.parts)}")
    assert found == listed


@pytest.mark.parametrize("top", ["adapters", "bridge", "config", "migrations"])
def test_the_owners_folders_are_mapped_into_one_package(top: str) -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    targets = {folder: package for package, folder
               in config["tool"]["setuptools"]["package-dir"].items()}
    assert targets[top].split(".")[0] == "picobridge"
