"""A question of the agent asked on the console (`picobridge chat`): the next line answers it,
and piped input waits for the original answer afterwards."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from tests.harness import run_cli, write_config

# Just enough of the RPC protocol to ask one question per prompt that contains "ask".
AGENT = '''
import json, sys
def out(record):
    sys.stdout.write(json.dumps(record) + "\\n")
    sys.stdout.flush()
def end(text):
    out({"type": "agent_end", "messages": [{"role": "assistant", "stopReason": "stop",
         "content": [{"type": "text", "text": text}]}]})
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] in ("get_state", "switch_session", "prompt"):
        out({"id": r["id"], "type": "response", "command": r["type"], "success": True,
             "data": {}})
    if r["type"] == "prompt":
        out({"type": "agent_start"})
        if "ask" in r["message"]:
            out({"type": "extension_ui_request", "id": "ui-1", "method": "select",
                 "title": "Which colour?", "options": ["red", "green"]})
        else:
            end("you said: " + r["message"])
    elif r["type"] == "extension_ui_response":
        end(f"chosen: {r.get('value')} cancelled: {r.get('cancelled', False)}")
'''


async def test_the_next_line_answers_the_agents_question(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(AGENT))
    config = write_config(tmp_path, {
        "state_dir": str(tmp_path / "state"),
        "agent": {"protocol": "prime-rpc", "command": [sys.executable, str(agent)],
                  "ping_interval": 2, "ping_timeout": 5},
    })
    code, out, err = await run_cli("chat", "--config", str(config),
                                   stdin=b"please ask me\n2\nafterwards\n")
    assert code == 0, err[-2000:]
    assert out.splitlines() == [
        "❓ **Which colour?**", "", "1. red", "2. green", "",
        "_Reply with the number of your choice (or cancel)._",
        "✓ Answer sent: green",
        "chosen: green cancelled: False",
        "you said: afterwards",
    ]
