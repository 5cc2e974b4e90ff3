"""Several bots per platform in the configuration: `[[telegram.bots]]` and `[[slack.apps]]`
with a name and every key of their section, per-bot systemd credentials and paths, and the
registry's view of them (each bot a platform name of its own)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from picobridge.adapters.registry import allow_lists, bots, enabled_platforms
from picobridge.config.settings import ConfigError, load_settings

TOKEN = "123456:AAbbCCddEEff"
WORK_TOKEN = "654321:ZZyyXXwwVVuu"


def write(tmp: Path, text: str) -> Path:
    path = tmp / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


TWO_BOTS = f"""
[telegram]
token = "{TOKEN}"
allowed_users = [1]

[[telegram.bots]]
name = "work"
token = "{WORK_TOKEN}"
allowed_users = [2]
mode = "webhook"
webhook_url = "https://example.org/telegram/work/webhook"

[http]
listen = "127.0.0.1:0"
"""


def test_further_bots_are_platforms_of_their_own(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, TWO_BOTS), environ={})
    assert enabled_platforms(settings) == ["telegram", "telegram@work"]
    assert allow_lists(settings)["telegram"] == frozenset({"1"})
    assert allow_lists(settings)["telegram@work"] == frozenset({"2"})
    work = bots(settings)["telegram@work"][1]
    assert work.webhook_path == "/telegram/work/webhook"
    assert bots(settings)["telegram"][1].webhook_path == "/telegram/webhook"
    assert WORK_TOKEN in settings.secrets() and TOKEN in settings.secrets()


def test_each_bot_gets_its_own_credentials(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "telegram_token").write_text(TOKEN + "\n")
    (creds / "telegram_token_work").write_text(WORK_TOKEN + "\n")
    (creds / "slack_bot_token_acme").write_text("xoxb-2-acme")
    (creds / "slack_app_token_acme").write_text("xapp-2-acme")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    text = ('[[telegram.bots]]\nname = "work"\n'
            '[[slack.apps]]\nname = "acme"\nallowed_users = ["U1"]\n')
    settings = load_settings(write(tmp_path, text), environ={})
    found = bots(settings)
    assert found["telegram"][1].token.get_secret_value() == TOKEN
    assert found["telegram@work"][1].token.get_secret_value() == WORK_TOKEN
    acme = found["slack@acme"][1]
    assert acme.bot_token.get_secret_value() == "xoxb-2-acme"
    assert acme.events_path == "/slack/acme/events"
    assert enabled_platforms(settings) == ["telegram", "telegram@work", "slack@acme"]


@pytest.mark.parametrize(("text", "expected"), [
    ('[[telegram.bots]]\nname = "default"\n', "the platform's own section"),
    ('[[telegram.bots]]\nname = "no spaces"\n', "a bot's name must match"),
    ('[[telegram.bots]]\nname = "a"\n[[telegram.bots]]\nname = "a"\n',
     "telegram.bots: the name 'a' is used more than once"),
    ('[[slack.apps]]\nname = "b"\nallowed_users = ["u1"]\n',
     "slack.apps[b].allowed_users: slack member ids are upper case"),
    ('[[telegram.bots]]\nname = "w"\ntoken = "nope"\n', "telegram.bots[w]: telegram.token"),
    ('[[telegram.bots]]\nname = "w"\nnot_a_key = 1\n', "unknown key"),
    (f'[[telegram.bots]]\nname = "w"\ntoken = "{TOKEN}"\nmode = "webhook"\n'
     'webhook_url = "https://x.example/"\n', "needs http.listen"),
])
def test_bad_bots_are_refused(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, text), environ={})
    assert expected in str(caught.value)
    assert TOKEN not in str(caught.value)


# One rule for every key of every bot, the default and the further ones, on every platform:
# the environment beats a systemd credential file, which beats the config file.
SECRET_KEYS = {"telegram": ("token", "bots", "telegram_token", "{n}11111:From{source}Aa"),
               "slack": ("bot_token", "apps", "slack_bot_token", "xoxb-{n}-from-{source}")}
PRECEDENCE = [({"file", "creds"}, "creds"), ({"file", "env"}, "env"),
              ({"creds", "env"}, "env"), ({"file", "creds", "env"}, "env")]


def secret(platform: str, source: str) -> str:
    n = {"file": 1, "creds": 2, "env": 3}[source]
    return SECRET_KEYS[platform][3].format(n=n, source=source)


def bot_setup(tmp: Path, monkeypatch: pytest.MonkeyPatch, platform: str, bot: str,
              sources: set[str]) -> Path:
    key, list_key, credential, _ = SECRET_KEYS[platform]
    extra = {"app_token": "xapp-1-app"} if platform == "slack" else {}
    entry: dict[str, str] = {**extra, **({key: secret(platform, "file")}
                                         if "file" in sources else {})}
    creds = tmp / "creds"
    creds.mkdir()
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    if "creds" in sources:
        filename = credential if bot == "default" else f"{credential}_{bot}"
        (creds / filename).write_text(secret(platform, "creds") + "\n")
    lines = "\n".join(f'{k} = "{v}"' for k, v in entry.items())
    if bot == "default":
        text = f"[{platform}]\n{lines}\n"
        if "env" in sources:
            monkeypatch.setenv(f"PICOBRIDGE_{platform.upper()}__{key.upper()}",
                               secret(platform, "env"))
    else:
        text = f'[[{platform}.{list_key}]]\nname = "{bot}"\n{lines}\n'
        if "env" in sources:
            listed = [{"name": bot, **extra, key: secret(platform, "env")}]
            monkeypatch.setenv(f"PICOBRIDGE_{platform.upper()}__{list_key.upper()}",
                               json.dumps(listed))
    return write(tmp, text)


@pytest.mark.parametrize("platform", sorted(SECRET_KEYS))
@pytest.mark.parametrize("bot", ["default", "work"])
@pytest.mark.parametrize(("sources", "winner"), PRECEDENCE)
def test_one_precedence_for_every_bot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      platform: str, bot: str, sources: set[str],
                                      winner: str) -> None:
    settings = load_settings(bot_setup(tmp_path, monkeypatch, platform, bot, sources),
                             environ={})
    name = platform if bot == "default" else f"{platform}@{bot}"
    value = getattr(bots(settings)[name][1], SECRET_KEYS[platform][0])
    assert value.get_secret_value() == secret(platform, winner)


def test_a_credential_file_fills_what_the_environments_list_leaves_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "telegram_token_work").write_text(WORK_TOKEN)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    monkeypatch.setenv("PICOBRIDGE_TELEGRAM__BOTS", '[{"name": "work", "allowed_users": [5]}]')
    # The environment's list replaces the file's, whose bot "old" is gone.
    path = write(tmp_path, f'[[telegram.bots]]\nname = "old"\ntoken = "{TOKEN}"\n')
    settings = load_settings(path, environ={})
    assert enabled_platforms(settings) == ["telegram@work"]
    work = bots(settings)["telegram@work"][1]
    assert work.token.get_secret_value() == WORK_TOKEN and work.allowed_users == [5]
