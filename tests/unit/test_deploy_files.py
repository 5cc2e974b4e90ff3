"""The promises of Dockerfile, .dockerignore and deploy/: cheap text checks that catch a
regression (root user, lost healthcheck, a renamed credential) without Docker or systemd."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from picobridge import exit_codes
from picobridge.adapters.registry import platforms
from picobridge.adapters.slack.settings import SlackSettings
from picobridge.adapters.telegram.settings import TelegramSettings
from picobridge.config.fields import section_class, section_fields
from picobridge.config.loader import settings_model
from picobridge.config.sections import HttpSettings
from picobridge.config.settings import (
    ENV_PREFIX,
    credential_files,
    load_settings,
)

ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = "/var/lib/picobridge"


# -- Dockerfile ----------------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """[(INSTRUCTION, arguments)] per build stage, continuations joined, comments dropped."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    stages: list[list[tuple[str, str]]] = []
    for line in joined.splitlines():
        if not line.strip():
            continue
        instruction, _, args = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        assert stages, "an instruction before the first FROM"
        stages[-1].append((instruction.upper(), args.strip()))
    return stages


def instructions(stage: list[tuple[str, str]], name: str) -> list[str]:
    return [args for instruction, args in stage if instruction == name]


@pytest.fixture(scope="module")
def final() -> list[tuple[str, str]]:
    return dockerfile_stages()[-1]


def test_multi_stage_on_one_pinned_python_311_slim() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2
    bases = {instructions(stage, "FROM")[0].split()[0] for stage in stages}
    assert len(bases) == 1, bases
    # An exact release (3.11.N on a named Debian) or a digest, never a moving tag.
    (base,) = bases
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    assert any("pip wheel" in run for run in instructions(stages[0], "RUN"))


def test_a_code_change_rebuilds_only_the_last_runtime_layer(
        final: list[tuple[str, str]]) -> None:
    """What changes least first: tini and the user, then the dependencies' wheels (a folder
    of the build stage that only pyproject.toml and the constraints change), then picobridge."""
    runs = instructions(final, "RUN")
    installs = [n for n, run in enumerate(runs) if "pip install" in run]
    assert len(installs) == 2 and installs[-1] == len(runs) - 1
    apt = next(n for n, run in enumerate(runs) if "apt-get install" in run)
    user = next(n for n, run in enumerate(runs) if "useradd" in run)
    deps, app = (runs[n] for n in installs)
    assert max(apt, user) < installs[0]
    assert "source=/deps" in deps and "-r /deps/requirements.txt" in deps
    assert "source=/app" in app and "--no-deps" in app
    build = dockerfile_stages()[0]
    wheels = [run for i, run in build if i == "RUN" and "pip wheel" in run]
    assert "--wheel-dir /deps" in wheels[0] and "--wheel-dir /app" in wheels[-1]


def test_final_stage_installs_the_wheels_not_the_source(final: list[tuple[str, str]]) -> None:
    assert not any(args.split()[0] == "." for args in instructions(final, "COPY")), (
        "the runtime stage must not copy the source tree"
    )
    assert any("pip install" in run and "--no-index" in run for run in instructions(final, "RUN"))


def test_runs_as_a_non_root_user(final: list[tuple[str, str]]) -> None:
    users = instructions(final, "USER")
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")


def test_healthcheck_uses_picobridge_health(final: list[tuple[str, str]]) -> None:
    (healthcheck,) = instructions(final, "HEALTHCHECK")
    exec_form = healthcheck[healthcheck.index("CMD") + len("CMD") :].strip()
    assert json.loads(exec_form) == ["picobridge", "health"]


def test_state_volume_matches_the_state_dir(final: list[tuple[str, str]]) -> None:
    assert STATE_DIR in " ".join(instructions(final, "VOLUME"))
    env = " ".join(instructions(final, "ENV"))
    assert f"PICOBRIDGE_STATE_DIR={STATE_DIR}" in env


def test_exposed_port_is_the_listen_port(final: list[tuple[str, str]]) -> None:
    env = " ".join(instructions(final, "ENV"))
    match = re.search(r"PICOBRIDGE_HTTP__LISTEN=\S+:(\d+)", env)
    assert match, "the healthcheck needs http.listen set in the image"
    assert match.group(1) in " ".join(instructions(final, "EXPOSE")).split()


def test_entrypoint_runs_picobridge_under_an_init(final: list[tuple[str, str]]) -> None:
    # tini is PID 1: it reaps what the agent leaves behind and passes signals on.
    assert json.loads(instructions(final, "ENTRYPOINT")[-1]) == ["/usr/bin/tini", "--",
                                                                  "picobridge"]
    assert any("apt-get install" in run and " tini" in run for run in instructions(final, "RUN"))
    assert json.loads(instructions(final, "CMD")[-1]) == ["run"]


def test_dependencies_are_built_before_the_source_is_copied() -> None:
    """The dependency layer depends on pyproject.toml and the constraints only, so a code
    change does not rebuild every dependency."""
    build = dockerfile_stages()[0]
    steps = [(i, args) for i, args in build if i in ("COPY", "RUN")]
    first_copy = next(args for i, args in steps if i == "COPY")
    assert first_copy.split()[:-1] == ["pyproject.toml", "deploy/constraints.txt"]
    whole_tree = steps.index(("COPY", ". ."))
    deps = next(n for n, (i, args) in enumerate(steps)
                if i == "RUN" and "pip wheel" in args and "-c constraints.txt" in args)
    assert deps < whole_tree
    assert "--no-deps" in steps[-1][1] and "pip wheel" in steps[-1][1]


def test_the_dependency_list_command_reads_pyproject(tmp_path: Path) -> None:
    """Run the build stage's own command that lists the dependencies, on the real file."""
    import shutil
    import subprocess
    import tomllib

    build = dockerfile_stages()[0]
    run = next(args for i, args in build if i == "RUN" and "requirements.txt" in args)
    listing = run.split("&&")[0].strip()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    subprocess.run(["sh", "-c", listing], cwd=tmp_path, check=True,
                   env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    wanted = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert (tmp_path / "requirements.txt").read_text().splitlines() == wanted


def test_dockerignore_keeps_secrets_and_state_out_but_the_package_in() -> None:
    patterns = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", "*.db", "*.env", "**/picobridge.toml"} <= patterns
    needed = {"pyproject.toml", "README.md", "LICENSE", "adapters", "bridge", "config",
              "migrations"}
    assert not needed & patterns
    # deploy/ stays out, except the constraints the build installs with.
    assert "deploy" in patterns and "!deploy/constraints.txt" in patterns


# -- systemd unit --------------------------------------------------------------------------


def unit_settings() -> dict[str, list[str]]:
    """[Service] key -> every value given (keys like LoadCredential= repeat)."""
    found: dict[str, list[str]] = {}
    section = ""
    for raw in (ROOT / "deploy" / "picobridge.service").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}{key}", []).append(value)
    return found


def service(key: str) -> list[str]:
    return unit_settings().get(f"[Service]{key}", [])


def test_unit_is_a_notify_service_with_a_watchdog() -> None:
    assert service("Type") == ["notify"]
    assert service("WatchdogSec") and int(service("WatchdogSec")[0]) > 0
    assert service("Restart") == ["on-failure"]
    assert "run" in service("ExecStart")[0].split()


def test_unit_leaves_the_listener_room_for_its_connections() -> None:
    (limit,) = service("LimitNOFILE")
    assert int(limit.split(":")[-1]) >= 4 * HttpSettings().max_connections


def test_unit_does_not_restart_on_config_errors() -> None:
    prevented = " ".join(service("RestartPreventExitStatus")).split()
    assert str(exit_codes.CONFIG) in prevented
    # A port still held by the instance before (a deploy) is worth a restart.
    assert str(exit_codes.BUSY) not in prevented


def test_unit_credentials_are_the_names_settings_read() -> None:
    loaded = {value.split(":", 1)[0] for value in service("LoadCredential")}
    assert {"telegram_token", "slack_bot_token", "slack_app_token", "slack_signing_secret"} <= (
        loaded
    )
    assert loaded <= set(credential_files(platforms()))


def test_unit_is_hardened() -> None:
    expected = {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "StateDirectory": "picobridge",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    }
    for key, value in expected.items():
        assert service(key) == [value], key
    # JIT compilers in agents need writable+executable memory.
    assert not service("MemoryDenyWriteExecute")
    assert service("User") and service("User") != ["root"]


# -- example environment -------------------------------------------------------------------


def example_env_keys() -> list[str]:
    text = (ROOT / "deploy" / "picobridge.env.example").read_text(encoding="utf-8")
    return re.findall(rf"^#?({ENV_PREFIX}[A-Z0-9_]+)=", text, flags=re.MULTILINE)


def test_example_env_names_only_real_settings() -> None:
    keys = example_env_keys()
    assert keys
    for key in keys:
        model: type[Any] | None = settings_model()
        path = key.removeprefix(ENV_PREFIX).lower().split("__")
        for part in path[:-1]:
            assert model is not None
            model = section_class(section_fields(model)[part])
            assert model is not None, key
        assert model is not None and path[-1] in section_fields(model), f"{key} is not a setting"


def test_an_empty_credential_file_leaves_the_platform_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/operations.md tells operators to create empty files for unused platforms, because
    # every LoadCredential= file in the unit must exist.
    for name in ("telegram_token", "slack_bot_token", "slack_app_token", "slack_signing_secret",
                 "discord_token"):
        (tmp_path / name).write_text("")
    (tmp_path / "telegram_token").write_text("123456:" + "a" * 35 + "\n")
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    empty_config = tmp_path / "config.toml"
    empty_config.write_text("")
    settings = load_settings(empty_config, {})
    telegram: TelegramSettings = settings.section("telegram")
    slack: SlackSettings = settings.section("slack")
    assert telegram.active
    assert not slack.active
    assert not settings.section("discord").active
