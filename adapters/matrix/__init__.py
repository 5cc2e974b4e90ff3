"""Matrix: mautrix-python's client-server API on our own /sync loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from picobridge.adapters.matrix.platform import MatrixPlatform

if TYPE_CHECKING:
    from picobridge.adapters.matrix.adapter import MatrixAdapter

__all__ = ["MatrixAdapter", "MatrixPlatform"]


def __getattr__(name: str) -> Any:
    # The adapter (and mautrix) load on first use, so the registry can read the platform's
    # settings without importing them.
    if name == "MatrixAdapter":
        from picobridge.adapters.matrix.adapter import MatrixAdapter

        return MatrixAdapter
    raise AttributeError(name)
