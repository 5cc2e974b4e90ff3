"""Speech services: transcribing a voice message and speaking an answer, each through a command
(e.g. whisper.cpp's CLI, piper) or an OpenAI-compatible HTTP endpoint (a local whisper or TTS
server, or a hosted one). Chosen by `[voice]`; the callers bound every call by voice.timeout.

A key is sent as a Bearer token and never named in an error or a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Protocol

import aiohttp

from picobridge.config.sections import VoiceSettings


class SpeechError(Exception):
    """The service did not give a usable answer; the message says why, without secrets."""


class Transcriber(Protocol):
    async def transcribe(self, path: Path) -> str:
        """The text spoken in the audio file."""
        ...


class Speaker(Protocol):
    async def speak(self, text: str) -> bytes:
        """The text as audio (Ogg/Opus where the service can)."""
        ...


async def _run(argv: list[str]) -> bytes:
    """Run a command to its end; its stdout. Killed (with what it started) when cancelled."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise SpeechError(f"cannot run {argv[0]!r}: {exc.strerror}") from None
    try:
        out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
    if proc.returncode != 0:
        last = err.decode("utf-8", "replace").strip().rsplit("\n", 1)[-1][:200]
        raise SpeechError(f"{Path(argv[0]).name} exited with {proc.returncode}"
                          + (f": {last}" if last else ""))
    return out


class CommandTranscriber:
    def __init__(self, argv: list[str]) -> None:
        self._argv = argv

    async def transcribe(self, path: Path) -> str:
        out = await _run([arg.replace("{path}", str(path)) for arg in self._argv])
        text = out.decode("utf-8", "replace").strip()
        if not text:
            raise SpeechError("the transcriber printed nothing")
        return text


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


async def _refused(response: aiohttp.ClientResponse) -> SpeechError:
    body = (await response.text(errors="replace"))[:200].strip()
    return SpeechError(f"HTTP {response.status}" + (f": {body}" if body else ""))


class HttpTranscriber:
    def __init__(self, url: str, key: str | None, model: str) -> None:
        self._url, self._key, self._model = url, key, model

    async def transcribe(self, path: Path) -> str:
        data = aiohttp.FormData()
        data.add_field("model", self._model)
        data.add_field("file", await asyncio.to_thread(path.read_bytes), filename=path.name)
        try:
            async with aiohttp.ClientSession() as session, session.post(
                    self._url, data=data, headers=_headers(self._key)) as response:
                if response.status != 200:
                    raise await _refused(response)
                body = await response.json(content_type=None)
        except aiohttp.ClientError as exc:
            raise SpeechError(f"transcription service unreachable ({type(exc).__name__})"
                              ) from None
        except ValueError:
            raise SpeechError("the transcription service's answer is not JSON") from None
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise SpeechError("the transcription service gave no text")
        return text.strip()


class CommandSpeaker:
    def __init__(self, argv: list[str]) -> None:
        self._argv = argv

    async def speak(self, text: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="picobridge-tts-") as folder:
            source, target = Path(folder) / "answer.txt", Path(folder) / "answer.ogg"
            source.write_text(text, encoding="utf-8")
            await _run([arg.replace("{in}", str(source)).replace("{out}", str(target))
                        for arg in self._argv])
            try:
                audio = target.read_bytes()
            except OSError:
                raise SpeechError("the speech command wrote no {out} file") from None
        if not audio:
            raise SpeechError("the speech command wrote an empty file")
        return audio


class HttpSpeaker:
    def __init__(self, url: str, key: str | None, model: str, voice: str) -> None:
        self._url, self._key, self._model, self._voice = url, key, model, voice

    async def speak(self, text: str) -> bytes:
        body = {"model": self._model, "input": text, "voice": self._voice,
                "response_format": "opus"}
        try:
            async with aiohttp.ClientSession() as session, session.post(
                    self._url, json=body, headers=_headers(self._key)) as response:
                if response.status != 200:
                    raise await _refused(response)
                audio = await response.read()
        except aiohttp.ClientError as exc:
            raise SpeechError(f"speech service unreachable ({type(exc).__name__})") from None
        if not audio:
            raise SpeechError("the speech service sent no audio")
        return audio


def transcriber(settings: VoiceSettings) -> Transcriber | None:
    if settings.transcribe_command:
        return CommandTranscriber(list(settings.transcribe_command))
    if settings.transcribe_url:
        key = settings.transcribe_api_key
        return HttpTranscriber(settings.transcribe_url,
                               key.get_secret_value() if key else None, settings.transcribe_model)
    return None


def speaker(settings: VoiceSettings) -> Speaker | None:
    if settings.tts_command:
        return CommandSpeaker(list(settings.tts_command))
    if settings.tts_url:
        key = settings.tts_api_key
        return HttpSpeaker(settings.tts_url, key.get_secret_value() if key else None,
                           settings.tts_model, settings.tts_voice)
    return None
