"""The configuration sections of the core: the agent side, the bridge, attachments, the local
HTTP listener and logging. Platform sections live with their adapters; config/settings.py puts
them all together.

Each section is a frozen dataclass: plain Python the daemon holds (and a parent process can
hand a child) without pydantic, which validates them when the configuration is loaded
(config/loader.py): the constraints in the annotations, `After` checks of one key, and
`__post_init__` for what concerns several keys (pydantic calls it, as a model validator)."""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from annotated_types import Ge, Gt, MinLen

from picobridge.config.fields import Plain, plain
from picobridge.config.values import (
    After,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Secret,
    empty_dict,
    empty_list,
)

# The shipped example config carries these markers in place of real secrets.
_PLACEHOLDER_MARKERS = ("REPLACE", "YOUR-", "YOUR_", "CHANGEME", "CHANGE-ME")


def clean_secret(value: Secret | None, info_name: str) -> Secret | None:
    """Strip a secret (a token pasted with a space or newline is still the token, from any
    source), refuse the shipped example's placeholders, and treat blank as unset."""
    if value is None:
        return None
    text = value.get_secret_value().strip()
    if any(marker in text.upper() for marker in _PLACEHOLDER_MARKERS):
        raise ValueError(f"{info_name} still holds the example placeholder; set the real value")
    return Secret(text) if text else None


def cleaned(key: str) -> After:
    """The check of a secret key (`<section>.<key>`, as messages name it): `clean_secret`."""
    return After(lambda value: clean_secret(value, key))


def matching(pattern: str) -> After:
    """A string key that must match `pattern` (anchored, `^...$`), said as pydantic says it
    (whose `$` is the end of the text, where Python's would let a newline follow)."""
    whole = re.compile(pattern.removeprefix("^").removesuffix("$"))

    def check(value: str) -> str:
        if whole.fullmatch(value) is None:
            raise ValueError(f"String should match pattern '{pattern}'")
        return value

    return After(check)


@plain
class Section(Plain):
    """A section: unknown keys are errors. A section whose raw table needs rewriting before
    its keys are validated (a default depending on another key) overrides `prepare`."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    @classmethod
    def prepare(cls, data: Any) -> Any:
        return data

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        schema = handler(source)
        if cls.prepare.__func__ is Section.prepare.__func__:  # type: ignore[attr-defined]
            return schema
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(cls.prepare, schema)


def _valid_bot_name(name: str) -> str:
    from picobridge.contract.names import DEFAULT_BOT, NAME_PATTERN, valid_name

    if not valid_name(name):
        raise ValueError(f"a bot's name must match {NAME_PATTERN}")
    if name == DEFAULT_BOT:
        raise ValueError(f"the bot named {DEFAULT_BOT!r} is the platform's own section")
    return name


@plain
class BotEntry(Section):
    """A further bot of a platform (`[[<platform>.bots]]` and the like): a `name`, mixed
    into the platform's own section so it has every key that section has."""

    name: Annotated[str, After(_valid_bot_name)]

    @classmethod
    def default_paths(cls, name: str) -> dict[str, Any]:
        """Keys whose default depends on the bot's name (its webhook path)."""
        return {}

    @classmethod
    def prepare(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            return {**cls.default_paths(data["name"]), **data}
        return data


@plain
class WorkerSettings(Section):
    """An agent worker with its own command, e.g. over ssh (`[[agent.workers]]`)."""

    command: Annotated[list[str], MinLen(1)]
    name: Annotated[str, matching(r"^[A-Za-z0-9_.-]{1,40}$")] | None = None
    weight: PositiveFloat = 1.0


@plain
class AgentSettings(Section):
    # Default: the protocol's own command (agent/protocols/__init__.py).
    command: Annotated[list[str], MinLen(1)] = field(default_factory=empty_list)
    protocol: str = "picobot-json"
    # Default: <state_dir>/workspace. Keep it stable: agents record it (pi's session files).
    workdir: Path | None = None
    # prime-rpc: where each session's file lives. Default: <state_dir>/agent-sessions.
    sessions_dir: Path | None = None
    env: dict[str, str] = field(default_factory=empty_dict)
    ready_timeout: PositiveFloat = 30.0
    ping_interval: PositiveFloat = 15.0
    ping_timeout: PositiveFloat = 10.0
    turn_timeout: PositiveFloat = 600.0
    # After an abort (/stop, turn_timeout), how long a turn may take to wind down before the
    # agent is restarted (protocols that can abort, like prime-rpc).
    abort_grace: PositiveFloat = 10.0
    shutdown_timeout: PositiveFloat = 10.0
    max_in_flight: PositiveInt = 1
    restart_budget: PositiveFloat = 300.0
    pool_size: PositiveInt = 1
    workers: list[WorkerSettings] = field(default_factory=empty_list)
    # /model offers only these of the agent's models (provider/id or id); empty: all.
    models: list[str] = field(default_factory=empty_list)

    def workdir_in(self, state_dir: Path) -> Path:
        """The agent's working directory: `agent.workdir`, else `<state_dir>/workspace` (never
        the folder that holds the database)."""
        return self.workdir if self.workdir is not None else state_dir / "workspace"

    @classmethod
    def prepare(cls, data: Any) -> Any:
        from picobridge.agent.protocols import DEFAULT_PROTOCOL, PROTOCOLS

        if isinstance(data, dict):
            protocol = data.get("protocol", DEFAULT_PROTOCOL)
            if protocol not in PROTOCOLS:
                raise ValueError(f"agent.protocol must be one of {', '.join(PROTOCOLS)}")
            if data.get("command") is None:
                data = {**data, "command": list(PROTOCOLS[protocol].default_command)}
        return data

    def __post_init__(self) -> None:
        # Built in code rather than from a table: the protocol's command all the same (a table
        # given none has it from `prepare`, an empty list given is refused there).
        if not self.command:
            from picobridge.agent.protocols import PROTOCOLS

            object.__setattr__(self, "command", list(PROTOCOLS[self.protocol].default_command))


@plain
class RouteSettings(Section):
    """`[[routes]]`: which agent serves the chats it matches (first match wins)."""

    agent: str
    platform: str | None = None
    bot: str | None = None
    # Chat keys as `picobridge sessions list` prints them; glob patterns (`<platform>:C0DEV*`).
    chats: list[str] | None = None
    users: list[str] | None = None
    kind: Literal["private", "group"] | None = None
    # Agents a chat of this route may switch to with /agent (its own agent is always one).
    switchable: list[str] = field(default_factory=empty_list)


@plain
class BridgeSettings(Section):
    # The agent of chats no route matches.
    default_agent: str = "default"
    coalesce: bool = True
    max_attempts: PositiveInt = 3
    # Seconds a question of the agent (prime-rpc dialogs) waits for an answer.
    dialog_timeout: PositiveFloat = 300.0
    # What a message does while its chat's turn runs (/mode changes it per chat).
    busy_mode: Literal["collect", "steer", "followup", "interrupt"] = "collect"


@plain
class LimitsSettings(Section):
    # Per user, across all their chats; 0 = no limit.
    messages_per_hour: NonNegativeInt = 0
    messages_per_day: NonNegativeInt = 0
    # Users never limited, named "platform:user_id" as `picobridge access` names them.
    exempt_users: list[str] = field(default_factory=empty_list)


@plain
class AttachmentSettings(Section):
    inline_max_bytes: PositiveInt = 256 * 1024
    max_bytes: PositiveInt = 20 * 1024 * 1024
    retention_days: PositiveInt = 30
    # Seconds one received file may take to fetch, retries included; then its sender is told.
    download_timeout: PositiveFloat = 60.0
    # Where the files an agent sends may come from (symlinks resolved). Default: the agent's
    # workdir and <state_dir>/outbox.
    outbound_dirs: list[Path] | None = None
    # A file an agent sends that is larger is not sent (a note says so).
    outbound_max_bytes: PositiveInt = 50 * 1024 * 1024


# The speech services' keys may come from systemd credentials like the platforms' tokens.
VOICE_CREDENTIALS = {"voice_transcribe_api_key": ("voice", "transcribe_api_key"),
                     "voice_tts_api_key": ("voice", "tts_api_key")}


@plain
class VoiceSettings(Section):
    """Voice messages: transcribed for the agent, and answers spoken back (`[voice]`)."""

    # argv with "{path}" for the audio file; its stdout is the transcript (whisper.cpp's CLI).
    transcribe_command: Annotated[list[str], MinLen(1)] | None = None
    # An OpenAI-compatible /v1/audio/transcriptions endpoint (the whole URL).
    transcribe_url: str | None = None
    transcribe_api_key: Annotated[Secret | None, cleaned("voice.transcribe_api_key")] = None
    transcribe_model: str = "whisper-1"
    # argv with "{in}" (a UTF-8 text file) and "{out}" (the audio file it writes).
    tts_command: Annotated[list[str], MinLen(1)] | None = None
    # An OpenAI-compatible /v1/audio/speech endpoint (the whole URL); asked for Ogg/Opus.
    tts_url: str | None = None
    tts_api_key: Annotated[Secret | None, cleaned("voice.tts_api_key")] = None
    tts_model: str = "tts-1"
    tts_voice: str = "alloy"
    # When an answer is also sent as a voice note: never, to_voice (answering a voice
    # message), always. It needs tts_command or tts_url.
    reply: Literal["never", "to_voice", "always"] = "never"
    # Seconds one transcription or one spoken answer may take; then it goes without.
    timeout: PositiveFloat = 60.0

    def __post_init__(self) -> None:
        # With both a command and a URL set, the command is used (core/speech.py).
        if self.reply != "never" and not (self.tts_command or self.tts_url):
            raise ValueError(f"voice.reply = {self.reply!r} needs tts_command or tts_url")

    def secrets(self) -> list[str]:
        return [key.get_secret_value() for key in (self.transcribe_api_key, self.tts_api_key)
                if key is not None]


@plain
class StoreSettings(Section):
    # Seconds a write waits for another process's lock on the database (a backup, a second
    # tool) before the store counts as refusing writes and the outage handling takes over.
    busy_timeout: PositiveFloat = 5.0


def _host_port(value: str | None) -> str | None:
    if value is None:
        return value
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("http.listen must be host:port, e.g. 127.0.0.1:8787")
    return value


@plain
class HttpSettings(Section):
    listen: Annotated[str | None, After(_host_port)] = None
    max_connections: Annotated[int, Ge(1)] = 256
    header_timeout: Annotated[float, Gt(0)] = 10.0
    body_timeout: Annotated[float, Gt(0)] = 30.0
    # Seconds `run` tries again for a port another process holds (the previous instance during
    # a deploy, say) before it exits with a code systemd restarts on.
    listen_retry: NonNegativeFloat = 30.0


@plain
class LogSettings(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
