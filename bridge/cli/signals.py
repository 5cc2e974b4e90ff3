"""How the daemon takes signals: SIGTERM and SIGINT stop it in order, SIGHUP is ignored."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from picobridge import exit_codes

log = logging.getLogger("picobridge.daemon")


class Signals:
    """SIGTERM/SIGINT stop the daemon in order; a second one while stopping is acknowledged
    and the orderly stop goes on; a third forces the exit. SIGHUP is ignored (nothing is
    reloaded: restart to apply a changed config), with a log line."""

    FORCE_AFTER = 3

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.stop_requested = asyncio.Event()
        self.first: signal.Signals | None = None  # the signal that asked for the stop
        self._count = 0

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, self._stop, sig)
        self._loop.add_signal_handler(signal.SIGHUP, self._hangup)

    def remove(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._loop.remove_signal_handler(sig)

    def _stop(self, sig: signal.Signals) -> None:
        self._count += 1
        if self._count == 1:
            log.info("%s received: stopping", sig.name)
            self.first = sig
            self.stop_requested.set()
        elif self._count < self.FORCE_AFTER:
            log.warning("%s received again: already stopping in order (replies in flight are "
                        "finished or kept); one more forces the exit", sig.name)
        else:
            log.critical("%s received a third time: exiting now; everything not yet answered "
                         "is kept and answered after the next start", sig.name)
            logging.shutdown()
            os._exit(exit_codes.FAILURE)

    def _hangup(self) -> None:
        log.warning("SIGHUP ignored: picobridge reloads nothing; restart it to apply a changed "
                    "configuration")
