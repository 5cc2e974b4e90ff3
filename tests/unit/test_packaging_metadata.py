"""pyproject.toml's promises to the people who install picobridge, and deploy/constraints.txt's
to the image: a licence that says what it is, dependencies in compatible ranges (each one
that is imported declared), one pinned set inside those ranges covering everything that gets
installed."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.e2e.unprivileged import runtime_dependencies

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def requirements() -> dict[str, Requirement]:
    parsed = (Requirement(r) for r in PROJECT["project"]["dependencies"])
    return {canonicalize_name(r.name): r for r in parsed}


def constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "deploy" / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[\w.+]+", version), f"not an exact pin: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def test_the_licence_is_an_spdx_expression_with_its_file() -> None:
    project = PROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    # A licence classifier beside an SPDX expression is an error for setuptools >= 77.
    assert not any(c.startswith("License ::") for c in project["classifiers"])
    assert "setuptools>=77" in PROJECT["build-system"]["requires"]


def test_dependencies_are_compatible_ranges_and_pydantic_is_declared() -> None:
    reqs = requirements()
    # The code imports pydantic itself (config/), so it is a dependency of its own.
    assert "pydantic" in reqs
    for name, req in reqs.items():
        spec = req.specifier
        assert any(s.operator == ">=" for s in spec) and any(s.operator == "<" for s in spec), (
            f"{name}: give a lower bound and the next incompatible version as upper bound")
    # slack-bolt: any 1.x from the tested one on, not just one minor release.
    assert reqs["slack-bolt"].specifier.contains("1.31.0")


def test_the_constraints_pin_every_installed_distribution_inside_the_ranges() -> None:
    pins = constraints()
    missing = runtime_dependencies() - set(pins)
    assert missing == set(), f"deploy/constraints.txt pins nothing for {sorted(missing)}"
    for name, req in requirements().items():
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {req}"


def imported_distributions() -> dict[str, str]:
    """The distributions the product's own modules import (canonical name -> one module
    importing it): a dependency that only arrives through another one can go away with it."""
    product = [ROOT / d for d in ("bridge", "adapters", "config", "migrations")]
    providers = packages_distributions()
    found: dict[str, str] = {}
    for path in (p for d in product for p in sorted(d.rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in (n.partition(".")[0] for n in names):
                if top in sys.stdlib_module_names or top == "picobridge":
                    continue
                for dist in providers.get(top, [top]):
                    found.setdefault(canonicalize_name(dist), str(path.relative_to(ROOT)))
    return found


def test_every_distribution_the_product_imports_is_declared() -> None:
    imported = imported_distributions()
    # The check must see the product's imports at all (these are imported in several places).
    assert {"aiosqlite", "pydantic", "python-telegram-bot"} <= set(imported)
    undeclared = {name: where for name, where in imported.items() if name not in requirements()}
    assert undeclared == {}, f"imported but not in pyproject.toml's dependencies: {undeclared}"
