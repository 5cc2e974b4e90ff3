"""The `[matrix]` section of the configuration."""

from __future__ import annotations

import importlib
import re
from dataclasses import field
from typing import Annotated, Literal

from picobridge.config.fields import plain
from picobridge.config.sections import Section, cleaned
from picobridge.config.values import After, PositiveFloat, PositiveInt, Secret, empty_list

# A Matrix user id: @localpart:server (the server part may carry a port).
USER_ID = re.compile(r"^@[^:\s]+:[^\s]+$")


def _matrix_id(value: str | None) -> str | None:
    if value is not None and not USER_ID.match(value):
        raise ValueError("matrix.user_id must look like @bot:example.org")
    return value


def _matrix_ids(value: list[str]) -> list[str]:
    for user in value:
        if not USER_ID.match(user):
            raise ValueError("matrix.allowed_users holds Matrix ids like @alice:example.org")
    return value


def _url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("https://", "http://")):
        raise ValueError("matrix.homeserver must be a URL, e.g. https://matrix.example.org")
    return value


@plain
class MatrixSettings(Section):
    enabled: bool | None = None
    # The homeserver's client-server API base URL, e.g. https://matrix.example.org.
    homeserver: Annotated[str | None, After(_url)] = None
    user_id: Annotated[str | None, After(_matrix_id)] = None
    access_token: Annotated[Secret | None, cleaned("matrix.access_token")] = None
    # Instead of an access token: the account's password, used once to log in; the device
    # login it gets is kept in <state_dir>/matrix/session.json and reused after restarts.
    password: Annotated[Secret | None, cleaned("matrix.password")] = None
    device_id: str | None = None
    device_name: str = "picobridge"
    allowed_users: Annotated[list[str], After(_matrix_ids)] = field(default_factory=empty_list)
    # Where the bot talks: "direct" (only rooms of the bot and one person), "mentions" (also
    # rooms with more people, when mentioned or replied to; threads it is in without), "all"
    # (every message in every room it is in).
    rooms: Literal["direct", "mentions", "all"] = "mentions"
    # Room ids the bot may join besides direct chats; empty: any room an allowed user invites
    # it to.
    allowed_rooms: list[str] = field(default_factory=empty_list)
    command_prefix: str = "!"
    reaction_done: str = "✅"
    stream: bool = False
    max_chunks: PositiveInt = 4
    sync_timeout: PositiveFloat = 30.0
    # End-to-end encryption with mautrix's crypto (the `e2ee` extra): keys in
    # <state_dir>/matrix/crypto.db, messages in encrypted rooms read and answered encrypted.
    e2ee: bool = False
    # Seconds an encrypted message whose key has not arrived yet waits for it (and for the
    # answer to a key request) before its sender is told it could not be read.
    e2ee_key_wait: PositiveFloat = 10.0

    @property
    def active(self) -> bool:
        if self.enabled is not None:
            return self.enabled
        return self.access_token is not None or self.password is not None

    def __post_init__(self) -> None:
        if not self.active:
            return
        if self.access_token is None and self.password is None:
            raise ValueError("matrix is enabled but neither matrix.access_token nor "
                             "matrix.password is set")
        if self.homeserver is None or self.user_id is None:
            raise ValueError("matrix needs matrix.homeserver and matrix.user_id")
        if self.e2ee:
            missing = missing_e2ee_modules()
            if missing:
                raise ValueError(
                    f"matrix.e2ee needs the encryption extra ({', '.join(missing)} not "
                    f"installed): pip install 'picobridge[e2ee]'")


# What the `e2ee` extra brings: libolm's binding, mautrix's SQL crypto store (which imports
# asyncpg even on SQLite) and the ciphers of encrypted attachments.
E2EE_MODULES = ("olm", "asyncpg", "unpaddedbase64", "Crypto.Cipher.AES")


def missing_e2ee_modules() -> list[str]:
    missing = []
    for name in E2EE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name.split(".")[0])
    return missing
