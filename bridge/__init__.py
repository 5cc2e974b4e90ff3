"""picobridge: a picobot agent behind Telegram, Slack, Matrix and Discord."""

__version__ = "0.1.0"
