"""Exit 0 when the running interpreter has this checkout installed (editable) with every
dependency and dev (and e2ee) extra at a version pyproject.toml accepts, else say what is
missing and exit 1. scripts/test runs it to skip `pip install` when nothing changed.

A strict editable install links each file that existed when it was made: a module added
since (a merge) is missing from it, so every source file must be importable too."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# What the package ships from its folders: modules, migrations, the example config.
SHIPPED = {".py", ".sql", ".toml"}


def problems() -> list[str]:
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return ["packaging (a dev extra) is not installed"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    found = []
    wanted = [Requirement(r) for r in project["project"]["dependencies"]]
    extras = project["project"]["optional-dependencies"]
    # dev names the e2ee extra as picobridge[e2ee]: its own lines are checked instead.
    wanted += [Requirement(r) for group in ("dev", "e2ee") for r in extras[group]
               if Requirement(r).name != project["project"]["name"]]
    for req in wanted:
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{req.name} is not installed")
            continue
        if not req.specifier.contains(version, prereleases=True):
            found.append(f"{req.name} {version} is installed, pyproject.toml wants {req}")
    return found or missing_sources(project["tool"]["setuptools"]["package-dir"])


def missing_sources(package_dirs: dict[str, str]) -> list[str]:
    # find_spec of a top-level name imports nothing.
    spec = importlib.util.find_spec("picobridge")
    if spec is None or spec.origin is None:
        return ["picobridge is not installed"]
    installed = Path(spec.origin).parent
    if not installed.resolve().is_relative_to(REPO):
        return [f"picobridge is installed from {installed.resolve()}, not from {REPO}"]
    if installed.resolve() == REPO / package_dirs["picobridge"]:
        return []  # the checkout itself is on the path: every file is seen
    found = []
    for package, folder in package_dirs.items():
        inside = installed.joinpath(*package.split(".")[1:])
        for source in sorted((REPO / folder).rglob("*")):
            relative = source.relative_to(REPO / folder)
            if (source.suffix in SHIPPED and "__pycache__" not in relative.parts
                    and not (inside / relative).exists()):
                found.append(f"{source.relative_to(REPO)} is not in the install at {installed}")
    return found


def main() -> int:
    found = problems()
    for problem in found:
        print(f"installed.py: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
