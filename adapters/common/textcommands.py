"""Bridge commands typed as text behind a prefix (`!new`), on platforms whose clients keep
unknown /commands to themselves (Matrix) or send them elsewhere (Slack)."""

from __future__ import annotations

from picobridge.contract import ALL_COMMANDS

# Any listed chat command, for any agent (the bridge says which its agent lacks).
TEXT_COMMANDS = frozenset(command.name for command in ALL_COMMANDS if command.listed)


def translate_command(text: str, prefix: str) -> str:
    """`!new` (any case, optional trailing text) -> `/new` for the bridge's command parser;
    anything else (`! new`, `!news`) as it is."""
    if not prefix or not text.startswith(prefix):
        return text
    rest = text[len(prefix):]
    word = rest.split(None, 1)[0].lower() if rest.strip() else ""
    if word in TEXT_COMMANDS and rest[: len(word)].lower() == word:
        return "/" + word + rest[len(word):]
    return text
