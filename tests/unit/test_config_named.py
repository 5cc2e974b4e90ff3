"""The settings model has a section only for the platforms a configuration names (a section in
the file, a PICOBRIDGE_<NAME> variable, a systemd credential of theirs); the others have their
sections' defaults, and the operator's mistakes are told as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from picobridge.adapters.registry import allow_lists, enabled_platforms, platforms
from picobridge.config.settings import ConfigError, load_settings

DISCORD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("PICOBRIDGE_") or key == "CREDENTIALS_DIRECTORY":
            monkeypatch.delenv(key)


def config(tmp: Path, text: str) -> Path:
    path = tmp / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_platform_nothing_names_has_its_defaults(tmp_path: Path) -> None:
    settings = load_settings(config(tmp_path, "[telegram]\nallowed_users = [7]\n"))
    assert list(settings.named_platforms) == ["telegram"]
    assert list(settings.platforms) == list(platforms())  # every platform is still known
    assert "slack" not in settings.sections
    for name in ("slack", "matrix", "discord"):
        assert settings.section(name) == settings.platforms[name].section(), name
    assert allow_lists(settings) == {"telegram": frozenset({"7"}), "slack": frozenset(),
                                     "matrix": frozenset(), "discord": frozenset()}
    assert enabled_platforms(settings) == [] and settings.secrets() == []


def test_a_platform_named_only_by_its_variable_is_read(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PICOBRIDGE_DISCORD__TOKEN", DISCORD_TOKEN)
    settings = load_settings(config(tmp_path, ""))
    assert list(settings.named_platforms) == ["discord"]
    assert enabled_platforms(settings) == ["discord"]
    assert settings.secrets() == [DISCORD_TOKEN]


def test_a_platform_named_only_by_its_credential_is_read(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "discord_token").write_text(DISCORD_TOKEN + "\n", encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    settings = load_settings(config(tmp_path, ""))
    assert enabled_platforms(settings) == ["discord"]


def test_a_misspelled_section_is_told_the_platform_it_may_mean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'matrx' \(did you mean 'matrix'\?\)"):
        load_settings(config(tmp_path, "[matrx]\nhomeserver = 'https://example.org'\n"))


def test_a_misspelled_platform_variable_is_told_the_one_it_may_mean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PICOBRIDGE_MATRIX_HOMESERVER", "https://example.org")
    with pytest.raises(ConfigError, match=r"PICOBRIDGE_MATRIX_HOMESERVER \(did you mean "
                                          r"PICOBRIDGE_MATRIX__HOMESERVER\?\)"):
        load_settings(config(tmp_path, ""))


def test_an_unreadable_file_is_told_after_the_environment(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PICOBRIDGE_AGENT__PING_INTERVALL", "3")
    with pytest.raises(ConfigError, match="unknown environment variable"):
        load_settings(tmp_path / "missing.toml")
    monkeypatch.delenv("PICOBRIDGE_AGENT__PING_INTERVALL")
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")
