"""The open-file limit: raised from soft to hard at start, so a listener facing the internet
has room for its connections (systemd's default soft limit is 1024)."""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("picobridge.daemon")


def raise_fd_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return soft if soft != resource.RLIM_INFINITY else hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
        return soft
    log.info("open-file limit raised from %d to %d", soft, hard)
    return hard


def fd_soft_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return hard if soft == resource.RLIM_INFINITY else soft
