"""The Bot API client a bot's adapter talks through: python-telegram-bot's Bot on our aiohttp
transport (http.py), or on PTB's httpx one through telegram.proxy_url.

With telegram.rate_limiter on (the default) its sends wait for Telegram's flood limits on
that transport (limiter.py). A plain Bot either way: PTB's ExtBot would bring telegram.ext,
all of PTB's application framework, and nothing else the daemon uses (no defaults, no
arbitrary callback data).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from telegram import Bot
from telegram.request import BaseRequest, HTTPXRequest

from picobridge.adapters.telegram.http import AiohttpRequest

if TYPE_CHECKING:
    from picobridge.adapters.telegram.settings import TelegramBotSettings


def request(cfg: TelegramBotSettings, pool_size: int, *, read: float = 20.0,
            write: float = 30.0, connect: float = 10.0, pool: float = 10.0,
            media_write: float | None = None) -> BaseRequest:
    proxy = cfg.proxy_url
    if proxy is None:
        return AiohttpRequest(pool_size=pool_size, read_timeout=read, write_timeout=write,
                              connect_timeout=connect, pool_timeout=pool,
                              media_write_timeout=media_write)
    return HTTPXRequest(connection_pool_size=pool_size, read_timeout=read,
                        write_timeout=write, connect_timeout=connect, pool_timeout=pool,
                        proxy=proxy, media_write_timeout=media_write or write)


def make_bot(token: str, cfg: TelegramBotSettings) -> tuple[Bot, BaseRequest]:
    """The bot that sends and polls, and its polling request."""
    # Sends run concurrently for many chats; the long poll has a connection of its own
    # (and a read timeout that PTB extends by the poll timeout).
    sends = request(cfg, 32, media_write=120.0)
    if cfg.rate_limiter:
        # Loaded only when on; aiolimiter itself only by the first send (limiter.leaky_bucket).
        from picobridge.adapters.telegram.limiter import FloodLimits, LimitedRequest

        sends = LimitedRequest(sends, FloodLimits())
    polls = request(cfg, 2, read=10.0, write=10.0, pool=5.0)
    return Bot(token, base_url=cfg.base_url, base_file_url=cfg.base_file_url,
               request=sends, get_updates_request=polls), polls
