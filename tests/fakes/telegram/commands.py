"""The bot's command lists in the fake Telegram: setMyCommands, getMyCommands and
deleteMyCommands per scope and language, strict as the Bot API is about scope objects, and
`menu_shown`: what a given person in a given chat sees, by the Bot API's own rule (the first
list set of: chat member, chat administrators, chat, all chat administrators, all group (or
private) chats, default; each with the person's language before without)."""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.server import JSON
from tests.fakes.telegram.base import MethodHandler
from tests.fakes.telegram.keyboards import TelegramKeyboards
from tests.fakes.telegram.model import ApiError, bad_request

ScopeKey = tuple[Any, ...]  # ("default",), ("chat", chat_id), ("chat_member", chat_id, user)
_PLAIN = frozenset({"default", "all_private_chats", "all_group_chats",
                    "all_chat_administrators"})
_WITH_CHAT = frozenset({"chat", "chat_administrators", "chat_member"})
_GROUPS = frozenset({"group", "supergroup"})


class TelegramCommands(TelegramKeyboards):
    """The command lists the bot set, by (scope, language)."""

    def methods(self) -> dict[str, MethodHandler]:
        return {**super().methods(), "setMyCommands": self._set_my_commands,
                "getMyCommands": self._get_my_commands,
                "deleteMyCommands": self._delete_my_commands}

    # ---- reading back ------------------------------------------------------------------------

    def commands_for(self, scope: ScopeKey = ("default",), language: str = "") -> list[str]:
        """The command names set for exactly this scope (what getMyCommands answers)."""
        return [c["command"] for c in self.commands.get((scope, language), [])]

    def menu_shown(self, chat_id: int, user_id: int | None = None, *, language: str = "",
                   admin: bool = False) -> list[str]:
        """The command names a person (an administrator, with `admin`) sees in the chat."""
        group = self.chat(chat_id).get("type") in _GROUPS
        scopes: list[ScopeKey] = []
        if group:
            if user_id is not None:
                scopes.append(("chat_member", chat_id, user_id))
            if admin:
                scopes.append(("chat_administrators", chat_id))
        scopes.append(("chat", chat_id))
        if group:
            scopes += [("all_chat_administrators",)] if admin else []
            scopes.append(("all_group_chats",))
        else:
            scopes.append(("all_private_chats",))
        scopes.append(("default",))
        for scope in scopes:
            for lang in ([language] if language else []) + [""]:
                if self.commands.get((scope, lang)):
                    return self.commands_for(scope, lang)
        return []

    # ---- the methods -------------------------------------------------------------------------

    def _scope(self, params: JSON) -> tuple[ScopeKey, str]:
        language = params.get("language_code") or ""
        if not isinstance(language, str) or (language and not re.fullmatch(r"[a-z]{2}",
                                                                            language)):
            raise bad_request("invalid language code specified")
        scope = params.get("scope")
        if scope is None:
            return ("default",), language
        if not isinstance(scope, dict):
            raise bad_request("can't parse BotCommandScope JSON object")
        kind = scope.get("type")
        if kind in _PLAIN:
            return (kind,), language
        if kind not in _WITH_CHAT:
            raise bad_request("unsupported bot command scope type")
        chat_id = scope.get("chat_id")
        if isinstance(chat_id, str) and re.fullmatch(r"-?\d+", chat_id):
            chat_id = int(chat_id)
        if not isinstance(chat_id, int) or chat_id not in self.chats:
            raise bad_request("chat not found")
        if kind == "chat":
            return ("chat", chat_id), language
        if self.chats[chat_id].get("type") not in _GROUPS:
            raise bad_request("can't use this scope in a private chat")
        if kind == "chat_administrators":
            return ("chat_administrators", chat_id), language
        user_id = scope.get("user_id")
        if not isinstance(user_id, int) or user_id <= 0:
            raise bad_request("user not found")
        return ("chat_member", chat_id, user_id), language

    async def _set_my_commands(self, params: JSON) -> bool:
        key = self._scope(params)
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise bad_request("can't parse commands JSON object")
        if len(commands) > 100:
            raise bad_request("too many commands")
        clean: list[JSON] = []
        for command in commands:
            if not isinstance(command, dict):
                raise bad_request("can't parse BotCommand")
            name, description = command.get("command"), command.get("description")
            if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]{1,32}", name):
                raise bad_request("BOT_COMMAND_INVALID")
            if not isinstance(description, str) or not 1 <= len(description.strip()) <= 256:
                raise bad_request("BOT_COMMAND_DESCRIPTION_INVALID")
            clean.append({"command": name, "description": description})
        if clean:
            self.commands[key] = clean
        else:  # an empty list is no list: the scope falls back to the next one
            self.commands.pop(key, None)
        return True

    async def _get_my_commands(self, params: JSON) -> list[JSON]:
        return list(self.commands.get(self._scope(params), []))

    async def _delete_my_commands(self, params: JSON) -> bool:
        self.commands.pop(self._scope(params), None)
        return True


__all__ = ["ApiError", "ScopeKey", "TelegramCommands"]
