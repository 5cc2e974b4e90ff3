"""A stand-in OpenAI-compatible speech server: POST /v1/audio/transcriptions (multipart: `file`,
`model`; answers {"text": ...}) and POST /v1/audio/speech (JSON: `model`, `input`, `voice`,
`response_format`; answers the audio bytes). Strict where the service is: a key is required
when one is set, the file and the model must be there, `input` must be text.

What it answers: a transcription is `transcripts[<the file's bytes>]` when the test set one,
else "heard <n> bytes"; speech is an Ogg/Opus header followed by the input's UTF-8 bytes, so a
test can tell what was spoken. Faults: the shared vocabulary (tests/fakes/server.py) on the
methods "transcriptions" and "speech".
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from tests.fakes.server import JSON, Call, FakeServer, Fault

TRANSCRIPTIONS = "transcriptions"
SPEECH = "speech"
OPUS_HEAD = (b"OggS\x00\x02" + b"\x00" * 20 + b"\x01\x13" + b"OpusHead\x01\x01\x38\x01"
             + b"\x80\xbb\x00\x00\x00\x00\x00")


@dataclass
class Transcription:
    data: bytes
    filename: str | None
    model: str


class FakeSpeech(FakeServer):
    def __init__(self, api_key: str | None = None) -> None:
        super().__init__()
        self.api_key = api_key
        self.transcripts: dict[bytes, str] = {}
        self.transcriptions: list[Transcription] = []
        self.spoken: list[JSON] = []

    @property
    def transcriptions_url(self) -> str:
        return f"{self.url}/v1/audio/transcriptions"

    @property
    def speech_url(self) -> str:
        return f"{self.url}/v1/audio/speech"

    def error_envelope(self, fault: Fault) -> tuple[JSON, dict[str, str]]:
        return {"error": {"message": fault.error or "The server had an error",
                          "type": "server_error"}}, {}

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speak)

    def _refused(self, request: web.Request) -> web.Response | None:
        if self.api_key is not None and request.headers.get("Authorization") != \
                f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "Incorrect API key provided",
                                                "type": "invalid_request_error"}}, status=401)
        return None

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        call = self.record(Call(TRANSCRIPTIONS, {}))
        refused = self._refused(request) or await self.guard(TRANSCRIPTIONS, request, call)
        if refused is not None:
            return refused
        form = await request.post()
        upload, model = form.get("file"), form.get("model")
        if not isinstance(upload, web.FileField) or not isinstance(model, str) or not model:
            return web.json_response({"error": {"message": "file and model are required",
                                                "type": "invalid_request_error"}}, status=400)
        data = upload.file.read()
        self.transcriptions.append(Transcription(data, upload.filename, model))
        self.notify()
        return web.json_response({"text": self.transcripts.get(data,
                                                               f"heard {len(data)} bytes")})

    async def _speak(self, request: web.Request) -> web.StreamResponse:
        call = self.record(Call(SPEECH, {}))
        refused = self._refused(request) or await self.guard(SPEECH, request, call)
        if refused is not None:
            return refused
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("input"), str) \
                or not body.get("model"):
            return web.json_response({"error": {"message": "model and input are required",
                                                "type": "invalid_request_error"}}, status=400)
        self.spoken.append(body)
        self.notify()
        return web.Response(body=OPUS_HEAD + body["input"].encode("utf-8"),
                            content_type="audio/ogg")
