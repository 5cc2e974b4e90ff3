"""python-telegram-bot's HTTP transport on aiohttp.

PTB's default transport (httpx over httpcore and anyio) costs about a third of the daemon's
CPU per message; aiohttp, which the daemon already uses for Slack and its own server, does the
same requests for much less (C-accelerated HTTP parsing, no anyio layer). PTB supports a
custom transport through `BaseRequest`: it builds the request and interprets the answer, this
class only moves bytes. A configured `telegram.proxy_url` keeps PTB's httpx transport, which
also speaks SOCKS; proxies from the environment (HTTPS_PROXY) work with either.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
from aiohttp.payload import BytesPayload
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData


class AiohttpRequest(BaseRequest):
    def __init__(self, *, pool_size: int, read_timeout: float, write_timeout: float,
                 connect_timeout: float, pool_timeout: float,
                 media_write_timeout: float | None = None) -> None:
        self._pool_size = pool_size
        self._read = read_timeout
        self._write = write_timeout
        self._connect = connect_timeout
        self._pool = pool_timeout
        self._media_write = media_write_timeout if media_write_timeout is not None \
            else write_timeout
        self._session: aiohttp.ClientSession | None = None
        self._env_proxies: dict[str, str] = {}
        self._proxy_for_host: dict[tuple[str, str], str | None] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            # Like httpx (PTB's default), honour HTTPS_PROXY / NO_PROXY from the environment,
            # so a proxy set that way keeps working; read once, not on every request as
            # aiohttp's trust_env would (a tenth of the transport's CPU).
            self._env_proxies = getproxies()
            self._proxy_for_host.clear()
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                headers={"User-Agent": self.USER_AGENT})

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def _proxy(self, url: str) -> str | None:
        key = _scheme_host(url)
        if key not in self._proxy_for_host:
            self._proxy_for_host[key] = environment_proxy(url, self._env_proxies)
        return self._proxy_for_host[key]

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._session is None or self._session.closed:
            # Like PTB's own transport, usable without initialize() (a Bot used only for
            # calls, never initialized itself, relies on that).
            await self.initialize()
        session = self._session
        assert session is not None
        files = request_data.multipart_data if request_data is not None else None
        read = self._read if isinstance(read_timeout, DefaultValue) else read_timeout
        connect = self._connect if isinstance(connect_timeout, DefaultValue) \
            else connect_timeout
        pool = self._pool if isinstance(pool_timeout, DefaultValue) else pool_timeout
        write = (self._media_write if files else self._write) \
            if isinstance(write_timeout, DefaultValue) else write_timeout
        # aiohttp has no write timeout of its own: sending the request counts against the
        # time allowed for connecting plus writing, reading against the read timeout.
        timeout = aiohttp.ClientTimeout(
            total=None, connect=_sum(pool, connect), sock_connect=connect, sock_read=read)
        body: aiohttp.FormData | BytesPayload | None = None
        if request_data is not None:
            if files:
                form = aiohttp.FormData()
                for name, value in request_data.json_parameters.items():
                    form.add_field(name, value)
                for name, (filename, content, mime) in files.items():
                    form.add_field(name, content, filename=filename, content_type=mime)
                body = form
            else:
                # Encoded here rather than handed over as a dict: aiohttp would build a
                # FormData (with a multipart writer) for every call only to urlencode it.
                body = BytesPayload(request_data.url_encoded_parameters().encode(),
                                    content_type=_FORM)
        # Errors are raised `from None` with the URL cut out of their text: the URL holds the
        # bot token, and a chained aiohttp error (a connect timeout names the URL) would put
        # it in any logged traceback.
        try:
            async with asyncio.timeout(_sum(connect, write, read)):
                async with session.request(method, url, data=body, timeout=timeout,
                                           proxy=self._proxy(url)) as resp:
                    return resp.status, await resp.read()
        except TimeoutError:
            raise TimedOut from None
        except aiohttp.ClientError as err:
            # The class name helps when the message is empty.
            raise NetworkError(
                f"aiohttp.{err.__class__.__name__}: {_without_url(str(err), url)}") from None


def environment_proxy(url: str, proxies: Mapping[str, str]) -> str | None:
    """The proxy the environment names for `url` (`proxies`: urllib's getproxies(), which
    reads HTTP(S)_PROXY), unless NO_PROXY exempts its host. Handed to aiohttp as `proxy=`
    rather than left to its trust_env, which skips an https:// proxy (httpx, PTB's default,
    takes it) and reads ~/.netrc: downloads and calls must go the same way."""
    scheme, host = _scheme_host(url)
    proxy = proxies.get(scheme)
    return None if not proxy or proxy_bypass(host) else proxy


def _scheme_host(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or ""


def _without_url(text: str, url: str) -> str:
    text = text.replace(url, "[url]")
    return _TOKEN_PATH.sub("/bot[token]", text)


_FORM = "application/x-www-form-urlencoded"

# What is left of a URL in another spelling (yarl may quote or reorder it): the token part.
_TOKEN_PATH = re.compile(r"/(?:file/)?bot[^/\s]+")


def _sum(*parts: float | None) -> float | None:
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
