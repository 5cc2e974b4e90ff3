#!/usr/bin/env python3
"""Stand-ins for speech commands (stdlib only), as `[voice]` runs them:

- ``fake_speech_cli.py transcribe PATH``: prints "transcript of <n> bytes: <the file's first
  line, when it is text>" like whisper.cpp prints a transcript; ``--fail`` exits 2 with a
  line on stderr, ``--hang`` never answers.
- ``fake_speech_cli.py tts IN OUT``: writes an Ogg/Opus header followed by IN's text to OUT.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

OPUS_HEAD = (b"OggS\x00\x02" + b"\x00" * 20 + b"\x01\x13" + b"OpusHead\x01\x01\x38\x01"
             + b"\x80\xbb\x00\x00\x00\x00\x00")


def main(argv: list[str]) -> int:
    if argv[0] == "transcribe":
        if "--hang" in argv:
            time.sleep(3600)
        if "--fail" in argv:
            print("model file not found", file=sys.stderr)
            return 2
        data = Path(argv[1]).read_bytes()
        said = data.rsplit(b"SAID:", 1)[-1].decode("utf-8", "replace") if b"SAID:" in data \
            else ""
        print(f"transcript of {len(data)} bytes: {said}".strip())
        return 0
    if argv[0] == "tts":
        text = Path(argv[1]).read_text(encoding="utf-8")
        Path(argv[2]).write_bytes(OPUS_HEAD + text.encode("utf-8"))
        return 0
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
