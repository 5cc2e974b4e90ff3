"""`picobridge health`: ask a running daemon's /healthz; for Docker HEALTHCHECK and scripts."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING

from picobridge import exit_codes

if TYPE_CHECKING:
    from picobridge.cli.invocation import Invocation
    from picobridge.config.settings import Settings


def health_command(invocation: Invocation) -> int:
    return query_health(invocation.settings(), invocation.args.url)


def health_url(settings: Settings, url: str | None) -> str | None:
    if url:
        return url
    if settings.http.listen is None:
        return None
    host, _, port = settings.http.listen.rpartition(":")
    if host in ("0.0.0.0", "::", "[::]", ""):
        host = "127.0.0.1"
    return f"http://{host}:{port}/healthz"


def query_health(settings: Settings, url: str | None) -> int:
    target = health_url(settings, url)
    if target is None:
        print("picobridge: http.listen is not set, so there is no health endpoint to ask",
              file=sys.stderr)
        return exit_codes.FAILURE
    parts = urllib.parse.urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        print(f"picobridge: --url must be an http:// or https:// URL, got {target!r}",
              file=sys.stderr)
        return exit_codes.USAGE
    try:
        with urllib.request.urlopen(target, timeout=5) as response:
            body = response.read().decode("utf-8", "replace")
            status = response.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read().decode("utf-8", "replace"), exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"unhealthy: cannot reach {target}: {exc}", file=sys.stderr)
        return exit_codes.FAILURE
    try:
        summary = json.loads(body)
    except ValueError:
        summary = body
    print(("healthy: " if status == 200 else "unhealthy: ") + json.dumps(summary))
    return exit_codes.OK if status == 200 else exit_codes.FAILURE
