"""Shared pieces of the prime-rpc end-to-end tests: configs for the fake agent
(tests/fakes/fake_prime_agent.py) and for the real pi coding agent (pinned in tests/peers/pi,
installed with `npm ci` on first use) talking to the fake LLM, and finding the agent's
processes (and what they started) in /proc."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.fake_llm import FakeLLM
from tests.harness import REPO, AgentJournal, base_config, exclusive, write_config

FAKE_PRIME = REPO / "tests" / "fakes" / "fake_prime_agent.py"
PI_DIR = REPO / "tests" / "peers" / "pi"
PI_BIN = PI_DIR / "node_modules" / ".bin" / "pi"
PI_PACKAGE = "@mariozechner/pi-coding-agent"

# What a question says once closed other than by its own buttons, as the person sees it.
EXPIRED_LINE = "⌛ Expired: no answer came in time."
CLOSED_LINE = "✖ Closed: the agent no longer waits for an answer."
CLOSED_NOTE = "This question is closed."


def ui_answered(method: str, answer: dict[str, Any]) -> str:
    """What the fake agent's reply says its dialog got (fake_prime_agent.py `#ui=`)."""
    return f"[{method} answered {json.dumps(answer, sort_keys=True)}]"


# -- the real pi --------------------------------------------------------------------------------

def pinned_pi_version() -> str:
    manifest = json.loads((PI_DIR / "package.json").read_text(encoding="utf-8"))
    return str(manifest["dependencies"][PI_PACKAGE])


def installed_pi_version() -> str | None:
    path = PI_DIR / "node_modules" / PI_PACKAGE / "package.json"
    # npm writes node_modules/.package-lock.json last: without it the tree is half made.
    if not PI_BIN.exists() or not (PI_DIR / "node_modules" / ".package-lock.json").exists():
        return None
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def ensure_pi() -> Path:
    """The pinned pi, installed from the lock file when it is missing or another version.
    A file lock keeps concurrent test runs and xdist workers from installing over each
    other."""
    if installed_pi_version() == pinned_pi_version():
        return PI_BIN
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the real-pi tests need node >= 20.6 and npm on PATH")
    with exclusive(PI_DIR / ".install.lock"):
        if installed_pi_version() != pinned_pi_version():
            done = subprocess.run([npm, "ci", "--prefix", str(PI_DIR), "--no-audit", "--no-fund"],
                                  capture_output=True, text=True, timeout=600, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"npm ci in {PI_DIR} failed:\n{done.stderr[-3000:]}")
    if installed_pi_version() != pinned_pi_version():
        raise RuntimeError(f"npm ci did not install {PI_PACKAGE}@{pinned_pi_version()}")
    return PI_BIN


# Two models for the controls' tests: one that cannot reason, one that can (and is sent
# reasoning_effort, the fake LLM recording it).
TWO_MODELS = (("fake-model", "Fake Model", False), ("fake-beta", "Fake Beta", True))


def pi_agent_dir(tmp: Path, llm: FakeLLM, max_retries: int = 3,
                 retry_delay_ms: int = 300,
                 models: tuple[tuple[str, str, bool], ...] = TWO_MODELS[:1]) -> Path:
    """PI_CODING_AGENT_DIR for an offline pi whose models (id, name, reasoning) are the fake
    LLM; the first is the one the command line names."""
    agent_dir = tmp / "pi-agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    models_json = {"providers": {"fakellm": {
        "baseUrl": llm.api_base, "api": "openai-completions", "apiKey": "fake-llm-key",
        "compat": {"supportsDeveloperRole": False,
                   "supportsReasoningEffort": any(r for _, _, r in models)},
        "models": [{"id": ident, "name": name, "reasoning": reasoning,
                    "input": ["text", "image"], "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}
                   for ident, name, reasoning in models]}}}
    settings = {"quietStartup": True, "enableInstallTelemetry": False,
                "retry": {"enabled": True, "maxRetries": max_retries,
                          "baseDelayMs": retry_delay_ms}}
    (agent_dir / "models.json").write_text(json.dumps(models_json), encoding="utf-8")
    (agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    return agent_dir


def pi_agent_settings(tmp: Path, llm: FakeLLM, pi: Path, *, max_retries: int = 3,
                      retry_delay_ms: int = 300,
                      pi_models: tuple[tuple[str, str, bool], ...] = TWO_MODELS[:1],
                      **agent: Any) -> dict[str, Any]:
    """The [agent] table for the real pi, offline, against `llm`."""
    return {
        "protocol": "prime-rpc",
        "command": [str(pi), "--mode", "rpc", "--offline", "--provider", "fakellm",
                    "--model", "fake-model", "--no-context-files"],
        "env": {"PI_CODING_AGENT_DIR": str(pi_agent_dir(tmp, llm, max_retries,
                                                         retry_delay_ms, pi_models))},
        # pi takes about a second to start on the 2-core machine, longer under load.
        "ready_timeout": 60, "ping_interval": 2, "ping_timeout": 10, "turn_timeout": 60,
        "shutdown_timeout": 5,
        **agent,
    }


def pi_config(tmp: Path, llm: FakeLLM, pi: Path, **agent: Any) -> Path:
    config = base_config(tmp)
    config["agent"] = pi_agent_settings(tmp, llm, pi, **agent)
    return write_config(tmp, config)


# -- the fake agent -----------------------------------------------------------------------------

def fake_agent_settings(tmp: Path, *flags: str, **agent: Any) -> dict[str, Any]:
    return {**base_config(tmp)["agent"], "protocol": "prime-rpc",
            "command": [sys.executable, str(FAKE_PRIME), "--state", str(tmp / "agent"), *flags],
            **agent}


def fake_config(tmp: Path, *flags: str, name: str = "config.toml", **agent: Any) -> Path:
    config = base_config(tmp)
    config["agent"] = fake_agent_settings(tmp, *flags, **agent)
    return write_config(tmp, config, name)


class PrimeJournal(AgentJournal):
    """What the fake prime agent received."""

    def requests(self, kind: str) -> list[dict[str, Any]]:
        return [e["record"] for e in self.entries()
                if isinstance(e.get("record"), dict) and e["record"].get("type") == kind]

    def prompts(self) -> list[str]:
        return [str(r.get("message")) for r in self.requests("prompt")]


def journal(tmp: Path) -> PrimeJournal:
    return PrimeJournal(tmp / "agent")


def session_files(tmp: Path) -> list[Path]:
    return sorted((tmp / "state" / "agent-sessions").glob("*.jsonl"))


def session_messages(path: Path) -> list[tuple[str, str]]:
    """(role, text) of the message entries of a session file, as pi wrote them."""
    out = []
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        entry = json.loads(line)
        if entry.get("type") == "message":
            message = entry["message"]
            content = message.get("content")
            text = "".join(p.get("text", "") for p in content if isinstance(p, dict)
                           ) if isinstance(content, list) else str(content)
            out.append((message["role"], text))
    return out


# -- processes ----------------------------------------------------------------------------------

def processes_with(needle: str) -> dict[int, str]:
    """Live processes (not zombies) whose environment holds `needle` ("NAME=value"): pid ->
    command line. pi sets its title to "pi"; what it starts inherits its environment."""
    found = {}
    target = needle.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        proc = Path("/proc", entry)
        with contextlib.suppress(OSError):
            if target not in proc.joinpath("environ").read_bytes().split(b"\0"):
                continue
            stat = proc.joinpath("stat").read_bytes()
            if stat[stat.rfind(b")") + 2:].split()[0] == b"Z":
                continue
            cmdline = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").strip()
            found[int(entry)] = cmdline.decode("utf-8", "replace")
    return found


async def wait_for_processes(needle: str, predicate: Callable[[dict[int, str]], bool],
                             what: str, timeout: float = 30) -> dict[int, str]:
    # Other programs' processes: /proc has no event to await, so look often.
    deadline = time.monotonic() + timeout
    while True:
        found = processes_with(needle)
        if predicate(found):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; processes: {found}")
        await asyncio.sleep(0.05)
