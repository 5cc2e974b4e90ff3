"""The contract's names load on first use (bridge/contract/__init__.py): each name it lists
is found, in the module the table names, and nothing listed is missing from the table."""

from __future__ import annotations

import importlib

import picobridge.contract as contract


def test_every_listed_name_comes_from_its_module() -> None:
    table = contract._MODULES
    listed = [name for names in table.values() for name in names]
    assert sorted(listed) == sorted(contract.__all__)
    assert len(set(listed)) == len(listed)  # no name given by two modules
    for module, names in table.items():
        source = importlib.import_module(f"picobridge.contract.{module}")
        for name in names:
            assert getattr(contract, name) is getattr(source, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        contract.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("an unknown name was found")
