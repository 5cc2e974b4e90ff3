"""Logging: one line per event, secrets scrubbed as a last line of defence."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable

_SYSLOG_PRIORITY = {
    logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2,
}


class RedactingFormatter(logging.Formatter):
    def __init__(self, fmt: str, secrets: Iterable[str], journald: bool, *,
                 shapes: Iterable[str]) -> None:
        """`shapes`: regular expressions of tokens redacted even when they are not (or not
        yet) in the configuration, each platform's (Platform.secret_shapes)."""
        super().__init__(fmt)
        # Case-insensitive: libraries echo tokens changed in case (python-telegram-bot lowers
        # error descriptions), and a lowered token is still the token.
        known = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)
        self._secrets = re.compile("|".join(map(re.escape, known)), re.IGNORECASE) \
            if known else None
        self._journald = journald
        known_shapes = list(shapes)
        self._shapes = re.compile("|".join(f"(?:{s})" for s in known_shapes), re.IGNORECASE) \
            if known_shapes else None

    def redact(self, text: str) -> str:
        if self._secrets is not None:
            text = self._secrets.sub("[REDACTED]", text)
        return self._shapes.sub("[REDACTED]", text) if self._shapes is not None else text

    def format(self, record: logging.LogRecord) -> str:
        text = self.redact(super().format(record))
        if self._journald:
            # sd-daemon(3) priority prefix: journald files each line under its level.
            return f"<{_SYSLOG_PRIORITY.get(record.levelno, 6)}>{text}"
        return text


# The bridge's own libraries' loggers held at WARNING; each platform names its own
# (Platform.library_loggers).
_QUIET = ("aiohttp.access", "aiosqlite", "asyncio")


def setup_logging(level: str, secrets: Iterable[str], quiet: Iterable[str] = (), *,
                  shapes: Iterable[str]) -> None:
    """The root handler, redacting ``secrets`` and tokens of the ``shapes``; the loggers in
    ``quiet`` (a platform's libraries) and the bridge's own libraries' stay at WARNING."""
    journald = bool(os.environ.get("JOURNAL_STREAM"))
    # journald stamps time itself; elsewhere a timestamp is needed.
    fmt = "%(levelname)s %(name)s: %(message)s" if journald else (
        "%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(fmt, secrets, journald, shapes=shapes))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in (*_QUIET, *quiet):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
