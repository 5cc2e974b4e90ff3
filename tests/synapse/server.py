"""A real Synapse on 127.0.0.1: SQLite, a generated config, users registered with the shared
registration secret (the admin API's HMAC handshake), started, stopped and restarted by tests.

Plain blocking code (subprocess, urllib): a session fixture starts it before any event loop
runs, and a restart in the middle of a test is a few blocking calls that the daemon under
test, a separate process, does not notice.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER_NAME = "picobridge.test"
START_TIMEOUT = 60.0
# A strict limit on messages (a burst of 2, then one every 3.3 s): an account meets real
# M_LIMIT_EXCEEDED answers within a few messages, unless `register` lifts the limit for it.
CONFIG = """\
server_name: "{server_name}"
pid_file: "{dir}/homeserver.pid"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{dir}/homeserver.db"
log_config: "{dir}/log.yaml"
media_store_path: "{dir}/media"
max_upload_size: 50M
registration_shared_secret: "{secret}"
enable_registration: false
report_stats: false
macaroon_secret_key: "{macaroon}"
form_secret: "{form}"
signing_key_path: "{dir}/signing.key"
trusted_key_servers: []
suppress_key_server_warning: true
url_preview_enabled: false
presence:
  enabled: false
enable_authenticated_media: true
rc_message: {{per_second: 0.3, burst_count: 2}}
rc_registration: {{per_second: 1000, burst_count: 1000}}
rc_login:
  address: {{per_second: 1000, burst_count: 1000}}
  account: {{per_second: 1000, burst_count: 1000}}
  failed_attempts: {{per_second: 1000, burst_count: 1000}}
rc_joins:
  local: {{per_second: 1000, burst_count: 1000}}
rc_invites:
  per_room: {{per_second: 1000, burst_count: 1000}}
  per_user: {{per_second: 1000, burst_count: 1000}}
  per_issuer: {{per_second: 1000, burst_count: 1000}}
rc_room_creation: {{per_second: 1000, burst_count: 1000}}
"""
LOG_CONFIG = """\
version: 1
formatters:
  plain: {format: "%(asctime)s %(levelname)s %(name)s %(message)s"}
handlers:
  file: {class: logging.FileHandler, filename: "{dir}/homeserver.log", formatter: plain}
root: {level: WARNING, handlers: [file]}
disable_existing_loggers: false
"""


BIND_ATTEMPTS = 3


class PortTaken(Exception):
    """Another process bound the port between our picking it and Synapse binding it."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class Account:
    user_id: str
    access_token: str
    device_id: str
    password: str


class Synapse:
    def __init__(self, python: Path, directory: Path) -> None:
        self.python = python
        self.dir = directory
        self.port = free_port()
        self.secret = secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None
        self._write_config()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "log.yaml").write_text(LOG_CONFIG.replace("{dir}", str(self.dir)))
        (self.dir / "homeserver.yaml").write_text(CONFIG.format(
            server_name=SERVER_NAME, dir=self.dir, port=self.port, secret=self.secret,
            macaroon=secrets.token_hex(16), form=secrets.token_hex(16)))

    def start(self) -> Synapse:
        """Start it and wait until it answers. Synapse needs its port in its config, so the
        port is one the kernel handed out and released: should another process take it
        meanwhile, Synapse cannot bind it and starts again on a fresh one."""
        for _ in range(BIND_ATTEMPTS - 1):
            try:
                return self._start()
            except PortTaken:
                self.port = free_port()
                self._write_config()
        return self._start()

    def _start(self) -> Synapse:
        started = time.monotonic()
        out = (self.dir / "stdout.log").open("ab")
        # setpriv (util-linux, on every Debian): the kernel stops the homeserver when the
        # test process that started it ends. A worker that ends without its teardown (a crash,
        # an INTERNALERROR) left its Synapse running for good. Started from the main thread
        # (the fixtures are synchronous), so it is the process's end that counts.
        self.proc = subprocess.Popen(
            ["setpriv", "--pdeathsig", "TERM", str(self.python), "-m",
             "synapse.app.homeserver", "-c", str(self.dir / "homeserver.yaml")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir)
        out.close()
        deadline = started + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                if "Address already in use" in self.log_tail():
                    raise PortTaken(self.port)
                raise RuntimeError(f"synapse exited with {self.proc.returncode}: "
                                   f"{self.log_tail()}")
            with contextlib.suppress(OSError):
                self.request("GET", "/_matrix/client/versions")
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"synapse did not start: {self.log_tail()}")
            time.sleep(0.05)
        self.start_seconds = time.monotonic() - started
        return self

    def log_tail(self) -> str:
        texts = []
        for name in ("stdout.log", "homeserver.log"):
            path = self.dir / name
            if path.exists():
                texts.append(path.read_text(errors="replace")[-3000:])
        return "\n".join(texts)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                token: str | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=30) as resp:
            answer: dict[str, Any] = json.loads(resp.read() or b"{}")
            return answer

    def register(self, localpart: str | None = None, *, admin: bool = False,
                 unlimited: bool = True) -> Account:
        """A new account (a fresh localpart unless given), with Synapse's rate limits on
        messages lifted for it unless `unlimited` is False."""
        localpart = localpart or f"u{secrets.token_hex(4)}"
        password = secrets.token_hex(12)
        nonce = self.request("GET", "/_synapse/admin/v1/register")["nonce"]
        mac = hmac.new(self.secret.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), localpart.encode(), password.encode(),
                                 b"admin" if admin else b"notadmin"]))
        answer = self.request("POST", "/_synapse/admin/v1/register", {
            "nonce": nonce, "username": localpart, "password": password, "admin": admin,
            "mac": mac.hexdigest()})
        account = Account(answer["user_id"], answer["access_token"], answer["device_id"],
                          password)
        if unlimited:
            self.lift_rate_limits(account.user_id)
        return account

    def lift_rate_limits(self, user_id: str) -> None:
        if not hasattr(self, "_admin"):
            self._admin = self.register(f"admin{secrets.token_hex(3)}", admin=True,
                                        unlimited=False)
        quoted = urllib.parse.quote(user_id)
        self.request("POST", f"/_synapse/admin/v1/users/{quoted}/override_ratelimit",
                     {"messages_per_second": 0, "burst_count": 0}, token=self._admin.access_token)

