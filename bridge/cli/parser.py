"""The command line's shape: commands, options, descriptions and examples for `--help`.

Global options (`--config`) are accepted before or after the command: each command's parser
repeats them with a suppressed default, so a value given after the command wins and one given
before is not overwritten.

Imported for every command, `--help` included: the standard library only, and the registry's
table of names (no platform module).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from textwrap import dedent

from picobridge import __version__
from picobridge.adapters.registry import CONSOLE, PLATFORMS

CONFIG_HELP = ("TOML config file (default: $PICOBRIDGE_CONFIG, else /etc/picobridge/config.toml "
               "when present, else built-in defaults and PICOBRIDGE_* variables)")
ECHO_HELP = ("use the built-in echo agent instead of agent.command, to see the bridge work "
             "before wiring the real agent")


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default = None if top else argparse.SUPPRESS
    parser.add_argument("--config", type=Path, metavar="PATH", default=default, help=CONFIG_HELP)


class _Commands:
    """Adds commands with a description and examples to a subparsers action."""

    def __init__(self, action: argparse._SubParsersAction[argparse.ArgumentParser],
                 prog: str) -> None:
        self._action = action
        self._prog = prog

    def add(self, name: str, summary: str, description: str, examples: str,
            *, options: bool = True) -> argparse.ArgumentParser:
        # A line starting with "$ " is a whole shell line; others are this command's words.
        lines = "\n".join(f"  {line[2:]}" if line.startswith("$ ") else f"  {self._prog} {line}"
                          for line in dedent(examples).strip().splitlines())
        parser = self._action.add_parser(
            name, help=summary, description=dedent(description).strip(),
            epilog=f"examples:\n{lines}", formatter_class=argparse.RawDescriptionHelpFormatter)
        if options:
            _global_options(parser, top=False)
        return parser


def _daemon_commands(commands: _Commands) -> None:
    run = commands.add("run", "run the daemon in the foreground", """
        Run the bridge in the foreground: the enabled platforms, the agent and the store.
        This is what the systemd unit and the container run. Stops cleanly on SIGTERM or
        Ctrl-C.""", """
        run --config /etc/picobridge/config.toml
        run --echo          (platforms with the built-in echo agent)""")
    run.add_argument("--echo", action="store_true", help=ECHO_HELP)
    chat = commands.add("chat", "chat with the agent on this console", """
        Talk to the agent from this terminal through the same bridge, store and agent the
        daemon uses; no platform tokens needed. With a pipe on stdin each line is one
        message, each answer is printed on stdout, and chat exits once all are answered.""",
                        """
        chat --echo
        chat --config ./picobridge.toml
        $ printf 'hello\\nWhat did I just say?\\n' | picobridge chat --echo""")
    chat.add_argument("--echo", action="store_true", help=ECHO_HELP)
    check = commands.add("check", "validate config, database, agent and platform credentials", """
        Check that this installation can run: the config, the database, the agent (started
        once: ready and a pong) and each enabled platform's credentials. One line per part;
        secrets are never printed. Exit 0 only when everything is usable, 3 for an invalid
        config, 1 for any other problem.""", """
        check --config /etc/picobridge/config.toml
        check --echo        (the platforms' tokens, without the real agent)""")
    check.add_argument("--echo", action="store_true", help=ECHO_HELP)
    commands.add("migrate", "create or upgrade the database", """
        Create the database or apply pending schema migrations (run and chat do this on
        start). Stop the daemon first: one picobridge per state_dir.""", """
        migrate --config /etc/picobridge/config.toml""")
    health = commands.add("health", "ask the running daemon's /healthz", """
        Ask a running daemon whether it is healthy, through its /healthz on http.listen.
        Exit 0 when healthy, 1 otherwise; the container's HEALTHCHECK uses it.""", """
        health --config /etc/picobridge/config.toml
        health --url http://127.0.0.1:8787/healthz""")
    health.add_argument("--url", help="health URL (default: /healthz on http.listen)")


def _sessions(commands: _Commands) -> None:
    sessions = commands.add("sessions", "list, show or reset chat sessions", """
        Every chat has one agent session at a time. List them, show one chat's history, or
        start a fresh session for a chat (what /new does).""", """
        sessions list
        sessions show telegram:123456789
        sessions reset slack:D0123ABCD""")
    actions = sessions.add_subparsers(dest="action", metavar="ACTION", required=True)
    nested = _Commands(actions, "picobridge sessions")
    listing = nested.add("list", "chats and their current session", """
        Every chat picobridge has seen, its current session, when it was last active and
        how many of its messages wait for an answer.""", """
        list
        list --platform telegram""")
    listing.add_argument("--platform", choices=[*PLATFORMS, CONSOLE],
                         help="only this platform's chats")
    for action, summary, text in (
            ("show", "one chat's sessions",
             "Every session a chat has had, when each started and ended, the current one "
             "marked. CHAT is a chat key or one of its session ids."),
            ("reset", "start a new session for a chat",
             "Start a new session for a chat, as /new does in the chat: the agent starts "
             "afresh and the old session stays in the history.")):
        parser = nested.add(action, summary, text, f"""
            {action} telegram:123456789
            {action} console:local""")
        parser.add_argument("chat", help="chat key (e.g. telegram:12345) or session id")


def _access(commands: _Commands) -> None:
    access = commands.add("access", "list, allow or deny users", """
        Who may talk to the agent: the config's allow lists plus the grants and denials
        made here, which a running daemon applies at once (no restart). Run it as the
        service's user (sudo -u picobridge picobridge access ...).""", """
        access list
        access allow telegram:123456789
        access deny slack:U0123ABCD""")
    actions = access.add_subparsers(dest="action", metavar="ACTION", required=True)
    nested = _Commands(actions, "picobridge access")
    nested.add("list", "allowed and denied users", """
        The users allowed by the config, and every grant or denial made with
        `picobridge access`.""", "list")
    user_help = (f"platform:user_id, platform one of {', '.join(PLATFORMS)} "
                 "(e.g. telegram:12345 or slack:U0123ABCD)")
    for action, text in (("allow", "Let a user talk to the agent; a running daemon applies "
                                   "it to their next message."),
                         ("deny", "Stop a user, even one the config's allowed_users lists; "
                                  "a running daemon applies it at once.")):
        parser = nested.add(action, f"{action} a user", text, f"""
            {action} telegram:123456789
            {action} slack:U0123ABCD""")
        parser.add_argument("user", help=user_help)


def _failed(commands: _Commands) -> None:
    failed = commands.add("failed", "list, retry or drop what failed for good", """
        Dead letters: messages the agent could not answer (after agent's errors or three
        lost attempts) and replies the platform refused for good. A retry puts them back: a
        message goes to the agent again, a reply is sent again; a running daemon takes it up
        within a second. Run it as the service's user.""", """
        failed list
        failed retry m12 r7
        failed retry --all
        failed drop --older-than 7d""")
    actions = failed.add_subparsers(dest="action", metavar="ACTION", required=True)
    nested = _Commands(actions, "picobridge failed")
    nested.add("list", "what failed: id, kind, chat, when, why, first characters", """
        Every message and reply that failed for good, oldest first. Ids start with m
        (a message) or r (a reply).""", "list")
    retry = nested.add("retry", "put failed messages or replies back", """
        A message goes to the agent again, a reply is sent again.""", """
        retry m12
        retry --all""")
    retry.add_argument("ids", nargs="*", metavar="ID", help="ids from `failed list`")
    retry.add_argument("--all", action="store_true", help="every failed message and reply")
    drop = nested.add("drop", "forget failed messages or replies", """
        Take them off the list for good (a message stays in the database, marked dropped;
        a reply is deleted).""", """
        drop m12
        drop --older-than 7d""")
    drop.add_argument("ids", nargs="*", metavar="ID", help="ids from `failed list`")
    drop.add_argument("--older-than", metavar="AGE",
                      help="every one that failed longer ago than AGE (30m, 12h, 7d, 2w)")


def _erasure(commands: _Commands) -> None:
    user_help = "platform:user_id, as `picobridge access` takes it (e.g. telegram:12345)"
    forget = commands.add("forget", "remove what the bridge holds about a user", """
        Delete a user's messages and the replies to them, the chats only they wrote in
        (with their sessions and, for prime-rpc, the agent's session files picobridge
        keeps), their access grant (unless --keep-access) and the media they sent; prints
        what went. Works beside a running daemon. The agent's own memory and the
        platform's copy are not picobridge's to remove.""", """
        forget telegram:123456789
        forget slack:U0123ABCD --keep-access""")
    forget.add_argument("user", help=user_help)
    forget.add_argument("--keep-access", action="store_true",
                        help="keep their access grant (they may go on writing)")
    export = commands.add("export", "write what the bridge holds about a user", """
        Write a user's messages, the replies to them, their chats and sessions and access
        grant as PATH/export.json, and the media they sent (and prime-rpc session files)
        under PATH/media. PATH must not exist or be an empty directory.""", """
        export telegram:123456789 ./alice-export""")
    export.add_argument("user", help=user_help)
    export.add_argument("path", type=Path, metavar="PATH", help="directory to write")


def _setup_commands(commands: _Commands) -> None:
    init = commands.add("init", "write a commented config file", """
        Write the commented example config (every key with its default, nothing enabled)
        readable by you only (mode 0600), and print the next steps. PATH defaults to
        --config, else $PICOBRIDGE_CONFIG, else /etc/picobridge/config.toml for root, else
        ./picobridge.toml. An existing file is kept unless --force.""", """
        init ./picobridge.toml
        init                (as root: /etc/picobridge/config.toml)""", options=False)
    init.add_argument("path", nargs="?", type=Path, metavar="PATH", help="where to write it")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    manifest = commands.add("manifest", "print a bot's app manifest (Slack)", """
        Print the app manifest of BOT (`slack`, or `slack@NAME` for one of [[slack.apps]])
        to paste into the platform's app settings: its slash command by the configured name,
        listing the commands of every agent the bot's routes can reach.""", """
        manifest slack
        manifest slack@work > work-manifest.yml""")
    manifest.add_argument("bot", metavar="BOT", help="the bot, as `sessions list` names it")
    commands.add("echo-agent", "the built-in test agent (picobot's JSON channel)", """
        A stand-in for `picobot agent --json` that answers without a model: it echoes,
        recalls the session's last message ("What did I just say?"), lists attachments and
        sends progress. `run --echo`, `chat --echo` and `check --echo` use it; it can also
        be agent.command itself.""", """
        chat --echo
        echo-agent          (reads NDJSON on stdin)""", options=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="picobridge",
        description="Put a picobot agent behind Telegram, Slack, Matrix and Discord.",
        epilog="Run `picobridge COMMAND --help` for a command's options and examples. "
               "Try it without tokens or an agent: picobridge chat --echo",
    )
    parser.add_argument("--version", action="version", version=f"picobridge {__version__}")
    _global_options(parser, top=True)
    commands = _Commands(parser.add_subparsers(dest="command", metavar="COMMAND",
                                               required=True), "picobridge")
    _daemon_commands(commands)
    _sessions(commands)
    _access(commands)
    _failed(commands)
    _erasure(commands)
    _setup_commands(commands)
    return parser
