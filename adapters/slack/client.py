"""The Slack Web API client picobridge uses, and the start-up identity checks.

Retries: slack-sdk's handlers retry connection errors, wait out 429 for as long as Slack's
Retry-After says and retry 500/503 with backoff, twice each, before an error reaches the
caller (and, for replies, the outbox's own retries). One aiohttp session is shared by all
calls, so they reuse connections.
"""

from __future__ import annotations

import logging
from itertools import islice
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from picobridge.adapters.slack.events import Identity
from picobridge.adapters.slack.send import AUTH_ERRORS, slack_error

if TYPE_CHECKING:
    from picobridge.adapters.slack.settings import SlackAppSettings

log = logging.getLogger("picobridge.slack")

_RECENT = 10_000


class SlackAuthError(Exception):
    """Slack refused a token for good. The message names the setting, never its value."""


class Recent:
    """A bounded set of at least the last `size` handled ids, oldest first (a plain dict
    keeps insertion order; an OrderedDict's links cost twice what its entries do)."""

    def __init__(self, size: int = _RECENT) -> None:
        self._items: dict[str, None] = {}
        self._size = size

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def add(self, item: str | None) -> None:
        if item is None:
            return
        self._items.pop(item, None)  # to the newest end
        self._items[item] = None
        if len(self._items) > self._size + self._size // 16:
            # The oldest go in one sweep: one at a time, each would step over the slots the
            # ones before it left at the dict's start.
            for old in list(islice(self._items, len(self._items) - self._size)):
                del self._items[old]


def web_client(settings: SlackAppSettings, session: aiohttp.ClientSession) -> AsyncWebClient:
    assert settings.bot_token is not None
    base_url = settings.base_url if settings.base_url.endswith("/") else settings.base_url + "/"
    return AsyncWebClient(
        token=settings.bot_token.get_secret_value(), base_url=base_url, session=session,
        timeout=30,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=2),
            AsyncServerErrorRetryHandler(max_retry_count=2),
        ],
    )


async def identify(client: AsyncWebClient) -> tuple[Identity, dict[str, Any]]:
    try:
        resp = await client.auth_test()
    except SlackApiError as exc:
        if slack_error(exc) in AUTH_ERRORS:
            raise SlackAuthError(f"Slack refused the bot token ({slack_error(exc)}); "
                                 "check slack.bot_token (xoxb-…)") from None
        raise
    data = dict(resp.data) if isinstance(resp.data, dict) else {}
    return Identity(str(data["user_id"]), data.get("bot_id"), data.get("team_id")), data


async def check_app_token(client: AsyncWebClient, app_token: str) -> None:
    try:
        await client.apps_connections_open(app_token=app_token)
    except SlackApiError as exc:
        if slack_error(exc) in AUTH_ERRORS:
            raise SlackAuthError(
                f"Slack refused the app-level token ({slack_error(exc)}); check slack.app_token "
                "(xapp-…, with the connections:write scope)") from None
        raise


async def file_info(client: AsyncWebClient, file_id: str) -> dict[str, Any]:
    """files.info for a file shared with only its id (e.g. in Slack Connect)."""
    resp = await client.files_info(file=file_id)
    file = resp.get("file")
    return dict(file) if isinstance(file, dict) else {}


def as_response(client: AsyncWebClient, data: dict[str, Any]) -> Any:
    """auth.test data as the response object bolt's authorization middleware caches."""
    return AsyncSlackResponse(client=client, http_verb="POST", api_url="auth.test",
                              req_args={}, data=data, headers={}, status_code=200)


async def post_ephemeral(client: AsyncWebClient, channel: str, user: str, text: str,
                         thread_ts: str | None) -> None:
    """A note only `user` sees; best effort (the note is a courtesy, nothing waits on it)."""
    try:
        await client.chat_postEphemeral(channel=channel, user=user, text=text,
                                        thread_ts=thread_ts)
    except Exception as exc:
        log.debug("ephemeral note failed: %s", exc.__class__.__name__)


async def respond(client: AsyncWebClient, response_url: str, text: str) -> None:
    """What a slash command has to say after its acknowledgement went, posted to the
    command's response_url (only its user sees it, where the command was typed); over the
    Web API client's connections. Best effort: the URL itself is never logged."""
    # Loaded only when a command answers late: an idle daemon never needs it.
    from slack_sdk.webhook.async_client import AsyncWebhookClient

    try:
        hook = AsyncWebhookClient(response_url, session=client.session, proxy=client.proxy,
                                  ssl=client.ssl, timeout=30, retry_handlers=[
                                      AsyncConnectionErrorRetryHandler(max_retry_count=2),
                                      AsyncServerErrorRetryHandler(max_retry_count=2)])
        answer = await hook.send(text=text, response_type="ephemeral")
    except Exception as exc:
        log.warning("a slash command's answer could not be sent: %s", exc.__class__.__name__)
        return
    if answer.status_code != 200:
        log.warning("a slash command's answer was refused: HTTP %d %s", answer.status_code,
                    answer.body[:100])
