"""deploy/slack-app-manifest.yml must grant what adapters/slack/ uses (text checks: the
manifest is YAML and no YAML parser is a dependency)."""

from __future__ import annotations

import re
from pathlib import Path

from picobridge.adapters.slack.settings import SlackSettings

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "slack-app-manifest.yml"


def items_under(text: str, key: str) -> list[str]:
    """The `- item` lines of the YAML list directly under `key:` (comments skipped)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    found = []
    for line in lines[start + 1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(line) - len(line.lstrip()) <= indent and not stripped.startswith("-"):
            break
        if stripped.startswith("- "):
            found.append(stripped[2:].split("#")[0].strip())
    return found


def test_scopes_cover_every_call_the_adapter_makes() -> None:
    scopes = set(items_under(MANIFEST.read_text(encoding="utf-8"), "bot"))
    needed = {
        "app_mentions:read", "channels:history", "groups:history", "im:history",
        "mpim:history", "chat:write", "reactions:write", "im:write", "files:read",
        "files:write", "commands", "assistant:write",
    }
    assert needed <= scopes


def test_events_and_socket_mode() -> None:
    text = MANIFEST.read_text(encoding="utf-8")
    events = set(items_under(text, "bot_events"))
    assert {"app_mention", "message.im", "message.channels", "message.groups",
            "message.mpim"} <= events
    assert re.search(r"^\s*socket_mode_enabled: true$", text, re.MULTILINE)


def test_slash_command_matches_the_default_setting() -> None:
    text = MANIFEST.read_text(encoding="utf-8")
    commands = re.findall(r"^\s*- command: (\S+)$", text, re.MULTILINE)
    assert commands == [SlackSettings().slash_command]


def test_the_assistant_scope_comes_with_the_assistant_view() -> None:
    # Slack refuses a manifest with assistant:write but without features.assistant_view.
    text = MANIFEST.read_text(encoding="utf-8")
    assert "assistant:write" in items_under(text, "bot")
    features = text.split("\nfeatures:\n", 1)[1].split("\noauth_config:", 1)[0]
    view = re.search(r"^  assistant_view:\n    assistant_description: \S.*$", features,
                     re.MULTILINE)
    assert view, "features.assistant_view with an assistant_description is missing"
    assert re.search(r"^      - title: .+\n        message: .+$", features, re.MULTILINE)


def test_interactivity_is_on_for_the_question_buttons() -> None:
    text = MANIFEST.read_text(encoding="utf-8")
    lines = text.splitlines()
    start = lines.index("  interactivity:")
    section = []
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= 2:
            break
        section.append(line.strip())
    assert "is_enabled: true" in section
    # HTTP mode: the clicks go to the same path as events (one route in the adapter), given
    # as a placeholder like the events URL.
    events_path = SlackSettings().events_path
    placeholders = [s for s in section if s.startswith("# request_url:")]
    assert len(placeholders) == 1 and placeholders[0].endswith(events_path)
    event_urls = re.findall(r"^\s*# request_url: (\S+)$", text, re.MULTILINE)
    assert len(set(event_urls)) == 1


def test_the_printed_manifest_is_the_shipped_one_for_every_command() -> None:
    # `picobridge manifest slack` rewrites only the slash command: for the whole catalogue
    # and the default name it is the shipped file itself (deploy/ links to the package's).
    from picobridge.adapters.slack.manifest import manifest, template
    from picobridge.contract import AGENT_COMMANDS, catalogue, listed_commands

    assert template() == MANIFEST.read_text(encoding="utf-8")
    assert manifest("/picobridge", catalogue(AGENT_COMMANDS)) == template()
    fewer = manifest("/work", listed_commands())
    assert "    - command: /work\n" in fewer and "model" not in fewer.split("slash_commands")[1]
    assert fewer.replace("/work", "/picobridge").count("\n") == template().count("\n")
