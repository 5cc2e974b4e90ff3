"""File names the bridge writes or shows: never a path, never steered by whoever named them."""

from __future__ import annotations

import re
import unicodedata

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, fallback: str = "file") -> str:
    """A file name with no directory parts, no leading dots, only portable characters."""
    base = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    base = base.replace("\\", "/").rsplit("/", 1)[-1]
    base = _UNSAFE.sub("_", base).strip("._-")[:120]
    return base or fallback
