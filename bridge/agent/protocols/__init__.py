"""The agent protocols picobridge speaks. A new protocol is one driver module and one line here.

Each entry names the driver class as "module:Class" and the agent command used when
`agent.command` is not set. Modules are imported only when their protocol is chosen.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from picobridge.agent.driver import Driver


@dataclass(frozen=True, slots=True)
class ProtocolEntry:
    driver: str  # "module:Class"
    default_command: tuple[str, ...]


PROTOCOLS: dict[str, ProtocolEntry] = {
    "picobot-json": ProtocolEntry("picobridge.agent.protocols.picobot_json:PicobotDriver",
                                  ("picobot", "agent", "--json")),
    "prime-rpc": ProtocolEntry("picobridge.agent.protocols.prime_rpc:PrimeRpcDriver",
                               ("prime-agent", "--mode", "rpc")),
}

DEFAULT_PROTOCOL = "picobot-json"


def driver_class(protocol: str) -> type[Driver]:
    from picobridge.agent.driver import Driver

    module_name, _, class_name = PROTOCOLS[protocol].driver.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, Driver)):
        raise TypeError(f"{PROTOCOLS[protocol].driver} is not a protocol driver")
    return cls
