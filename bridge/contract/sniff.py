"""What a file is, judged by its first bytes rather than by the name or type its sender gave it.

A sender's label is a claim: a text file labelled image/png, handed to a model as an image,
makes every model call of that chat fail. The bridge (images for an agent) and the adapters
(the type of a file they upload) both ask here, so the answer is the same on both sides.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

# Enough bytes for every signature below (WebP's sits at offset 8..11, an Ogg stream's codec
# name at 28..35).
HEAD_BYTES = 64
OCTET_STREAM = "application/octet-stream"
# What `file_type` calls Ogg holding Opus audio: what platforms play as a voice note.
OGG_OPUS = "audio/ogg; codecs=opus"

# What models take as images: the formats both agent protocols accept.
AGENT_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_PREFIXES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"fLaC", "audio/flac"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
)


def sniff_mime(head: bytes) -> str | None:
    """The media type the bytes say, or None when they match no known signature."""
    for prefix, mime in _PREFIXES:
        if head.startswith(prefix):
            return mime
    if head[:4] == b"RIFF" and len(head) >= 12:
        kind = head[8:12]
        if kind == b"WEBP":
            return "image/webp"
        if kind == b"WAVE":
            return "audio/wav"
    if head[4:8] == b"ftyp":  # ISO base media: mp4, m4a, mov, heic
        return "audio/mp4" if head[8:11] == b"M4A" else "video/mp4"
    return None


def sniff_file(path: str | Path) -> str | None:
    """`sniff_mime` of a file's first bytes; None also when it cannot be read."""
    try:
        with open(path, "rb") as file:
            return sniff_mime(file.read(HEAD_BYTES))
    except OSError:
        return None


def agent_image_type(head: bytes) -> str | None:
    """The image type to give an agent, or None: then the file goes as a file."""
    mime = sniff_mime(head)
    return mime if mime in AGENT_IMAGE_TYPES else None


def ogg_opus(head: bytes) -> bool:
    """Whether the bytes open an Ogg stream of Opus audio: what a platform plays as a voice
    note (the first page holds the codec's identification header)."""
    return head[:4] == b"OggS" and b"OpusHead" in head[:HEAD_BYTES]


def _text(head: bytes) -> bool:
    if not head or b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut off by the end of the head is still text.
        return exc.reason == "unexpected end of data" and exc.start >= len(head) - 3
    return True


def file_type(head: bytes, name: str = "") -> str:
    """A file's type for a platform, always one: what the bytes say; for text, or bytes that
    say nothing, the name's type where it is more precise (Markdown, CSV, JSON; never an
    image a name alone cannot make); else text/plain or application/octet-stream."""
    found = sniff_mime(head)
    if found == "audio/ogg" and ogg_opus(head):
        return OGG_OPUS
    if found is not None:
        return found
    guessed = mimetypes.guess_type(name, strict=False)[0] if name else None
    if _text(head):
        if guessed and (guessed.startswith("text/") or guessed.endswith(
                ("json", "xml", "yaml", "toml", "javascript"))):
            return guessed
        return "text/plain"
    if guessed and not guessed.startswith(("image/", "audio/", "video/", "text/")):
        return guessed
    return OCTET_STREAM
