"""A package's names loaded on first use (PEP 562): for packages whose names the command line
needs few of (the contract, the store), so that importing one module of the package does not
import all of them. The package keeps its imports under TYPE_CHECKING (type checkers see them,
and an unknown name stays an error there) and a table of where each name lives."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, modules: Mapping[str, tuple[str, ...]],
               namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names come from its submodules as
    `modules` lists them ({"messages": ("ChatRef", ...)}); each name found is kept in
    `namespace` (the package's globals) so it is looked up once."""
    where = {name: module for module, names in modules.items() for name in names}

    def get(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted({*namespace, *where})

    return get, listing
