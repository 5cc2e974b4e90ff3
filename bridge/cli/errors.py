"""The error a command ends with: one line for stderr and the exit code. It imports nothing
heavy, so the command line can catch it before any command's module is loaded."""

from __future__ import annotations

from picobridge import exit_codes


class CliError(Exception):
    """One line for stderr and the exit code (a subclass may fix its code)."""

    code: int = exit_codes.FAILURE

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
