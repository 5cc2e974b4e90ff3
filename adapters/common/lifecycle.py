"""What a platform adapter reports the same way on every platform: the loops it runs under
the daemon's supervision (BridgeLink.keep_running) and its connection state."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from picobridge.contract import BridgeLink


class Lifecycle:
    """One bot's loops and connection. `platform` is the name the bridge knows the bot by
    (`slack`, `slack@work`); a loop named `<base>-x` runs as `<platform>-x`, so each bot's
    loops have names of their own."""

    def __init__(self, platform: str, base: str) -> None:
        self.platform = platform
        self._base = base
        self.bridge: BridgeLink | None = None
        self.connected = False
        self._loops: list[str] = []

    def keep(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        assert self.bridge is not None
        name = self.platform + name.removeprefix(self._base)
        self.bridge.keep_running(name, loop)
        self._loops.append(name)

    def set_connected(self, up: bool) -> None:
        self.connected = up
        if self.bridge is not None:
            self.bridge.connection_changed(self.platform, up)

    async def stop_loops(self) -> None:
        if self.bridge is not None:
            for name in self._loops:
                await self.bridge.stop_running(name)
