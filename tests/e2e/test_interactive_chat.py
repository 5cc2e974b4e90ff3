"""`picobridge chat` at a real terminal (a pseudo-terminal): the prompt, an answer, and Ctrl-C
typed at the prompt ending it with 130 and no interpreter abort."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import time
from pathlib import Path

from tests.harness import REPO, cli_env, picobridge_argv, write_config


class Terminal:
    """A child process on a pseudo-terminal whose screen output is collected."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its controlling terminal
            try:
                os.chdir(REPO)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.screen = b""
        self.status: int | None = None

    def _pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            with contextlib.suppress(OSError):  # the child is gone and the pty closed
                self.screen += os.read(self.fd, 65536)

    def expect(self, text: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            assert time.monotonic() < deadline, f"no {text!r} on screen: {self.screen!r}"
            self._pump(min(0.5, deadline - time.monotonic()))

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                break
            assert time.monotonic() < deadline, f"still running: {self.screen!r}"
            self._pump(0.1)
        self._pump(0.1)
        return self.status


def test_ctrl_c_at_the_prompt_ends_chat_with_130(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"state_dir": str(tmp_path / "state")})
    term = Terminal(picobridge_argv("chat", "--echo", "--config", str(config)), cli_env())
    try:
        term.expect(b"> ")
        term.type(b"hello\r")
        term.expect(b"echo: hello")
        term.expect(b"> ", timeout=10)
        term.type(b"\x03")  # Ctrl-C, as the terminal sends it: SIGINT to the foreground
        code = term.wait()
    finally:
        if term.status is None:
            os.kill(term.pid, 9)
            os.waitpid(term.pid, 0)
        os.close(term.fd)
    screen = term.screen.decode("utf-8", "replace")
    assert code == 130, screen
    assert "Fatal Python error" not in screen and "Traceback" not in screen, screen
