"""How the daemon takes signals: SIGTERM and SIGINT stop it in order, SIGHUP is ignored; those
that came while it was starting (HeldSignals) are acted on once it can."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Collection
from types import FrameType

from picobridge import exit_codes

log = logging.getLogger("picobridge.daemon")


class Signals:
    """SIGTERM/SIGINT stop the daemon in order; a second one while stopping is acknowledged
    and the orderly stop goes on; a third forces the exit. SIGHUP is ignored (nothing is
    reloaded: restart to apply a changed config), with a log line."""

    FORCE_AFTER = 3

    def __init__(self, loop: asyncio.AbstractEventLoop, held: HeldSignals | None = None) -> None:
        self._loop = loop
        self._held = held
        self.stop_requested = asyncio.Event()
        self.first: signal.Signals | None = None  # the signal that asked for the stop
        self._count = 0

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, self._stop, sig)
        self._loop.add_signal_handler(signal.SIGHUP, self._hangup)
        if self._held is not None:
            for sig in self._held.taken():
                if sig is signal.SIGHUP:
                    self._hangup()
                else:
                    self._stop(sig)

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


class HeldSignals:
    """The daemon proper's signals before its loop takes them (cli/handoff.py): those the
    command line held blocked across the exec, and those that come while it starts, kept
    for Signals to act on. Unblocked at once, so that nothing the daemon starts (a thread, an
    agent process) inherits them blocked."""

    def __init__(self, which: Collection[signal.Signals]) -> None:
        self._which = frozenset(which)
        self._taken: list[signal.Signals] = []

    def install(self) -> None:
        for sig in self._which:
            signal.signal(sig, self._take)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self._which)

    def _take(self, signum: int, frame: FrameType | None) -> None:
        sig = signal.Signals(signum)
        self._taken.append(sig)
        if sum(s is not signal.SIGHUP for s in self._taken) >= Signals.FORCE_AFTER:
            # As Signals does: a third stop signal is obeyed at once, starting or not.
            os.write(2, f"picobridge: {sig.name} received a third time while starting: "
                        "exiting now\n".encode())
            os._exit(exit_codes.FAILURE)

    def taken(self) -> list[signal.Signals]:
        """What came, in order; from now on Signals' handlers take them."""
        taken, self._taken = self._taken, []
        return taken
