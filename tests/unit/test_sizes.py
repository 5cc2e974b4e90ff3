"""The sizes the bridge tells people: a file over a limit never reads as the limit."""

from __future__ import annotations

import pytest

from picobridge.contract import human_size


@pytest.mark.parametrize(("size", "shown"), [
    (0, "0 bytes"),
    (3_001, "3,001 bytes"),
    (10 * 1024 - 1, "10,239 bytes"),
    (10 * 1024, "10 KB"),
    (50_000, "48 KB"),
    (1024 * 1024 - 1, "1023 KB"),
    (1024 * 1024, "1.0 MB"),
    (20 * 1024 * 1024, "20.0 MB"),
])
def test_small_sizes_are_exact_larger_ones_rounded(size: int, shown: str) -> None:
    assert human_size(size) == shown


@pytest.mark.parametrize("limit", [1, 512, 3_000, 4_000, 4_096, 10 * 1024 - 1])
def test_just_over_a_small_limit_reads_as_more_than_the_limit(limit: int) -> None:
    assert human_size(limit + 1) != human_size(limit)
