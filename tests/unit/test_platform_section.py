"""A Platform finds its config section from `section_model`; one that names none says so."""

from __future__ import annotations

from typing import Any

import pytest

from picobridge.adapters import registry
from picobridge.contract.adapter import Adapter
from picobridge.contract.platform import Platform


def test_every_registered_platform_names_a_section_that_imports() -> None:
    for platform in registry.platforms().values():
        assert platform.section.__name__, platform.name


def test_a_platform_without_a_section_model_is_told_what_to_set() -> None:
    class Nameless(Platform):
        name = "nameless"

        def active(self, section: Any) -> bool:
            return False

        def allowed_users(self, section: Any) -> frozenset[str]:
            return frozenset()

        def adapter(self, settings: Any) -> Adapter:
            raise NotImplementedError

    with pytest.raises(TypeError, match="Nameless names no config section: set section_model"):
        _ = Nameless().section
