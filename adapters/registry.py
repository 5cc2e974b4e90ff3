"""The platforms picobridge knows. A new platform is one module and one line here.

Each entry names the adapter class as "module:Class"; the config section of the same name
(`[telegram]`, `[slack]`) says whether it is enabled (`.active`). Modules are imported only when
enabled, so `picobridge chat` does not pay for libraries it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from picobridge.contract import Adapter

if TYPE_CHECKING:
    from picobridge.config.settings import Settings

PLATFORMS: dict[str, str] = {
    "telegram": "picobridge.adapters.telegram:TelegramAdapter",
    "slack": "picobridge.adapters.slack:SlackAdapter",
}


def adapter_class(platform: str) -> type[Adapter]:
    module_name, _, class_name = PLATFORMS[platform].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    assert isinstance(cls, type) and issubclass(cls, Adapter)
    return cls


def enabled_platforms(settings: Settings) -> list[str]:
    return [name for name in PLATFORMS if getattr(settings, name).active]


def build_adapters(settings: Settings) -> list[Adapter]:
    adapters = []
    for name in enabled_platforms(settings):
        adapter = adapter_class(name).from_settings(settings)
        if adapter is not None:
            adapters.append(adapter)
    return adapters
