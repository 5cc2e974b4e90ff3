"""Killing an agent's tree never reaches a process that merely took a dead agent's pid: on a
machine with pid_max 32768 (this one; a Raspberry Pi's default too) pids wrap within minutes
when many processes start, as they do with the suite in parallel."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from picobridge.agent.process import MARKER_VAR, kill_marked

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A process that leads a session of its own, as another daemon's agent does: the one a
    dead agent's pid (and so its session id) could have been handed to."""
    proc = subprocess.Popen(SLEEPER, start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_once_the_agent_is_reaped_only_its_marked_processes_are_signalled(
        stranger: subprocess.Popen[bytes]) -> None:
    marked = subprocess.Popen(SLEEPER, env={**os.environ, MARKER_VAR: "agent-1"})
    try:
        sent = kill_marked(stranger.pid, "agent-1", signal.SIGKILL, leader_gone=True)
        assert marked.wait(10) == -signal.SIGKILL
        assert sent == 1
        assert stranger.poll() is None  # the pid's new owner lives on
    finally:
        marked.kill()
        marked.wait()


def test_while_the_agent_lives_its_session_is_signalled(
        stranger: subprocess.Popen[bytes]) -> None:
    # The same call for a live leader: its session goes, marker or not.
    kill_marked(stranger.pid, "agent-2", signal.SIGKILL)
    assert stranger.wait(10) == -signal.SIGKILL
