"""Sizes the bridge tells people (a file over the limit, the limit itself)."""

from __future__ import annotations

_KIB = 1024
_MIB = 1024 * 1024
# Below this a size is given in bytes: in whole kilobytes a file just over a small limit
# would read as the limit itself ("3 KB, over the limit of 3 KB"), or the limit as less
# than it is.
_EXACT_BELOW = 10 * _KIB


def human_size(size: int) -> str:
    """A byte count as people read it: exact when small, else KB (rounded down) or MB."""
    if size < _EXACT_BELOW:
        return f"{size:,} bytes"
    if size < _MIB:
        return f"{size // _KIB} KB"
    return f"{size / _MIB:.1f} MB"
