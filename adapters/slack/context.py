"""What was said in a Slack thread before the bot was first mentioned in it.

Someone who @mentions the bot in the middle of a channel thread ("what do you make of
this?") means the thread. The bot was not there for it (it reads channel threads only once
it is part of them), so the first message it gets from such a thread carries the earlier
messages along, marked as context. Fetching is best effort: without the history scope, or
when Slack is slow, the message goes on alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.slack.events import Identity, plain_text, strip_mention, ts_seconds
from picobridge.adapters.slack.send import slack_error

log = logging.getLogger("picobridge.slack")

# The thread's first message plus this many of the latest before the mention.
RECENT_MESSAGES = 20
# Of their text at most this much (the latest kept): context, not an archive.
MAX_CHARS = 8000
# conversations.replies lists a thread oldest first, in pages: up to 1,000 messages are read.
PAGE = 200
MAX_PAGES = 5
# Slack wants the event acknowledged within 3 s, and the message is committed first.
FETCH_TIMEOUT = 1.5
HEADER = "Earlier in this Slack thread (before I was mentioned):"
FOOTER = "The message for you:"


async def thread_context(client: AsyncWebClient, me: Identity, channel: str, thread_ts: str,
                         before_ts: str) -> str:
    """The thread before `before_ts` as a block of text for the agent ('' when none)."""
    before = ts_seconds(before_ts) or 0.0
    first: dict[str, Any] | None = None
    recent: deque[dict[str, Any]] = deque(maxlen=RECENT_MESSAGES)
    try:
        async with asyncio.timeout(FETCH_TIMEOUT):
            # Oldest first, page by page: keep the first message and the latest ones.
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                resp = await client.conversations_replies(
                    channel=channel, ts=thread_ts, latest=before_ts, inclusive=False,
                    limit=PAGE, cursor=cursor)
                for m in resp.get("messages") or ():
                    if not isinstance(m, dict) or (ts_seconds(m.get("ts")) or 0.0) >= before:
                        continue
                    if first is None and m.get("ts") == thread_ts:
                        first = m
                    else:
                        recent.append(m)
                meta = resp.get("response_metadata") or {}
                cursor = meta.get("next_cursor") if isinstance(meta, dict) else None
                if not cursor:
                    break
    except SlackApiError as exc:  # no history scope, not in the channel: go on without
        log.info("earlier messages of thread %s:%s not read: %s", channel, thread_ts,
                 slack_error(exc))
        return ""
    except TimeoutError:
        # Slack was slow: what arrived so far is still worth passing on.
        log.info("earlier messages of thread %s:%s read in part (slow answer)", channel,
                 thread_ts)
    except Exception as exc:
        log.info("earlier messages of thread %s:%s not read: %s", channel, thread_ts,
                 exc.__class__.__name__)
        return ""
    keep = 1 if first is not None else 0  # the first message says what the thread is about
    chosen = [*([first] if first is not None else []), *recent]
    lines = [line for m in chosen if (line := _line(m, me))]
    while len(lines) > keep + 1 and sum(len(line) + 1 for line in lines) > MAX_CHARS:
        lines.pop(keep)  # drop the oldest of the latest
    if not lines:
        return ""
    return "\n".join([HEADER, *lines, "", FOOTER, ""])


def _line(message: dict[str, Any], me: Identity) -> str:
    text = plain_text(strip_mention(str(message.get("text") or ""), me.user_id)).strip()
    if not text:
        return ""
    if len(text) > MAX_CHARS // 2:
        text = text[: MAX_CHARS // 2] + " …"
    user, bot_id = message.get("user"), message.get("bot_id")
    if user == me.user_id or (bot_id is not None and bot_id == me.bot_id):
        who = "you"
    elif isinstance(user, str) and user:
        who = f"<@{user}>"
    else:
        who = str(message.get("username") or bot_id or "someone")
    return f"{who}: {text}"
