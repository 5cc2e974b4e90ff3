"""The settings are plain classes: importing their types (the core's sections, every
platform's, the settings object) loads no pydantic, and loaded settings go through pickle
whole (what a process that validated them hands a fresh one) without a secret in any repr."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from picobridge.adapters.registry import PLATFORMS, platforms
from picobridge.config.fields import section_class, section_fields
from picobridge.config.settings import Settings, load_settings
from picobridge.config.values import Secret

TELEGRAM = "123456789:AAHsecretsecretsecretsecretsecret12"
WORK = "987654321:AAHworkworkworkworkworkworkworkwork1"
SECRETS = {TELEGRAM, WORK, "xoxb-1-slackbot", "xapp-1-slackapp", "slack-signing-secret",
           "xoxb-2-acmebot", "xapp-2-acmeapp", "syt_matrixaccesstoken",
           "MTIzNDU2Nzg5MDEy.GfAkE1.abcdefghijklmnopqrstuvwxyz0", "sk-transcribe-key",
           "sk-tts-key", "telegram-webhook-secret"}

EVERY_PLATFORM = f"""
[agent]
pool_size = 2
[agents.other]
protocol = "prime-rpc"
[[routes]]
agent = "other"
platform = "slack"
[voice]
transcribe_url = "http://127.0.0.1:9/v1/audio/transcriptions"
transcribe_api_key = "sk-transcribe-key"
tts_url = "http://127.0.0.1:9/v1/audio/speech"
tts_api_key = "sk-tts-key"
reply = "to_voice"
[http]
listen = "127.0.0.1:0"
[telegram]
token = "{TELEGRAM}"
allowed_users = [7]
webhook_secret = "telegram-webhook-secret"
[[telegram.bots]]
name = "work"
token = "{WORK}"
[slack]
bot_token = "xoxb-1-slackbot"
app_token = "xapp-1-slackapp"
signing_secret = "slack-signing-secret"
[[slack.apps]]
name = "acme"
bot_token = "xoxb-2-acmebot"
app_token = "xapp-2-acmeapp"
[matrix]
homeserver = "http://127.0.0.1:9"
user_id = "@bot:example.org"
access_token = "syt_matrixaccesstoken"
[discord]
token = "MTIzNDU2Nzg5MDEy.GfAkE1.abcdefghijklmnopqrstuvwxyz0"
allowed_users = ["400000000000000001"]
"""


@pytest.fixture
def loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    import os

    for key in list(os.environ):
        if key.startswith("PICOBRIDGE_") or key == "CREDENTIALS_DIRECTORY":
            monkeypatch.delenv(key)
    path = tmp_path / "config.toml"
    path.write_text(f'state_dir = "{tmp_path / "state"}"\n{EVERY_PLATFORM}', encoding="utf-8")
    return load_settings(path)


def fresh(code: str, stdin: bytes = b"") -> str:
    """What `code` prints in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


LOADED_PYDANTIC = ("import sys; print(sorted(m for m in sys.modules "
                   "if m.split('.')[0].startswith('pydantic')))")


def test_the_settings_types_import_without_pydantic() -> None:
    modules = ["picobridge.config.sections", "picobridge.config.settings",
               "picobridge.config.values",
               *(f"picobridge.adapters.{name}.settings" for name in PLATFORMS)]
    code = "".join(f"import {m}; " for m in modules)
    assert fresh(code + LOADED_PYDANTIC).strip() == "[]"
    # What the modules hold is what the daemon uses: the sections and the settings object.
    assert fresh(code + "import picobridge.config.settings as s; print(s.Settings().section("
                 "'telegram').active); " + LOADED_PYDANTIC).split() == ["False", "[]"]


def test_loaded_settings_round_trip_through_pickle(loaded: Settings) -> None:
    assert list(loaded.named_platforms) == list(platforms())  # every platform has a section
    assert set(loaded.secrets()) == SECRETS
    again = pickle.loads(pickle.dumps(loaded))
    assert again == loaded and again is not loaded
    assert again.secrets() == loaded.secrets()
    assert list(again.platforms) == list(loaded.platforms)
    assert again.configured == loaded.configured and "state_dir" in again.configured
    assert again.named_agents().keys() == {"default", "other"}
    # Compared by their values: a changed secret is a different configuration.
    changed = dataclasses.replace(loaded.section("discord"), token=Secret("other"))
    assert changed != loaded.section("discord")


def test_a_fresh_interpreter_unpickles_them_without_pydantic(loaded: Settings) -> None:
    out = fresh("import pickle, sys; s = pickle.load(sys.stdin.buffer); "
                "print(sorted(s.secrets())); print(s.section('telegram').bots[0].name); "
                + LOADED_PYDANTIC, stdin=pickle.dumps(loaded))
    secrets, bot, modules = out.strip().splitlines()
    assert secrets == repr(sorted(SECRETS)) and bot == "work" and modules == "[]"


def sections_of(settings: Settings) -> list[Any]:
    found: list[Any] = [getattr(settings, f.name) for f in dataclasses.fields(settings)
                        if f.name not in ("sections", "platforms", "configured")]
    for name, platform in settings.named_platforms.items():
        found.extend(platform.bots(settings.section(name)).values())
    return found


def test_no_secret_shows_in_any_repr_or_str(loaded: Settings) -> None:
    texts = [text for section in [loaded, *sections_of(loaded)]
             for text in (repr(section), str(section))]
    assert len(texts) >= 2 * 16
    assert [s for s in SECRETS if any(s in text for text in texts)] == []
    assert "**********" in repr(loaded.section("telegram"))
    token = loaded.section("telegram").token
    assert token is not None and token.get_secret_value() == TELEGRAM
    assert (repr(token), str(token)) == ("Secret('**********')", "**********")


def test_each_key_is_read_as_typing_reads_it() -> None:
    # The checks evaluate one key's annotation at a time (config/fields.py): the same as
    # typing's evaluation of them all, for every section class there is.
    from picobridge.config.loader import settings_model

    model = settings_model()  # every section the loader validates, every platform's too
    classes: list[type[Any]] = [c for f in model.model_fields.values()
                                for c in map(section_class, (f.annotation, *typing.get_args(
                                    f.annotation))) if c is not None]
    seen: set[type[Any]] = set()
    while classes:
        cls = classes.pop()
        if cls in seen:
            continue
        seen.add(cls)
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = section_fields(cls)
        assert fields and {k: repr(a) for k, a in fields.items()} == {
            k: repr(hints[k]) for k in fields}, cls
        classes.extend(c for a in fields.values() for c in map(section_class, (
            a, *typing.get_args(a))) if c is not None)
    assert len(seen) >= 16  # the core's sections, every platform's and their bots'
