"""One run of the command line: what was typed, and the settings loaded for the commands that
need them (imported then, not before: `--help` and `init` never load pydantic)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from picobridge import exit_codes
from picobridge.cli.errors import CliError

if TYPE_CHECKING:
    from picobridge.config.settings import Settings


class Invocation:
    """What was typed and what it loaded (the secrets, for the last-resort error line)."""

    def __init__(self, args: argparse.Namespace, argv: list[str]) -> None:
        self.args = args
        self.argv = argv
        self.secrets: list[str] = []
        # The state_dir is the default (no config or variable set it): say so when creating it.
        self.default_state_dir = False

    def settings(self) -> Settings:
        from picobridge.adapters.registry import library_loggers, secret_shapes
        from picobridge.config.settings import ConfigError, load_settings, with_default_state_dir
        from picobridge.ops.logs import setup_logging

        try:
            settings = load_settings(self.args.config)
        except ConfigError as exc:
            raise CliError(f"config error: {exc}", exit_codes.CONFIG) from None
        self.secrets = settings.secrets()
        self.default_state_dir = "state_dir" not in settings.configured
        settings = with_default_state_dir(settings)
        if getattr(self.args, "echo", False):
            from picobridge.cli.echo_agent import with_echo_agent

            settings = with_echo_agent(settings)
        level = settings.log.level
        setup_logging(level if self.args.command == "run" or level == "DEBUG" else "WARNING",
                      self.secrets, library_loggers(), shapes=secret_shapes())
        return settings
