"""Matrix through mautrix-python's client-server API (ClientAPI), embedded in the daemon's
event loop.

mautrix's own Client/Syncer is not used: its sync loop moves on as soon as a batch is
fetched, and the token must only move once the store holds the batch (receive.py). Around
this module: client (sign-in, rate limits), receive + parse (the /sync loop), normalise (which
event is for the agent, pure), intake (events to the bridge), rooms (direct chats, invitations,
encrypted rooms), context (earlier messages on a first mention), files, send + render
(replies), progress (typing, streaming).

Questions of the agent (prime-rpc dialogs) are answered by numbered replies: Matrix has no
buttons, and the question's text says what to type ("1", "yes", "cancel"); the bridge takes
the next message of that chat as the answer, from allowed users only, once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import aiohttp
from mautrix.client import ClientAPI
from mautrix.errors import MatrixConnectionError, MatrixRequestError

from picobridge.adapters.common.attachments import AttachmentPolicy
from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.common.partlog import PartLog
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.matrix.client import (
    Identity,
    SessionStore,
    SignInFailed,
    make_client,
    sign_in,
)
from picobridge.adapters.matrix.files import MatrixFiles
from picobridge.adapters.matrix.intake import RoomIntake
from picobridge.adapters.matrix.normalise import PLATFORM
from picobridge.adapters.matrix.progress import Progress
from picobridge.adapters.matrix.receive import SyncLoop
from picobridge.adapters.matrix.rooms import Rooms
from picobridge.adapters.matrix.send import Sender
from picobridge.contract import (
    Adapter,
    BridgeLink,
    ChatRef,
    DeliveryError,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ReplyKind,
)

if TYPE_CHECKING:
    from picobridge.adapters.matrix.decrypt import Decryptor
    from picobridge.adapters.matrix.e2ee import Encryption
    from picobridge.adapters.matrix.settings import MatrixSettings
    from picobridge.config.settings import Settings

log = logging.getLogger("picobridge.matrix")

MAIN_LOOP = "matrix-sync"
# Events the bot sent in this run, so a reply to one needs no lookup.
RECENT_SENT = 2048


def _quiet_library_logs() -> None:
    # mautrix logs each request with its body (users' messages) at DEBUG.
    for name in ("mau", "mautrix"):
        logging.getLogger(name).setLevel(logging.INFO)


class MatrixAdapter(Adapter):
    platform = PLATFORM

    def __init__(self, settings: Settings) -> None:
        self._settings: MatrixSettings = settings.section(PLATFORM)
        self._state_dir = settings.state_dir
        self._policy = AttachmentPolicy(settings.attachments, settings.media_dir)
        self._typing_cap = settings.agent.turn_timeout + 60
        self._bridge: BridgeLink | None = None
        self._session: aiohttp.ClientSession | None = None
        self._client: ClientAPI | None = None
        self._me: Identity | None = None
        self._rooms: Rooms | None = None
        self._sender: Sender | None = None
        self._progress: Progress | None = None
        self._sync: SyncLoop | None = None
        self._e2ee: Encryption | None = None
        self._sent: dict[str, None] = {}
        self._tasks = TaskSet(log)
        self._running = False
        _quiet_library_logs()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, bridge: BridgeLink) -> None:
        self._bridge = bridge
        self._session = aiohttp.ClientSession()
        self._client = make_client(self._settings, self._session)
        bridge.keep_running(MAIN_LOOP, self._run)
        self._running = True
        self._tasks.spawn(self._policy.cleanup_forever(), name="matrix-media-cleanup")

    async def _run(self) -> None:
        if self._sync is None and not await self._set_up():
            await asyncio.Event().wait()  # refused for good: the daemon is stopping
        assert self._sync is not None
        await self._sync.run()

    async def _set_up(self) -> bool:
        bridge, client, s = self._bridge, self._client, self._settings
        assert bridge is not None and client is not None
        me = await self._signed_in(bridge, client)
        if me is None:
            return False
        self._me = me
        decryptor = None
        if s.e2ee:
            decryptor = await self._encryption(bridge, client)
            if decryptor is None:
                return False
        rooms = self._rooms = Rooms(client, bridge, s, me.user_id)
        sender = self._sender = Sender(
            client, PartLog(bridge, PLATFORM), max_chunks=s.max_chunks,
            reaction=s.reaction_done, on_revoked=self._revoked, direct=rooms.direct,
            sent=self._remember)
        self._progress = Progress(client, sender.put, stream=s.stream,
                                  typing_cap=self._typing_cap)
        intake = RoomIntake(client, bridge, s, me, rooms, MatrixFiles(client, self._policy),
                            sender.notice, self._sent.__contains__, decryptor)
        self._sync = SyncLoop(client, bridge, intake, rooms, me.user_id,
                              timeout=s.sync_timeout,
                              fatal=lambda reason: bridge.fatal(PLATFORM, reason),
                              connected=lambda up: bridge.connection_changed(PLATFORM, up),
                              crypto=self._e2ee.take if self._e2ee is not None else None)
        log.info("signed in to Matrix as %s (device %s)", me.user_id, me.device_id)
        return True

    async def _signed_in(self, bridge: BridgeLink, client: ClientAPI) -> Identity | None:
        backoff = Backoff()
        store = SessionStore(self._state_dir) if self._settings.access_token is None else None
        while True:
            try:
                return await sign_in(client, self._settings, store)
            except SignInFailed as exc:
                bridge.fatal(PLATFORM, f"Matrix sign-in failed: {exc}")
                return None
            except (MatrixRequestError, MatrixConnectionError, aiohttp.ClientError,
                    TimeoutError) as exc:
                log.warning("cannot reach the homeserver (%s); retrying in %.0fs",
                            exc.__class__.__name__, backoff.delay)
                await backoff.wait()

    async def _encryption(self, bridge: BridgeLink, client: ClientAPI) -> Decryptor | None:
        """matrix.e2ee: the crypto store opened and the device's keys on the homeserver."""
        from mautrix.client import Client

        from picobridge.adapters.matrix.decrypt import Decryptor
        from picobridge.adapters.matrix.e2ee import Encryption, EncryptionUnavailable

        assert isinstance(client, Client)
        backoff = Backoff()
        try:
            if self._e2ee is None:
                self._e2ee = await Encryption.open(client, self._state_dir)
            while True:
                try:
                    await self._e2ee.start()
                    break
                except (MatrixConnectionError, aiohttp.ClientError, TimeoutError) as exc:
                    log.warning("cannot reach the homeserver to set up encryption (%s); "
                                "retrying in %.0fs", exc.__class__.__name__, backoff.delay)
                    await backoff.wait()
        except (EncryptionUnavailable, MatrixRequestError) as exc:
            bridge.fatal(PLATFORM, f"Matrix end-to-end encryption cannot start: {exc}")
            return None
        return Decryptor(self._e2ee.machine, self._settings.e2ee_key_wait)

    def _remember(self, event_id: str) -> None:
        self._sent[event_id] = None
        if len(self._sent) > RECENT_SENT:
            del self._sent[next(iter(self._sent))]

    def _revoked(self) -> None:
        if self._bridge is not None:
            self._bridge.fatal(PLATFORM, "the homeserver refused the access token "
                                         "(M_UNKNOWN_TOKEN); set a current one")

    async def stop(self) -> None:
        if self._running and self._bridge is not None:
            self._running = False
            await self._bridge.stop_running(MAIN_LOOP)
        if self._sync is not None:
            await self._sync.close()
        if self._progress is not None:
            await self._progress.close()
        await self._tasks.close()
        if self._e2ee is not None:
            await self._e2ee.close()
            self._e2ee = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._bridge is not None:
            self._bridge.connection_changed(PLATFORM, False)

    def connected(self) -> bool:
        return self._sync is not None and self._sync.connected

    async def verify(self) -> str:
        async with aiohttp.ClientSession() as session:
            client = make_client(self._settings, session)
            store = SessionStore(self._state_dir) if self._settings.access_token is None \
                else None
            me = await sign_in(client, self._settings, store)
            e2ee = ", end-to-end encryption on" if self._settings.e2ee else ""
            return f"signed in as {me.user_id} (device {me.device_id}) on " \
                   f"{self._settings.homeserver}{e2ee}"

    # -- outbound ----------------------------------------------------------------------------

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        if self._sender is None or self._progress is None:
            raise DeliveryError("Matrix is not connected yet")
        edit = None
        if self._settings.stream and reply.kind is ReplyKind.ANSWER:
            edit = await self._progress.take_draft(chat, reply)
        with self._progress.settling(reply):
            await self._sender.send(chat, reply, edit=edit)

    async def show_progress(self, chat: ChatRef, event: ProgressEvent) -> None:
        if self._progress is not None and self._rooms is not None:
            direct = (self._rooms.state(chat.chat_id).members or 3) <= 2
            self._progress.event(chat, event, direct)

    async def clear_progress(self, chat: ChatRef, outcome: Outcome) -> None:
        if self._progress is not None:
            self._progress.clear(chat, outcome)
