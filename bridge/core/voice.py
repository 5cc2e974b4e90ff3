"""Voice messages: transcribed before their turn, and answers spoken back (`[voice]`).

In: a message with audio (a voice note, an audio file, an audio clip) waits for its
transcript before it joins its chat's queue, and the chat's later messages wait behind it so
the agent reads the chat in order. The agent gets the transcript as the message's text,
marked as a voice message with its length, and the audio file as an attachment; a
transcription that fails or takes longer than voice.timeout leaves the file alone with a note
saying so. The transcript is stored with the message. (A daemon stopped while it transcribes
sends the message on its next start without a transcript.)

Out: with voice.reply = "always", or "to_voice" for a turn that answered a voice message, the
answer's text is spoken and the audio goes with the answer as a voice note; the text is sent
all the same, so nothing is lost when speech fails or takes too long.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from picobridge.agent.filestore import OutboundFiles
from picobridge.contract import Attachment, OutgoingReply, ReplyKind
from picobridge.core.speech import Speaker, Transcriber
from picobridge.store import Store, StoredMessage
from picobridge.supervision import keep

log = logging.getLogger("picobridge.voice")

_MARKUP = re.compile(r"[*_`#>~]+|!?\[([^\]]*)\]\([^)]*\)")


def is_audio(attachment: Attachment) -> bool:
    return attachment.path is not None and (attachment.mime or "").startswith("audio/")


def _length(attachment: Attachment) -> str:
    if attachment.duration is None:
        return ""
    seconds = round(attachment.duration)
    return f", {seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f", {seconds} s"


def heard(attachment: Attachment, transcript: str) -> str:
    return f"[Voice message{_length(attachment)}, transcribed] {transcript}"


def not_heard(attachment: Attachment, why: str) -> str:
    return (f"[Voice message{_length(attachment)}: it could not be transcribed ({why}); the "
            f"audio file {attachment.name} is attached]")


class VoiceInbox:
    def __init__(self, transcriber: Transcriber | None, store: Store,
                 enqueue: Callable[[StoredMessage], None], timeout: float) -> None:
        self._transcriber = transcriber
        self._store = store
        self._enqueue = enqueue
        self._timeout = timeout
        self._tasks: set[asyncio.Task[None]] = set()
        self._last: dict[str, asyncio.Task[None]] = {}  # each chat's latest message held

    def take(self, msg: StoredMessage) -> None:
        """Queue a stored message for its turn, after its transcript where it needs one."""
        key = msg.chat.key
        previous = self._last.get(key)
        wants = self._transcriber is not None and any(is_audio(a) for a in msg.attachments)
        if not wants and previous is None:
            self._enqueue(msg)  # every message without voice, in a chat without any held
            return
        task = keep(self._tasks, self._hold(msg, previous, wants), f"voice-{msg.id}")
        self._last[key] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._last.get(key) is done:
                del self._last[key]

        task.add_done_callback(forget)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _hold(self, msg: StoredMessage, previous: asyncio.Task[None] | None,
                    wants: bool) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        if wants:
            msg = await self._transcribed(msg)
        self._enqueue(msg)

    async def _transcribed(self, msg: StoredMessage) -> StoredMessage:
        lines = [msg.text] if msg.text.strip() else []
        for attachment in msg.attachments:
            if is_audio(attachment):
                lines.append(await self._line(msg, attachment))
        text = "\n\n".join(lines)
        try:
            stored = await self._store.update_text(msg.chat.platform, msg.platform_msg_id, text)
        except Exception as exc:
            log.warning("the transcript of a message in chat=%s is not stored (%s); it goes "
                        "to the agent all the same", msg.chat.key, exc.__class__.__name__)
            stored = None
        return stored if stored is not None else dataclasses.replace(msg, text=text)

    async def _line(self, msg: StoredMessage, attachment: Attachment) -> str:
        assert self._transcriber is not None and attachment.path is not None
        try:
            async with asyncio.timeout(self._timeout):
                transcript = await self._transcriber.transcribe(Path(attachment.path))
        except TimeoutError:
            log.warning("transcribing a voice message in chat=%s took over %gs (voice.timeout);"
                        " the agent gets the file alone", msg.chat.key, self._timeout)
            return not_heard(attachment, f"it took longer than {self._timeout:g} s")
        except Exception as exc:
            log.warning("transcribing a voice message in chat=%s failed: %s; the agent gets "
                        "the file alone", msg.chat.key, exc)
            return not_heard(attachment, "the transcriber failed")
        log.info("voice message in chat=%s transcribed (%d characters)", msg.chat.key,
                 len(transcript))
        return heard(attachment, transcript)


class VoiceOut:
    def __init__(self, speaker: Speaker | None, mode: str, files: OutboundFiles,
                 timeout: float) -> None:
        self._speaker = speaker
        self._mode = mode
        self._files = files
        self._timeout = timeout

    async def spoken(self, messages: Sequence[StoredMessage],
                     reply: OutgoingReply) -> OutgoingReply:
        """The answer with a voice note of its text, where voice.reply asks for one."""
        if self._speaker is None or self._mode == "never" or reply.kind is not ReplyKind.ANSWER:
            return reply
        if self._mode == "to_voice" and not any(
                is_audio(a) for m in messages for a in m.attachments):
            return reply
        words = _MARKUP.sub(lambda m: m.group(1) or "", reply.text).strip()
        if not words:
            return reply
        try:
            async with asyncio.timeout(self._timeout):
                audio = await self._speaker.speak(words)
            voice = await asyncio.to_thread(self._files.keep_bytes, "answer.ogg", audio)
        except TimeoutError:
            log.warning("speaking an answer took over %gs (voice.timeout); the text goes alone",
                        self._timeout)
            return reply
        except Exception as exc:
            log.warning("speaking an answer failed: %s; the text goes alone", exc)
            return reply
        return dataclasses.replace(reply, files=(*reply.files, voice))
