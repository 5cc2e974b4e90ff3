"""Delivering replies to Slack: rendering, splitting, long replies as files, and turning Slack's
failures into the bridge's DeliveryError.

Rate limits are first handled inside slack-sdk (its retry handlers wait out Retry-After and
retry 5xx); only when they give up does a DeliveryError reach the outbox, which retries later.
Because the outbox sends one reply per chat at a time, a retry never overtakes: the order of
replies in a thread stays the order the agent produced them.

A reply that takes several messages may fail half-way. Retrying it must not post the first
half again: the parts go through adapters/common/multipart.py, which records each part that
got through, by outbox id, in the store's cursors (so it holds across a restart).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.common.buttons import Asked
from picobridge.adapters.common.multipart import MultipartSend
from picobridge.adapters.common.partlog import Cursors, PartLog
from picobridge.adapters.slack.buttons import Posted, question_blocks
from picobridge.adapters.slack.events import PLATFORM
from picobridge.adapters.slack.render import SLACK_LIMIT, render_slack
from picobridge.adapters.slack.uploads import files_fingerprint, upload_files
from picobridge.contract import ChatRef, DeliveryError, OutgoingReply, ReplyKind

log = logging.getLogger("picobridge.slack.send")

# Errors that will not go away by retrying the same request.
PERMANENT_ERRORS = frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "msg_too_long", "no_text",
    "invalid_blocks", "invalid_blocks_format", "invalid_arguments", "restricted_action",
    "restricted_action_read_only_channel", "restricted_action_thread_only_channel",
    "restricted_action_non_threadable_channel", "cannot_reply_to_message", "thread_not_found",
    "user_not_in_channel", "missing_scope", "team_access_not_granted", "too_many_attachments",
    "duplicate_channel_not_found", "ekm_access_denied", "as_user_not_supported",
    "message_limit_exceeded", "invalid_auth_for_channel",
})
# The token itself is dead: nothing will be delivered until the operator acts.
AUTH_ERRORS = frozenset({
    "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
    "no_permission", "org_login_required", "not_allowed_token_type",
})

LONG_REPLY_NOTE = "The full answer is long, so it is attached as a file."
EMPTY_REPLY = "_(the agent sent an empty answer)_"


def slack_error(exc: SlackApiError) -> str:
    error = exc.response.get("error") if exc.response is not None else None
    return error if isinstance(error, str) else "unknown_error"


def retry_after(exc: SlackApiError) -> float | None:
    headers = getattr(exc.response, "headers", None) or {}
    for key, value in headers.items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return max(0.0, float(raw))
            except (TypeError, ValueError):
                return None
    return None


def delivery_error(exc: BaseException, on_auth_failure: Callable[[str], None]) -> DeliveryError:
    """Map a slack-sdk or network exception to what the outbox should do with the reply."""
    if isinstance(exc, SlackApiError):
        error = slack_error(exc)
        status = getattr(exc.response, "status_code", 200)
        if status == 429 or error == "ratelimited":
            return DeliveryError("rate limited by Slack", retry_after=retry_after(exc) or 1.0)
        if status >= 500:
            return DeliveryError(f"Slack server error {status} ({error})")
        if error in AUTH_ERRORS:
            on_auth_failure(error)
            return DeliveryError(f"Slack refused the bot token ({error})")
        if error in PERMANENT_ERRORS:
            return DeliveryError(f"Slack refused the message: {error}", permanent=True)
        return DeliveryError(f"Slack error: {error}")
    if isinstance(exc, SlackRequestError):
        return DeliveryError(f"Slack request failed: {exc.__class__.__name__}")
    if isinstance(exc, aiohttp.ClientError | TimeoutError | OSError | SlackClientError):
        return DeliveryError(f"network error talking to Slack: {exc.__class__.__name__}")
    raise exc


@dataclass(slots=True)
class StreamTarget:
    """A message already on screen (a streamed answer) that the final reply should replace."""

    ts: str


class SlackSender:
    def __init__(self, client: AsyncWebClient, cursors: Cursors, *, max_chunks: int,
                 on_auth_failure: Callable[[str], None], limit: int = SLACK_LIMIT,
                 asked: Asked | None = None,
                 on_question: Callable[[str, Posted], None] | None = None,
                 platform: str = PLATFORM) -> None:
        """`asked` remembers the questions sent with buttons (clicks.py reads it);
        `on_question` hears which message carries a question's buttons."""
        self._client = client
        self._asked = asked if asked is not None else Asked()
        self._on_question = on_question
        self._parts = PartLog(cursors, platform)
        self._max_chunks = max_chunks
        self._limit = limit
        self._on_auth_failure = on_auth_failure

    async def send(self, chat: ChatRef, reply: OutgoingReply,
                   stream: StreamTarget | None = None) -> None:
        try:
            if reply.private_to is not None:
                await self._ephemeral(chat, reply.private_to, reply.text)
                return
            await self._send_parts(chat, reply, stream)
        except DeliveryError:
            raise
        except Exception as exc:
            raise delivery_error(exc, self._on_auth_failure) from exc

    async def _ephemeral(self, chat: ChatRef, user: str, text: str) -> None:
        body = "\n".join(render_slack(text, self._limit)) or EMPTY_REPLY
        try:
            await self._client.chat_postEphemeral(channel=chat.chat_id, user=user, text=body,
                                                  thread_ts=chat.thread_id)
        except SlackApiError as exc:
            if slack_error(exc) not in ("user_not_in_channel", "channel_not_found",
                                        "not_in_channel"):
                raise
            # Ephemeral messages need the user in the channel; a plain reply still reaches them.
            await self._post(chat, body)

    async def _send_parts(self, chat: ChatRef, reply: OutgoingReply,
                          stream: StreamTarget | None) -> None:
        """The reply as parts sent in order, each once (also across retries and restarts):
        its text in messages (or as a file when long), then its files in one upload."""
        chunks = render_slack(reply.text, self._limit) or [EMPTY_REPLY]
        parts: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
        comment = None
        if len(chunks) > self._max_chunks:
            parts.append((f"long:{reply.text}", lambda: self._upload(chat, reply.text, stream)))
            if reply.kind is ReplyKind.ANSWER:
                log.info("long reply to %s sent as a file (%d characters)", chat.key,
                         len(reply.text))
        elif reply.files and (not reply.text.strip() or (stream is None and len(chunks) == 1)):
            # Files alone, or with the text as their comment: one message, not two.
            comment = chunks[0] if reply.text.strip() else None
        else:
            parts.extend(self._text_parts(chat, reply, chunks, stream))
        if reply.files:
            parts.append((files_fingerprint(reply.files),
                          lambda: upload_files(self._client, chat, reply.files, comment)))
        sending = await MultipartSend.begin(self._parts, reply.outbox_id, [p[0] for p in parts])
        await sending.run(parts, functools.partial(delivery_error,
                                                   on_auth_failure=self._on_auth_failure))

    def _text_parts(self, chat: ChatRef, reply: OutgoingReply, chunks: list[str],
                    stream: StreamTarget | None) -> list[tuple[str, Callable[[], Awaitable[Any]]]]:
        blocks = None
        if reply.kind is ReplyKind.QUESTION and len(chunks) == 1:
            # A question that fits one message gets its buttons (a longer one is answered by
            # typing, as its text says).
            blocks = question_blocks(reply.text, reply.dialog, self._asked)
        dialog_id = reply.dialog.id if reply.dialog is not None and blocks else None
        return [(text, self._part(chat, text, stream if index == 0 else None, blocks, dialog_id))
                for index, text in enumerate(chunks)]

    def _part(self, chat: ChatRef, text: str, stream: StreamTarget | None,
              blocks: list[dict[str, Any]] | None = None,
              dialog_id: str | None = None) -> Callable[[], Awaitable[Any]]:
        if stream is not None:
            return lambda: self._client.chat_update(channel=chat.chat_id, ts=stream.ts, text=text)
        if blocks is not None and dialog_id is not None:
            return lambda: self._question(chat, text, blocks, dialog_id)
        return lambda: self._post(chat, text, blocks)

    async def _question(self, chat: ChatRef, text: str, blocks: list[dict[str, Any]],
                        dialog_id: str) -> None:
        response = await self._post(chat, text, blocks)
        channel, ts = response.get("channel"), response.get("ts")
        if self._on_question is not None and isinstance(channel, str) and isinstance(ts, str):
            self._on_question(dialog_id, Posted(channel, ts, text, blocks))

    async def _post(self, chat: ChatRef, text: str,
                    blocks: list[dict[str, Any]] | None = None) -> Any:
        return await self._client.chat_postMessage(
            channel=chat.chat_id, text=text, blocks=blocks, thread_ts=chat.thread_id,
            unfurl_links=False, unfurl_media=False)

    async def _upload(self, chat: ChatRef, markdown: str, stream: StreamTarget | None) -> None:
        if stream is not None:
            await self._client.chat_update(channel=chat.chat_id, ts=stream.ts,
                                           text=LONG_REPLY_NOTE)
        await self._client.files_upload_v2(
            channel=chat.chat_id, thread_ts=chat.thread_id, content=markdown.encode("utf-8"),
            filename="reply.md", title="Reply",
            initial_comment=None if stream is not None else LONG_REPLY_NOTE)
