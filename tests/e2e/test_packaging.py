"""The wheel installs one namespace, `picobridge`, and works away from the source tree, even
beside an unrelated package named like one of the owner's folders."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.e2e.unprivileged import NOBODY, give_to_user, picobridge, shared_dir, wheel_folder

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="session")
def build() -> tuple[Path, str]:
    """`pip wheel .` as an operator runs it, once for the test run: the wheel and everything
    pip printed."""
    folder = wheel_folder()
    [built] = folder.glob("picobridge-*.whl")
    return built, (folder / "pip-output.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def wheel(build: tuple[Path, str]) -> Path:
    return build[0]


def test_building_the_wheel_warns_of_nothing(build: tuple[Path, str]) -> None:
    _, output = build
    assert "Successfully built picobridge" in output or "Saved" in output, output
    assert "deprecated" not in output.lower(), output
    assert "Warning" not in output, output


def test_the_wheel_carries_the_license_and_its_metadata(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = archive.read(metadata).decode()
        [license_file] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        text = archive.read(license_file).decode()
    assert text.startswith("MIT License") and "Permission is hereby granted" in text
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta
    assert "Classifier: Programming Language :: Python :: 3.11" in meta
    assert "Requires-Dist: pydantic<3,>=2.7" in meta


def test_the_wheel_holds_only_the_picobridge_namespace(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert {t for t in tops if not t.endswith(".dist-info")} == {"picobridge"}
    for shipped in ("picobridge/py.typed", "picobridge/config/example.toml",
                    "picobridge/migrations/0001_init.sql", "picobridge/adapters/telegram/"
                    "__init__.py", "picobridge/agent/protocols/picobot_json.py"):
        assert shipped in names, shipped


def _run(target: Path, *args: str, cwd: Path,
         extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # -S: no site-packages processing, so neither this checkout's editable install nor the
    # test venv's picobridge can be imported; the dependencies come in by plain path.
    deps = sysconfig.get_paths()["purelib"]
    env = {"PYTHONPATH": f"{target}:{deps}", "PATH": "/usr/bin", **(extra or {})}
    return subprocess.run([sys.executable, "-S", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=120)


def test_installed_beside_a_package_named_config_it_works_away_from_the_tree(
        wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(target), str(wheel)], check=True, capture_output=True)
    ours = {p.name for p in target.iterdir() if p.name != "bin"}
    assert ours == {"picobridge", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1]
                    + ".dist-info"}
    # An unrelated distribution that ships a top-level `config` (PyPI has several).
    (target / "config").mkdir()
    (target / "config" / "__init__.py").write_text("WHO = 'somebody else'\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    version = _run(target, "-m", "picobridge", "--version", cwd=elsewhere)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("picobridge ")
    state = tmp_path / "state"
    migrate = _run(target, "-m", "picobridge", "migrate", cwd=elsewhere,
                   extra={"PICOBRIDGE_STATE_DIR": str(state)})
    assert migrate.returncode == 0, migrate.stderr
    assert "is at schema version" in migrate.stdout and (state / "picobridge.db").exists()
    probe = _run(target, "-c", "import config, picobridge.config.settings as s; "
                 "print(config.WHO, s.__name__)", cwd=elsewhere)
    assert probe.stdout.split() == ["somebody", "else", "picobridge.config.settings"]
    script = (target / "bin" / "picobridge").read_text()
    assert "from picobridge.cli import main" in script


def test_a_new_user_without_root_config_or_agent_sees_it_work(wheel: Path) -> None:
    """The README's first steps, as a normal user with an empty home: install the wheel,
    `picobridge init`, `picobridge chat --echo`."""
    place = shared_dir("pb-first-steps-")
    site = place / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(site), str(wheel)], check=True, capture_output=True)
    home = place / "home"
    home.mkdir()
    give_to_user(home)

    init = picobridge(site, "init", "./pb.toml", home=home)
    assert init.returncode == 0, init.stderr
    config = home / "pb.toml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert config.stat().st_uid == (NOBODY if os.geteuid() == 0 else os.geteuid())
    assert "picobridge chat --config pb.toml --echo" in init.stdout

    chat = picobridge(site, "chat", "--config", "./pb.toml", "--echo", home=home,
                      stdin="hello\nWhat did I just say?\n")
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.splitlines() == ["echo: hello", "You said: hello"]
    assert "Traceback" not in chat.stderr
    # The state went to the user's own folder, not /var/lib/picobridge.
    assert (home / ".local" / "state" / "picobridge" / "picobridge.db").is_file()
