"""Voice end to end on Telegram: voice notes transcribed before their turn by a command or an
OpenAI-compatible server, a failing and a hanging transcriber (the agent gets the file with a
note, the user an answer, the chat's order kept), and answers spoken back as voice notes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.e2e.media_support import OPUS
from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config
from tests.fakes.fake_speech import OPUS_HEAD, FakeSpeech
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon

CLI = str(Path(__file__).resolve().parent.parent / "fakes" / "fake_speech_cli.py")
SPOKEN = OPUS + b"SAID:hello from the voice note"
KEY = "sk-test-transcribe-3f9a7c1d5e"


def transcribe(*flags: str) -> list[str]:
    return [sys.executable, CLI, "transcribe", "{path}", *flags]


def voice_config(tmp: Path, fake: FakeTelegram, **voice: Any) -> Path:
    return telegram_config(tmp, fake, sections={"voice": voice})


async def test_a_voice_note_reaches_the_agent_as_its_transcript(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = voice_config(tmp_path, fake, transcribe_command=transcribe())
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_voice(USER, USER, SPOKEN, duration=7)
            await reply_containing(fake, USER, "hello from the voice note")
    (message,) = AgentJournal(tmp_path / "agent").messages()
    assert message["content"] == (f"[Voice message, 7 s, transcribed] transcript of "
                                  f"{len(SPOKEN)} bytes: hello from the voice note")
    (attachment,) = message["attachments"]
    path = Path(attachment["content"].split("saved to ", 1)[1].split("\n", 1)[0])
    assert path.read_bytes() == SPOKEN  # noqa: ASYNC240 (a test's check, nothing waits)


async def test_an_openai_compatible_server_transcribes_with_its_key(tmp_path: Path) -> None:
    async with FakeSpeech(api_key=KEY) as speech, FakeTelegram() as fake:
        speech.transcripts[SPOKEN] = "what is on my calendar today"
        config = voice_config(tmp_path, fake, transcribe_url=speech.transcriptions_url,
                              transcribe_api_key=KEY, transcribe_model="whisper-large")
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_voice(USER, USER, SPOKEN, duration=65, caption="about this")
            await reply_containing(fake, USER, "what is on my calendar today")
            log = daemon.log
    (sent,) = speech.transcriptions
    assert sent.data == SPOKEN and sent.model == "whisper-large"
    (message,) = AgentJournal(tmp_path / "agent").messages()
    assert message["content"] == ("about this\n\n[Voice message, 1:05, transcribed] what is on "
                                  "my calendar today")
    assert KEY not in log


async def test_a_failing_or_hanging_transcriber_sends_the_file_with_a_note(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = voice_config(tmp_path, fake, transcribe_command=transcribe("--hang"),
                              timeout=1)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_voice(USER, USER, SPOKEN, duration=4)
            # Written while the voice note is held: it must not overtake it.
            fake.user_message(USER, USER, "and a typed one")
            await reply_containing(fake, USER, "echo: and a typed one")
            log = daemon.log
        config = voice_config(tmp_path, fake, transcribe_command=transcribe("--fail"))
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_voice(USER, USER, SPOKEN, duration=2)
            await reply_containing(fake, USER, "the transcriber failed")
            failed_log = daemon.log
    hung, typed, failed = AgentJournal(tmp_path / "agent").messages()
    assert hung["content"].startswith(
        "[Voice message, 4 s: it could not be transcribed (it took longer than 1 s); the audio "
        "file voice-")
    assert len(hung["attachments"]) == 1
    assert typed["content"] == "and a typed one"
    assert failed["content"].startswith(
        "[Voice message, 2 s: it could not be transcribed (the transcriber failed)")
    assert "voice.timeout" in log
    assert "exited with 2: model file not found" in failed_log
    texts = fake.texts(USER)
    assert texts.index(next(t for t in texts if "took longer" in t)) < texts.index(
        "echo: and a typed one")


async def test_an_answer_to_a_voice_note_is_spoken_back(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = voice_config(tmp_path, fake, transcribe_command=transcribe(),
                              tts_command=[sys.executable, CLI, "tts", "{in}", "{out}"],
                              reply="to_voice")
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_voice(USER, USER, SPOKEN, duration=3)
            voice = await fake.wait_for(lambda: next(
                (m for m in fake.sent_messages(USER) if m.kind == "voice"), None),
                "a voice note")
            fake.user_message(USER, USER, "typed, so answered in text")
            await reply_containing(fake, USER, "echo: typed, so answered in text")
    assert voice.file is not None and voice.file.data.startswith(OPUS_HEAD)
    spoken = voice.file.data[len(OPUS_HEAD):].decode()
    assert "hello from the voice note" in spoken
    # The text comes as well (the voice note's caption), so nothing is lost without sound.
    assert "hello from the voice note" in (voice.caption or "")
    assert [m.kind for m in fake.sent_messages(USER)] == ["voice", "text"]


async def test_always_spoken_through_an_openai_compatible_server(tmp_path: Path) -> None:
    async with FakeSpeech(api_key=KEY) as speech, FakeTelegram() as fake:
        config = voice_config(tmp_path, fake, tts_url=speech.speech_url, tts_api_key=KEY,
                              tts_voice="nova", reply="always")
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "say **this** aloud")
            voice = await fake.wait_for(lambda: next(
                (m for m in fake.sent_messages(USER) if m.kind == "voice"), None),
                "a voice note")
            speech.fail_next("speech", 500)
            fake.user_message(USER, USER, "and this, while speech is down")
            await reply_containing(fake, USER, "echo: and this, while speech is down")
            log = daemon.log
    (request, *_) = speech.spoken
    assert request["voice"] == "nova" and request["response_format"] == "opus"
    assert request["input"] == "echo: say this aloud"  # spoken without the Markdown
    assert voice.file is not None
    assert voice.file.data == OPUS_HEAD + b"echo: say this aloud"
    assert [m.kind for m in fake.sent_messages(USER)] == ["voice", "text"]
    assert "speaking an answer failed: HTTP 500" in log and KEY not in log
