"""`picobridge failed list|retry|drop`: messages that failed for good and replies that could
not be delivered. Retry writes a request a running daemon takes up within a second (or the
next start does); drop works at once. Safe beside a running daemon."""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from picobridge import exit_codes
from picobridge.cli.common import CliError, open_existing_store, open_store_for_writing, when

if TYPE_CHECKING:
    from picobridge.cli.invocation import Invocation
    from picobridge.config.settings import Settings
    from picobridge.store import Store

_ID = re.compile(r"([mr])(\d+)")
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_item(value: str) -> tuple[str, int]:
    match = _ID.fullmatch(value.strip())
    if match is None:
        raise CliError(f"expected an id from `picobridge failed list` (m12 for a message, r7 "
                       f"for a reply), got {value!r}", exit_codes.USAGE)
    return ("message" if match.group(1) == "m" else "reply"), int(match.group(2))


def parse_age(value: str) -> float:
    match = _AGE.fullmatch(value.strip())
    if match is None:
        raise CliError(f"expected an age like 7d, 12h or 30m, got {value!r}", exit_codes.USAGE)
    return float(match.group(1)) * _SECONDS[match.group(2)]


def failed_command(invocation: Invocation) -> int:
    return asyncio.run(failed(invocation.settings(), invocation.args, invocation.argv))


async def failed(settings: Settings, args: argparse.Namespace, argv: Sequence[str]) -> int:
    if args.action == "list":
        found = await open_existing_store(settings, argv)
        if found is None:
            print("nothing failed (no database yet)")
            return exit_codes.OK
        return await _closing(found, _list(found))
    store = await open_store_for_writing(settings, argv)
    if args.action == "retry":
        return await _closing(store, _retry(store, args.ids, args.all))
    return await _closing(store, _drop(store, args.ids, args.older_than))


async def _closing(store: Store, work: Coroutine[Any, Any, int]) -> int:
    try:
        return await work
    finally:
        await store.close()


async def _list(store: Store) -> int:
    letters = await store.dead_letters()
    if not letters:
        print("nothing failed")
    for letter in letters:
        retry = " (retry requested)" if letter.retry_requested else ""
        print(f"{letter.label}\t{letter.kind}\t{letter.chat_key}\t{when(letter.at)}\t"
              f"{letter.why or '-'}{retry}\t{letter.preview}")
    return exit_codes.OK


async def _items(store: Store, ids: Sequence[str], every: bool) -> list[tuple[str, int]]:
    if every == bool(ids):
        raise CliError("give the ids to act on, or --all (not both)", exit_codes.USAGE)
    if every:
        return [(letter.kind, letter.id) for letter in await store.dead_letters()]
    return [parse_item(i) for i in ids]


async def _retry(store: Store, ids: Sequence[str], every: bool) -> int:
    items = await _items(store, ids, every)
    count = await store.request_retry(items)
    print(f"{count} to retry: a running daemon takes them up within a second, otherwise the "
          "next start does")
    return exit_codes.OK if count or every else exit_codes.FAILURE


async def _drop(store: Store, ids: Sequence[str], older_than: str | None) -> int:
    if bool(ids) == (older_than is not None):
        raise CliError("give the ids to drop, or --older-than AGE (not both)",
                       exit_codes.USAGE)
    if older_than is not None:
        count = await store.drop_dead(older_than=time.time() - parse_age(older_than))
    else:
        count = await store.drop_dead([parse_item(i) for i in ids])
    print(f"{count} dropped")
    return exit_codes.OK if count or older_than is not None else exit_codes.FAILURE
