"""The console as a chat platform, for `picobridge chat`: same bridge, store and agent,
no platform tokens.

With a pipe on stdin each line is one message and the next line is sent only once the previous
one is answered, so a scripted conversation reads like a real one. At a terminal, lines are
sent as typed (and coalesce while the agent works, as chats do).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import threading
import time
from typing import IO, TYPE_CHECKING, Any

from picobridge.adapters.registry import CONSOLE
from picobridge.contract import (
    Adapter,
    BridgeLink,
    ChatRef,
    Dialog,
    DialogAnswer,
    InboundMessage,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
    SubmitResult,
)

if TYPE_CHECKING:
    pass

CONSOLE_CHAT = ChatRef(CONSOLE, "local")


class ConsoleAdapter(Adapter):
    platform = "console"

    def __init__(self, stdin: IO[bytes], stdout: IO[str], stderr: IO[str], *,
                 interactive: bool) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._stderr = stderr
        self._interactive = interactive
        self._user = _user_name()
        self._run_id = f"{int(time.time() * 1000)}-{os.getpid()}"
        self._answered: dict[str, asyncio.Future[None]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.input_done = asyncio.Event()
        self.reply_printed = asyncio.Event()
        self._asking = asyncio.Event()
        self._bridge: BridgeLink | None = None
        self._last_dialog: Dialog | None = None
        # Set by `picobridge chat` once the agent is up, so the first /status is truthful and
        # a broken agent command is reported instead of waited on.
        self.may_read = asyncio.Event()

    async def start(self, bridge: BridgeLink) -> None:
        self._bridge = bridge
        self._reader = asyncio.create_task(self._read(bridge), name="console-reader")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        text = reply.text
        if reply.kind is ReplyKind.UNSOLICITED and self._interactive:
            text = f"(later) {text}"
        self._stdout.write(text + "\n")
        for file in reply.files:
            # The bridge's stored copy: where a person at the console finds the file.
            self._stdout.write(f"📎 {file.name} ({file.mime}, {file.size} bytes): {file.path}\n")
        self._stdout.flush()
        for message_id in reply.answers:
            future = self._answered.pop(message_id, None)
            if future is not None and not future.done():
                future.set_result(None)
        if reply.kind is ReplyKind.QUESTION:
            self._asking.set()  # the next line read is the answer
            self._last_dialog = reply.dialog
            if self.input_done.is_set() and reply.dialog is not None:
                # The input has ended: nobody is left to answer, so the agent need not wait.
                await self._cancel(reply.dialog)
        self.reply_printed.set()

    async def show_progress(self, chat: ChatRef, event: ProgressEvent) -> None:
        if self._interactive and event.kind is ProgressKind.STARTED:
            self._stderr.write("… working\n")
            self._stderr.flush()

    async def clear_progress(self, chat: ChatRef, outcome: Outcome) -> None:
        return None

    async def _read(self, bridge: BridgeLink) -> None:
        await self.may_read.wait()
        lines = _lines_in_thread(self._stdin)
        count = 0
        outstanding: list[asyncio.Future[None]] = []
        try:
            while True:
                if self._interactive:
                    self._stderr.write("> ")
                    self._stderr.flush()
                raw = await lines.get()
                if raw is None:
                    if self._last_dialog is not None:
                        await self._cancel(self._last_dialog)  # nobody left to answer it
                    break
                text = raw.decode("utf-8", "replace").rstrip("\r")
                if not text.strip():
                    continue
                count += 1
                message_id = f"{self._run_id}-{count}"
                waiter = asyncio.get_running_loop().create_future()
                self._answered[message_id] = waiter
                result = await bridge.submit(InboundMessage(
                    chat=CONSOLE_CHAT, sender_id=self._user, sender_name=self._user,
                    text=text, platform_message_id=message_id, chat_kind="private"))
                if result is not SubmitResult.ACCEPTED and result is not SubmitResult.COMMAND:
                    self._answered.pop(message_id, None)
                elif not self._interactive:
                    outstanding.append(waiter)
                    await self._until_answered_or_asked(outstanding)
        finally:
            self.input_done.set()

    async def _cancel(self, dialog: Dialog) -> None:
        if self._bridge is not None:
            await self._bridge.answer_dialog(dialog.id, CONSOLE_CHAT, self._user,
                                             DialogAnswer(cancelled=True))

    async def _until_answered_or_asked(self, outstanding: list[asyncio.Future[None]]) -> None:
        """Piped input: the next line waits for the answers to the earlier ones, unless the
        agent asks a question meanwhile, which the next line answers."""
        while True:
            outstanding[:] = [f for f in outstanding if not f.done()]
            if not outstanding:
                return
            asked: asyncio.Future[Any] = asyncio.ensure_future(self._asking.wait())
            waits: list[asyncio.Future[Any]] = [*outstanding, asked]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                asked.cancel()
            if self._asking.is_set():
                self._asking.clear()
                return


def _lines_in_thread(stream: IO[bytes]) -> asyncio.Queue[bytes | None]:
    """Read lines in a daemon thread: stdin may be a regular file, which asyncio cannot poll,
    and a blocked terminal read must not keep the process alive at exit.

    The thread reads the file descriptor itself (os.read), never the buffered stdin object:
    a daemon thread blocked inside a buffered read holds that object's lock, and the
    interpreter aborts at exit ("_enter_buffered_busy") when it finds it held.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    fd = stream.fileno()

    def put(item: bytes | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def pump() -> None:
        pending = b""
        try:
            while chunk := os.read(fd, 65536):
                # Split on b"\n" only, never on U+2028.
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    put(line)
        except OSError:
            pass
        finally:
            if pending:
                put(pending)
            put(None)

    threading.Thread(target=pump, name="console-stdin", daemon=True).start()
    return queue


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "console"
