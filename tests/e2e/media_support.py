"""Shared pieces of the end-to-end tests of files agents send: sample files whose bytes say
what they are, the agent's workdir, and the fake picobot's scripted replies (`#reply=NAME`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from picobridge.cli.echo_agent import small_png
from tests.fakes.fake_speech import OPUS_HEAD

PNG = small_png()
PNG_2 = small_png(20, 10)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(256)) * 8
PDF = b"%PDF-1.7\n" + b"0123456789" * 300 + b"\n%%EOF\n"
# An Ogg page whose first packet is Opus's identification header: a voice note.
OPUS = OPUS_HEAD + b"\x00" * 300
MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" * 200


def workspace(tmp: Path) -> Path:
    """The agent's working directory under base_config (state_dir/workspace)."""
    folder = tmp / "state" / "workspace"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def put(tmp: Path, name: str, data: bytes) -> Path:
    """A file the agent wrote in its workdir."""
    path = workspace(tmp) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def script_reply(tmp: Path, name: str, content: str,
                 attachments: list[dict[str, Any]] | None = None,
                 delete_after: list[Path] | None = None, hold_until: Path | None = None) -> str:
    """What the fake agent answers to a message holding the returned directive."""
    folder = tmp / "agent" / "replies"
    folder.mkdir(parents=True, exist_ok=True)
    script: dict[str, Any] = {"content": content}
    if attachments is not None:
        script["attachments"] = attachments
    if delete_after:
        script["delete_after"] = [str(p) for p in delete_after]
    if hold_until is not None:
        script["hold_until"] = str(hold_until)
    (folder / f"{name}.json").write_text(json.dumps(script), encoding="utf-8")
    return f"#reply={name}"
