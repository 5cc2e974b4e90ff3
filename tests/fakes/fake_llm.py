"""A stand-in OpenAI-compatible chat-completions server for the real pi coding agent.

Streams answers as server-sent events the way the OpenAI API does (`stream: true`, with
`stream_options.include_usage`). What it answers, from the last user message:
- "RUN <command>": a `bash` tool call running <command>; after the tool result comes back,
  "ran: <the tool's output>".
- "READ <path>": a `read` tool call of <path>; after the tool result comes back, "read: <the
  tool's text>" (an image the tool returns is described by its parts' types).
- "What did I just say?": "You said: <the user message before this one>" (from the history
  the agent sends, so it shows what the agent remembered).
- anything else: "you said: <message>".
Scriptable faults, the fake servers' own vocabulary (tests/fakes/server.py) on the one method
"chat.completions": `fail_next(times=n, status=500)` answers the next n requests with an HTTP
error in OpenAI's shape, `stall_next()` holds the next request unanswered until `release()`
(or until the client goes away: a killed agent), `disconnect_next()` drops its connection.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from aiohttp import web

from tests.fakes.server import FakeServer, Fault

JSON = dict[str, Any]
METHOD = "chat.completions"


def _text(message: JSON) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def answer_for(messages: list[JSON]) -> tuple[str, JSON | None]:
    """(text, tool call or None) for the conversation so far."""
    last = messages[-1] if messages else {}
    users = [_text(m) for m in messages if m.get("role") == "user"]
    said = users[-1] if users else ""
    tools = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    if tools and tools[-1] >= len(messages) - 2:
        asked = [_text(m) for m in messages[:tools[-1]] if m.get("role") == "user"]
        if asked and asked[-1].startswith("READ "):
            # pi hands an image a tool read to the model as a user message after the result.
            parts = [p.get("type") for m in messages[tools[-1] + 1:]
                     if isinstance(m.get("content"), list) for p in m["content"]
                     if isinstance(p, dict)]
            return f"read: {_text(messages[tools[-1]]).strip()} {parts}".strip(), None
    if last.get("role") == "tool":
        return f"ran: {_text(last).strip()}", None
    if said.startswith("RUN "):
        return "", {"name": "bash", "arguments": json.dumps({"command": said[4:]})}
    if said.startswith("READ "):
        return "", {"name": "read", "arguments": json.dumps({"path": said[5:]})}
    if said.strip().lower().rstrip("?") == "what did i just say":
        return (f"You said: {users[-2]}" if len(users) > 1 else "You said nothing yet."), None
    return f"you said: {said}", None


class FakeLLM(FakeServer):
    """POST /v1/chat/completions, streamed."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[JSON] = []
        self._ids = itertools.count(1)

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    def fail_next(self, method: str = METHOD, status: int = 500, *, times: int | None = 1,
                  error: str | None = None, retry_after: int | None = None,
                  extra: JSON | None = None, body: bytes | None = None) -> None:
        super().fail_next(method, status, times=times, error=error, retry_after=retry_after,
                          extra=extra, body=body)

    def stall_next(self, method: str = METHOD, times: int | None = 1) -> None:
        super().stall_next(method, times)

    def disconnect_next(self, method: str = METHOD, times: int | None = 1) -> None:
        super().disconnect_next(method, times)

    def error_envelope(self, fault: Fault) -> tuple[JSON, dict[str, str]]:
        return {"error": {"message": fault.error or "The server had an error",
                          "type": "server_error"}}, {}

    def user_messages(self, request: JSON) -> list[str]:
        """The user messages of one request, oldest first (what the agent remembered)."""
        return [_text(m) for m in request.get("messages", []) if m.get("role") == "user"]

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._completions)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.notify()
        refused = await self.guard(METHOD, request)
        if refused is not None:
            return refused
        text, tool = answer_for(body.get("messages", []))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        ident = f"chatcmpl-fake{next(self._ids)}"
        for delta, finish in _deltas(text, tool, ident):
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": 0,
                     "model": body.get("model", "fake-model"),
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await asyncio.sleep(0)
        usage = {"id": ident, "object": "chat.completion.chunk", "created": 0,
                 "model": body.get("model", "fake-model"), "choices": [],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        await response.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        await response.write_eof()
        return response


def _deltas(text: str, tool: JSON | None, ident: str) -> list[tuple[JSON, str | None]]:
    out: list[tuple[JSON, str | None]] = [({"role": "assistant", "content": ""}, None)]
    if tool is not None:
        call = {"index": 0, "id": f"call_{ident}", "type": "function",
                "function": {"name": tool["name"], "arguments": ""}}
        out.append(({"tool_calls": [call]}, None))
        args = tool["arguments"]
        for i in range(0, len(args), 12):
            out.append(({"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 12]}}]},
                        None))
        out.append(({}, "tool_calls"))
        return out
    for i in range(0, len(text), 6):
        out.append(({"content": text[i:i + 6]}, None))
    out.append(({}, "stop"))
    return out
