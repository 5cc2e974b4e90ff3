"""The configuration sections of the core: the agent side, the bridge, attachments, the local
HTTP listener and logging. Platform sections live with their adapters; config/settings.py puts
them all together."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    field_validator,
    model_validator,
)

# The shipped example config carries these markers in place of real secrets.
_PLACEHOLDER_MARKERS = ("REPLACE", "YOUR-", "YOUR_", "CHANGEME", "CHANGE-ME")


def clean_secret(value: SecretStr | None, info_name: str) -> SecretStr | None:
    """Strip a secret (a token pasted with a space or newline is still the token, from any
    source), refuse the shipped example's placeholders, and treat blank as unset."""
    if value is None:
        return None
    text = value.get_secret_value().strip()
    if any(marker in text.upper() for marker in _PLACEHOLDER_MARKERS):
        raise ValueError(f"{info_name} still holds the example placeholder; set the real value")
    return SecretStr(text) if text else None


class Section(BaseModel):
    # Built only as part of the settings model that holds it (config/settings.py): a section
    # built on its own too would be a second validator and serializer of every key, in time
    # at each start and in memory for the daemon's life.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class BotEntry(BaseModel, defer_build=True):
    """A further bot of a platform (`[[<platform>.bots]]` and the like): a `name`, mixed
    into the platform's own section model so it has every key that section has."""

    name: str

    @classmethod
    def default_paths(cls, name: str) -> dict[str, Any]:
        """Keys whose default depends on the bot's name (its webhook path)."""
        return {}

    @model_validator(mode="before")
    @classmethod
    def _named_paths(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            return {**cls.default_paths(data["name"]), **data}
        return data

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        from picobridge.contract.names import DEFAULT_BOT, NAME_PATTERN, valid_name

        if not valid_name(name):
            raise ValueError(f"a bot's name must match {NAME_PATTERN}")
        if name == DEFAULT_BOT:
            raise ValueError(f"the bot named {DEFAULT_BOT!r} is the platform's own section")
        return name


class WorkerSettings(Section):
    """An agent worker with its own command, e.g. over ssh (`[[agent.workers]]`)."""

    command: list[str] = Field(min_length=1)
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,40}$")
    weight: PositiveFloat = 1.0


class AgentSettings(Section):
    # Default: the protocol's own command (agent/protocols/__init__.py).
    command: list[str] = Field(default=[], min_length=1)
    protocol: str = "picobot-json"
    # Default: <state_dir>/workspace. Keep it stable: agents record it (pi's session files).
    workdir: Path | None = None
    # prime-rpc: where each session's file lives. Default: <state_dir>/agent-sessions.
    sessions_dir: Path | None = None
    env: dict[str, str] = Field(default={})
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
    workers: list[WorkerSettings] = Field(default=[])
    # /model offers only these of the agent's models (provider/id or id); empty: all.
    models: list[str] = Field(default=[])

    def workdir_in(self, state_dir: Path) -> Path:
        """The agent's working directory: `agent.workdir`, else `<state_dir>/workspace` (never
        the folder that holds the database)."""
        return self.workdir if self.workdir is not None else state_dir / "workspace"

    @model_validator(mode="before")
    @classmethod
    def _protocol_default_command(cls, data: Any) -> Any:
        from picobridge.agent.protocols import DEFAULT_PROTOCOL, PROTOCOLS

        if isinstance(data, dict):
            protocol = data.get("protocol", DEFAULT_PROTOCOL)
            if protocol not in PROTOCOLS:
                raise ValueError(f"agent.protocol must be one of {', '.join(PROTOCOLS)}")
            if data.get("command") is None:
                data = {**data, "command": list(PROTOCOLS[protocol].default_command)}
        return data


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
    switchable: list[str] = Field(default=[])


class BridgeSettings(Section):
    # The agent of chats no route matches.
    default_agent: str = "default"
    coalesce: bool = True
    max_attempts: PositiveInt = 3
    # Seconds a question of the agent (prime-rpc dialogs) waits for an answer.
    dialog_timeout: PositiveFloat = 300.0
    # What a message does while its chat's turn runs (/mode changes it per chat).
    busy_mode: Literal["collect", "steer", "followup", "interrupt"] = "collect"


class LimitsSettings(Section):
    # Per user, across all their chats; 0 = no limit.
    messages_per_hour: NonNegativeInt = 0
    messages_per_day: NonNegativeInt = 0
    # Users never limited, named "platform:user_id" as `picobridge access` names them.
    exempt_users: list[str] = Field(default=[])


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


class VoiceSettings(Section):
    """Voice messages: transcribed for the agent, and answers spoken back (`[voice]`)."""

    # argv with "{path}" for the audio file; its stdout is the transcript (whisper.cpp's CLI).
    transcribe_command: list[str] | None = Field(default=None, min_length=1)
    # An OpenAI-compatible /v1/audio/transcriptions endpoint (the whole URL).
    transcribe_url: str | None = None
    transcribe_api_key: SecretStr | None = None
    transcribe_model: str = "whisper-1"
    # argv with "{in}" (a UTF-8 text file) and "{out}" (the audio file it writes).
    tts_command: list[str] | None = Field(default=None, min_length=1)
    # An OpenAI-compatible /v1/audio/speech endpoint (the whole URL); asked for Ogg/Opus.
    tts_url: str | None = None
    tts_api_key: SecretStr | None = None
    tts_model: str = "tts-1"
    tts_voice: str = "alloy"
    # When an answer is also sent as a voice note: never, to_voice (answering a voice
    # message), always. It needs tts_command or tts_url.
    reply: Literal["never", "to_voice", "always"] = "never"
    # Seconds one transcription or one spoken answer may take; then it goes without.
    timeout: PositiveFloat = 60.0

    @field_validator("transcribe_api_key", "tts_api_key", mode="after")
    @classmethod
    def _clean(cls, value: SecretStr | None, info: Any) -> SecretStr | None:
        return clean_secret(value, f"voice.{info.field_name}")

    @model_validator(mode="after")
    def _speaks_when_asked(self) -> VoiceSettings:
        # With both a command and a URL set, the command is used (core/speech.py).
        if self.reply != "never" and not (self.tts_command or self.tts_url):
            raise ValueError(f"voice.reply = {self.reply!r} needs tts_command or tts_url")
        return self

    def secrets(self) -> list[str]:
        return [key.get_secret_value() for key in (self.transcribe_api_key, self.tts_api_key)
                if key is not None]


class StoreSettings(Section):
    # Seconds a write waits for another process's lock on the database (a backup, a second
    # tool) before the store counts as refusing writes and the outage handling takes over.
    busy_timeout: PositiveFloat = 5.0


class HttpSettings(Section):
    listen: str | None = None
    max_connections: int = Field(default=256, ge=1)
    header_timeout: float = Field(default=10.0, gt=0)
    body_timeout: float = Field(default=30.0, gt=0)
    # Seconds `run` tries again for a port another process holds (the previous instance during
    # a deploy, say) before it exits with a code systemd restarts on.
    listen_retry: NonNegativeFloat = 30.0

    @field_validator("listen")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is None:
            return v
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("http.listen must be host:port, e.g. 127.0.0.1:8787")
        return v


class LogSettings(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


