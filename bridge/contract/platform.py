"""A platform as the registry knows it before (or without) starting it."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from picobridge.contract.names import DEFAULT_BOT, bot_platform

if TYPE_CHECKING:
    # Annotations only: the registry (and every command line) imports this module, the
    # adapter interface and the command catalogue are the daemon's.
    from picobridge.config.settings import Settings
    from picobridge.contract.adapter import Adapter
    from picobridge.contract.commands import BridgeCommand

class Platform(ABC):
    """A platform as the rest of picobridge knows it before (or without) starting it: its
    config section, who may talk to the bot, how its user ids look, and how to build its
    adapter. Importing it must stay cheap; the platform's libraries load in `adapter()`.

    A new platform is one package under adapters/ with a Platform subclass, plus one line in
    adapters/registry.py.
    """

    name: ClassVar[str]
    # The class of its config section, `[<name>]`, as "module:Class" (a frozen dataclass like
    # config/sections.py's, or a pydantic model): imported only
    # when a configuration names the platform (every command line reads every platform's
    # entry, few configurations name every platform). A subclass may set `section` instead.
    section_model: ClassVar[str] = ""
    # systemd credential file name -> key in its section (`LoadCredential=<file>:...`).
    credentials: ClassVar[Mapping[str, str]] = {}
    # A user id as operators see it, for help texts (`access allow <name>:<example>`).
    user_example: ClassVar[str] = "12345"
    # The key that turns it on, for "no platform is enabled" (e.g. "<name>.token").
    enable_hint: ClassVar[str] = ""
    # The section's list of further bots (`bots` for `[[<name>.bots]]`), each a section with a
    # `name` and the section's keys; None for a platform of one bot.
    bots_key: ClassVar[str | None] = None
    # The loggers of its libraries, held at WARNING whatever log.level says: at INFO and
    # DEBUG they log request URLs (tokens in them) and whole payloads (users' messages).
    library_loggers: ClassVar[tuple[str, ...]] = ()
    # Regular expressions of its tokens, redacted from the log even when they are not (or
    # not yet) in the configuration.
    secret_shapes: ClassVar[tuple[str, ...]] = ()

    @property
    def section(self) -> type[Any]:
        """The class of its config section (`section_model`, imported now)."""
        module, _, model = self.section_model.partition(":")
        if not module or not model:
            # Said here: importlib would only say "Empty module name" to whoever writes the
            # next platform.
            raise TypeError(f"{type(self).__name__} names no config section: set "
                            f"section_model = 'module:Class' (or override section)")
        found: type[Any] = getattr(importlib.import_module(module), model)
        return found

    def bots(self, section: Any) -> dict[str, Any]:
        """Every bot the section configures, by the name the bridge knows it by
        (`<name>`, `<name>@<bot>`: contract/names.py), with its own keys; the section itself
        is the bot named "default"."""
        found = {self.name: section}
        for entry in getattr(section, self.bots_key) if self.bots_key else ():
            found[bot_platform(self.name, entry.name)] = entry
        return found

    def bot_adapter(self, settings: Settings, platform: str, section: Any) -> Adapter:
        """Build the adapter of one bot: `platform` the name the bridge knows it by, `section`
        its keys. A platform of one bot has only the default one."""
        if platform != bot_platform(self.name, DEFAULT_BOT):
            raise NotImplementedError(f"{self.name} runs one bot")
        return self.adapter(settings)

    @abstractmethod
    def active(self, section: Any) -> bool:
        """Whether the configuration turns this platform on."""

    @abstractmethod
    def allowed_users(self, section: Any) -> frozenset[str]:
        """The user ids the config file lets in."""

    def user_id_problem(self, user_id: str) -> str | None:
        """Why `user_id` cannot be one of this platform's user ids (None when it can)."""
        return None if user_id.strip() == user_id and user_id else "an empty or padded id"

    def token_problems(self, section: Any) -> list[str]:
        """Tokens in the section that cannot be what they are meant to be (judged by their
        shape, before any network call). Each a plain sentence naming the key, never the value.
        """
        return []

    def switched_off(self, section: Any) -> bool:
        """Whether the section turns the platform off on purpose (`enabled = false`)."""
        return getattr(section, "enabled", None) is False

    def needs_listener(self, section: Any) -> str | None:
        """What of this section needs the local HTTP listener (`http.listen`), if anything."""
        return None

    def secrets(self, section: Any) -> list[str]:
        """Every secret in the section, for the log redaction filter."""
        from picobridge.config.fields import section_keys

        found = []
        for name in section_keys(type(section)):
            value = getattr(section, name)
            if hasattr(value, "get_secret_value"):
                found.append(str(value.get_secret_value()))
        return found

    def manifest(self, section: Any, commands: Sequence[BridgeCommand]) -> str | None:
        """The app manifest an operator gives the platform for this bot (`section`), where
        its commands are declared there rather than by the bot (`picobridge manifest`):
        listing `commands`, what the agents the bot's routes reach offer. None: the platform
        has none."""
        return None

    @abstractmethod
    def adapter(self, settings: Settings) -> Adapter:
        """Build the adapter (the settings enable this platform)."""
