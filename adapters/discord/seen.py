"""The newest message taken in each recently active channel, kept in the bridge's cursors.

Discord does not deliver what was sent while the daemon was down; at start the catch-up
(receive.py) reads each of these channels' history after the message recorded here. The
record is one cursor holding the `catch_up_channels` most recently active channels.
"""

from __future__ import annotations

import json
from collections import OrderedDict

from picobridge.adapters.common.partlog import Cursors

CURSOR = "discord.seen"


class Seen:
    def __init__(self, cursors: Cursors, size: int, name: str = CURSOR) -> None:
        self._cursors = cursors
        self._size = size
        self._name = name
        self._channels: OrderedDict[str, str] = OrderedDict()

    async def load(self) -> dict[str, str]:
        """Channel id -> the newest message id taken there, most recently active last."""
        raw = await self._cursors.get_cursor(self._name)
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {}
        if isinstance(data, dict):
            for channel, message in data.items():
                if str(channel).isdigit() and str(message).isdigit():
                    self._channels[str(channel)] = str(message)
        return dict(self._channels)

    async def saw(self, channel_id: str, message_id: str) -> None:
        newest = self._channels.get(channel_id)
        if newest is not None and int(newest) >= int(message_id):
            return
        self._channels[channel_id] = message_id
        self._channels.move_to_end(channel_id)
        while len(self._channels) > self._size:
            self._channels.popitem(last=False)
        await self._cursors.set_cursor(self._name, json.dumps(self._channels))
