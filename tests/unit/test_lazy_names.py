"""The contract's and the store's names load on first use (picobridge/lazy.py): each name a
package lists is found, in the module its table names, and nothing listed is missing from the
table."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

import picobridge.contract as contract
import picobridge.store as store


@pytest.mark.parametrize("package", [contract, store], ids=["contract", "store"])
def test_every_listed_name_comes_from_its_module(package: ModuleType) -> None:
    table = package._MODULES
    listed = [name for names in table.values() for name in names]
    assert sorted(listed) == sorted(package.__all__)
    assert len(set(listed)) == len(listed)  # no name given by two modules
    for module, names in table.items():
        source = importlib.import_module(f"{package.__name__}.{module}")
        for name in names:
            assert getattr(package, name) is getattr(source, name), name
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("package", [contract, store], ids=["contract", "store"])
def test_an_unknown_name_is_an_attribute_error(package: ModuleType) -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        package.NoSuchThing  # noqa: B018
