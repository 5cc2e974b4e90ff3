"""The log's last line of defence: secrets scrubbed whatever their case."""

from __future__ import annotations

import logging

from picobridge.adapters.registry import secret_shapes
from picobridge.ops.logs import RedactingFormatter, setup_logging

TOKEN = "123456789:AAFakeTokenForTestsOnly_abcdefghijklmnop"


def line(formatter: RedactingFormatter, message: str) -> str:
    record = logging.LogRecord("t", logging.ERROR, __file__, 1, message, None, None)
    return formatter.format(record)


def test_a_secret_is_redacted_in_any_case() -> None:
    formatter = RedactingFormatter("%(message)s", [TOKEN, "s3cret-signing"], journald=False,
                                   shapes=[])
    for text in (TOKEN, TOKEN.lower(), TOKEN.upper(), "S3CRET-Signing"):
        out = line(formatter, f"error: invalid token {text} (from the server)")
        assert out == "error: invalid token [REDACTED] (from the server)", text


def test_token_shapes_are_redacted_even_when_not_configured() -> None:
    # Each platform names its tokens' shapes (Platform.secret_shapes).
    formatter = RedactingFormatter("%(message)s", [], journald=False, shapes=secret_shapes())
    out = line(formatter, "url https://api.example/bot5555555:" + "Ab_" * 12
               + "/getMe and XOXB-1234567890-abcdef and xapp-1-A111-222")
    assert "[REDACTED]" in out and "Ab_Ab_" not in out and "1234567890" not in out
    assert "A111" not in out


def test_journald_lines_carry_their_priority() -> None:
    formatter = RedactingFormatter("%(message)s", [], journald=True, shapes=[])
    assert line(formatter, "boom").startswith("<3>")


def test_each_platform_names_the_libraries_kept_quiet() -> None:
    from picobridge.adapters.registry import platforms

    declared = {name: p.library_loggers for name, p in platforms().items()}
    # python-telegram-bot's httpx logs each request URL, the bot token in it, at INFO.
    assert "httpx" in declared["telegram"] and "slack_sdk" in declared["slack"]
    names = [n for loggers in declared.values() for n in loggers]
    root = logging.getLogger()
    # setup_logging changes process-wide loggers: they are put back as they were.
    handlers = list(root.handlers)
    levels = {name: logging.getLogger(name).level
              for name in ("", *names, "aiosqlite", "aiohttp.access", "asyncio")}
    try:
        setup_logging("DEBUG", [], names, shapes=[])
        assert root.level == logging.DEBUG
        assert {logging.getLogger(n).level for n in (*names, "aiosqlite")} == {logging.WARNING}
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
