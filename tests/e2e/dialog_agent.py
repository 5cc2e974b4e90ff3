"""Just enough of prime-agent's RPC mode to ask the person a question, for the dialog tests.

A prompt containing "confirm" asks a confirm, "select" a select of red / green / blue,
"input" an input; any other prompt is echoed ("you said: ..."). The answer the agent got
(the extension_ui_response without its type and id) ends the turn as
"got: {...}" (JSON, keys sorted), so a test reads exactly what reached the agent.

Run as a script: `python dialog_agent.py`.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

QUESTIONS: dict[str, dict[str, Any]] = {
    "confirm": {"method": "confirm", "title": "Deploy now?",
                "message": "This restarts the service."},
    "select": {"method": "select", "title": "Which colour?",
               "options": ["red", "green", "blue"]},
    "input": {"method": "input", "title": "Your name?", "placeholder": "a name"},
}


def out(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def end(text: str) -> None:
    out({"type": "agent_end", "messages": [{"role": "assistant", "stopReason": "stop",
                                            "content": [{"type": "text", "text": text}]}]})


def main() -> None:
    numbers = itertools.count(1)
    for line in sys.stdin:
        record = json.loads(line)
        kind = record.get("type")
        if kind in ("get_state", "switch_session", "prompt", "abort"):
            out({"id": record.get("id"), "type": "response", "command": kind, "success": True,
                 "data": {}})
        if kind == "prompt":
            out({"type": "agent_start"})
            asked = next((q for word, q in QUESTIONS.items() if word in record["message"]),
                         None)
            if asked is None:
                end("you said: " + record["message"])
            else:
                out({"type": "extension_ui_request", "id": f"ui-{next(numbers)}", **asked})
        elif kind == "extension_ui_response":
            got = {k: v for k, v in record.items() if k not in ("type", "id")}
            end("got: " + json.dumps(got, sort_keys=True))


if __name__ == "__main__":
    main()
