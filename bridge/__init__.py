"""picobridge core: agent process, framing, router, store, daemon lifecycle and CLI."""

__version__ = "0.1.0"
