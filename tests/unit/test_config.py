from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from picobridge.adapters.slack.settings import SlackSettings
from picobridge.adapters.telegram.settings import TelegramSettings
from picobridge.config.settings import ConfigError, Settings, load_settings

TOKEN = "123456789:AAHsecretsecretsecretsecretsecret12"


def sections(settings: Settings) -> tuple[TelegramSettings, SlackSettings]:
    """The platforms' sections, which type checkers see as Any."""
    telegram: TelegramSettings = settings.section("telegram")
    slack: SlackSettings = settings.section("slack")
    return telegram, slack


def write(tmp: Path, text: str) -> Path:
    path = tmp / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("PICOBRIDGE_") or key == "CREDENTIALS_DIRECTORY":
            monkeypatch.delenv(key)


def test_defaults_match_the_design(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, ""))
    telegram, slack = sections(settings)
    assert settings.state_dir == Path("/var/lib/picobridge")
    assert settings.agent.command == ["picobot", "agent", "--json"]
    a = settings.agent
    assert (a.ready_timeout, a.ping_interval, a.ping_timeout, a.turn_timeout) == (30, 15, 10, 600)
    assert a.max_in_flight == 1 and settings.bridge.coalesce is True
    assert not telegram.active and not slack.active
    assert telegram.base_url == "https://api.telegram.org/bot"
    assert slack.base_url == "https://slack.com/api/" and slack.mode == "socket"
    assert telegram.allowed_users == [] and settings.http.listen is None
    assert settings.store.busy_timeout == 5


def test_toml_then_environment_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, f'state_dir = "/srv/pb"\n[telegram]\ntoken = "{TOKEN}"\n'
                           "allowed_users = [1, 2]\n[agent]\nping_interval = 5\n")
    monkeypatch.setenv("PICOBRIDGE_AGENT__COMMAND", '["picobot", "agent", "--json", "-v"]')
    monkeypatch.setenv("PICOBRIDGE_AGENT__PING_INTERVAL", "7")
    monkeypatch.setenv("PICOBRIDGE_TELEGRAM__ALLOWED_USERS", "[3]")
    settings = load_settings(path)
    assert settings.state_dir == Path("/srv/pb")
    assert settings.agent.command[-1] == "-v"
    assert settings.agent.ping_interval == 7
    telegram, _ = sections(settings)
    assert telegram.allowed_users == [3]
    assert telegram.active and telegram.token is not None


def test_config_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, 'state_dir = "/from/env"\n')
    monkeypatch.setenv("PICOBRIDGE_CONFIG", str(path))
    assert load_settings(None).state_dir == Path("/from/env")


def test_systemd_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "telegram_token").write_text(TOKEN + "\n")
    (creds / "slack_bot_token").write_text("xoxb-1-abc")
    (creds / "slack_app_token").write_text("xapp-1-abc")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    settings = load_settings(write(tmp_path, "[slack]\nallowed_users = ['U1']\n"))
    telegram, slack = sections(settings)
    assert telegram.token is not None
    assert telegram.token.get_secret_value() == TOKEN
    assert slack.active and slack.allowed_users == ["U1"]


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[telegram]\ntokne = 'x'\n[agent]\nping_intervall = 3\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert "unknown key 'telegram.tokne' (did you mean 'telegram.token'?)" in message
    assert "unknown key 'agent.ping_intervall'" in message
    assert str(path) in message


def test_unknown_environment_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PICOBRIDGE_TELEGRAM__TOKNE", "x")
    with pytest.raises(ConfigError, match=r"unknown environment variable "
                       r"PICOBRIDGE_TELEGRAM__TOKNE \(did you mean PICOBRIDGE_TELEGRAM__TOKEN\?\)"):
        load_settings(write(tmp_path, ""))


def test_placeholder_token_rejected_without_echoing(tmp_path: Path) -> None:
    path = write(tmp_path, '[telegram]\ntoken = "123456:REPLACE-WITH-YOUR-BOT-TOKEN"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "telegram.token still holds the example placeholder" in str(info.value)
    assert "REPLACE-WITH" not in str(info.value)


def test_invalid_values_never_echo_secrets(tmp_path: Path) -> None:
    # A token where a list is expected: pydantic's default message would include the input.
    path = write(tmp_path, f'[telegram]\ntoken = "{TOKEN}"\nallowed_users = "{TOKEN}"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "telegram.allowed_users" in str(info.value)
    assert TOKEN not in str(info.value)


@pytest.mark.parametrize(("text", "expected"), [
    ("[telegram]\nenabled = true\n", "telegram.enabled is true but telegram.token is not set"),
    ("[slack]\nbot_token = 'xoxb-1'\n", "slack.mode = 'socket' needs slack.app_token"),
    ("[slack]\nbot_token = 'xoxb-1'\nmode = 'http'\nsigning_secret = 's'\n",
     "slack.mode = 'http' needs http.listen"),
    ("[http]\nlisten = 'nonsense'\n", "http.listen must be host:port"),
    ("[agent]\nping_interval = -1\n", "agent.ping_interval"),
    ("state_dir = [", "is not valid TOML"),
])
def test_invalid_configurations(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(".", r"\.")):
        load_settings(write(tmp_path, text))


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def _example() -> str:
    from importlib import resources

    return (resources.files("picobridge.config") / "example.toml").read_text(encoding="utf-8")


# A commented-out key: `# key = value`, optionally followed by a TOML comment (`# e.g.`).
COMMENTED_KEY = re.compile(r"^# ([a-z_]+) = .*$")


def test_the_shipped_example_is_accepted_as_it_is_and_enables_nothing(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, _example()))
    telegram, slack = sections(settings)
    assert not telegram.active and not slack.active
    assert settings.http.listen is None
    # Nothing but section headers and comments: every key is commented out.
    assert [line for line in _example().splitlines()
            if line.strip() and not line.startswith(("#", "["))] == []


def test_the_example_shows_true_defaults_and_marks_examples(tmp_path: Path) -> None:
    from picobridge.config.loader import settings_model

    model = settings_model()
    checked = 0
    section: object | None = None
    for line in _example().splitlines():
        if m := re.match(r"^\[(\w+)\]$", line):
            # The section's defaults: its class given nothing, as the settings validate it.
            section = model.model_fields[m[1]].annotation()  # type: ignore[misc]
            continue
        if not COMMENTED_KEY.match(line) or "# e.g." in line:
            continue
        key, value = next(iter(tomllib.loads(line[2:]).items()))
        default = getattr(section, key) if section is not None else (
            model.model_fields[key].default)
        assert value == default, f"{line!r}: the default is {default!r}"
        checked += 1
    assert checked >= 35  # most keys show their default; too few means the parse broke


def test_example_config_documents_every_key(tmp_path: Path) -> None:
    from importlib import resources

    from picobridge.config.fields import section_class, section_fields
    from picobridge.config.loader import settings_model

    example = (resources.files("picobridge.config") / "example.toml").read_text(encoding="utf-8")
    # Uncomment every `# key = value` line and swap the placeholders for usable dummies.
    text = re.sub(r"^# ([a-z0-9_]+ = )", r"\1", example, flags=re.M)
    text = re.sub(r"REPLACE-WITH-YOUR-[A-Z-]+", "dummy", text)
    settings = load_settings(write(tmp_path, text))
    telegram, slack = sections(settings)
    assert telegram.active and slack.active

    documented = set()
    section = ""
    for line in text.splitlines():
        if m := re.match(r"^\[(\w+)\]$", line):
            section = m[1] + "."
        elif m := re.match(r"^([a-z0-9_]+) = ", line):
            documented.add(section + m[1])
    expected = set()
    for name, field in settings_model().model_fields.items():
        sub = section_class(field.annotation)
        if sub is not None:
            expected |= {f"{name}.{k}" for k in section_fields(sub)}
        else:
            expected.add(name)
    assert expected - documented == set()


def test_secrets_lose_surrounding_whitespace_from_every_source(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pasted with a trailing newline or space, a token is still the token (it was reported as
    # "refused or revoked" before).
    monkeypatch.setenv("PICOBRIDGE_TELEGRAM__TOKEN", "  123456:ABCdef_token \n")
    path = write(tmp_path, '[slack]\nbot_token = " xoxb-1-abc\\t"\napp_token = "xapp-1-x "\n')
    settings = load_settings(path)
    assert settings.section("telegram").token.get_secret_value() == "123456:ABCdef_token"
    assert settings.section("slack").bot_token.get_secret_value() == "xoxb-1-abc"
    assert settings.section("slack").app_token.get_secret_value() == "xapp-1-x"
