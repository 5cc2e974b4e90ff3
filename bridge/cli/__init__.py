"""The `picobridge` command line and the wiring that builds the daemon."""

from picobridge.cli.main import main

__all__ = ["main"]
