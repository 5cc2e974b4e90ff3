"""picobridge: a picobot agent behind Telegram and Slack."""

__version__ = "0.1.0"
