"""The files an agent names in its answer, the same for every protocol: a line that is exactly
`MEDIA: <path>` (the convention OpenClaw- and Hermes-style agents use) and a Markdown image
`![caption](path)` whose target is a local file. Both leave the text; a relative path is the
agent's workdir's. Code blocks are left alone: a line there is an example, not a file.

Nothing is checked here (the core decides what may be sent and stores it); a driver only
says which files the agent meant.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from picobridge.contract import OutboundFile

log = logging.getLogger("picobridge.agent")

_MEDIA_LINE = re.compile(r"[ \t]*MEDIA:[ \t]*(\S(?:.*\S)?)[ \t]*")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([ \t]*(<[^>\n]+>|[^)\s]+)(?:[ \t]+\"[^\"\n]*\")?[ \t]*\)")
_FENCE = re.compile(r"[ ]{0,3}(`{3,}|~{3,})")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _unquote(target: str) -> str:
    target = target.strip()
    if len(target) >= 2 and target[0] + target[-1] in ("<>", "``", '""', "''"):
        target = target[1:-1].strip()
    return target.removeprefix("file://")


def _local(target: str) -> bool:
    """Whether an image target names a file here rather than a web address (or data: URI)."""
    return bool(target) and not target.startswith("#") and (
        target.startswith("/") or _URL.match(target) is None)


def _file(target: str, workdir: Path, caption: str = "") -> OutboundFile:
    path = Path(target)
    if not path.is_absolute():
        path = workdir / path
    return OutboundFile(name=path.name or "file", path=str(path), caption=caption)


def _images(line: str, workdir: Path, found: list[OutboundFile]) -> str:
    def take(match: re.Match[str]) -> str:
        target = _unquote(match.group(2))
        if not _local(target):
            return match.group(0)
        found.append(_file(target, workdir, match.group(1).strip()))
        return ""

    return _IMAGE.sub(take, line)


def files_in_text(text: str, workdir: Path) -> tuple[str, tuple[OutboundFile, ...]]:
    """The answer's text without the files it names, and those files in order."""
    if "MEDIA:" not in text and "![" not in text:
        return text, ()  # the common case, on every answer's path
    found: list[OutboundFile] = []
    kept: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        opener = _FENCE.match(line)
        if fence is not None:
            if opener is not None and opener.group(1)[0] == fence[0] \
                    and len(opener.group(1)) >= len(fence) and not line[opener.end():].strip():
                fence = None
            kept.append(line)
            continue
        if opener is not None:
            fence = opener.group(1)
            kept.append(line)
            continue
        media = _MEDIA_LINE.fullmatch(line.rstrip("\r"))
        if media is not None:
            found.append(_file(_unquote(media.group(1)), workdir))
            continue
        if "![" in line:
            stripped = _images(line, workdir, found)
            if stripped != line and not stripped.strip():
                continue
            line = stripped
        kept.append(line)
    return ("\n".join(kept).strip() if found else text), tuple(found)


def files_in_record(items: Any, workdir: Path) -> tuple[OutboundFile, ...]:
    """picobot's `attachments` of a response: `{"name", "path"}` or `{"name", "content"}`,
    the shape of the attachments it receives. An entry of neither shape is kept as a file
    without a path, so the chat hears a file was missing rather than nothing."""
    if not isinstance(items, list):
        if items is not None:
            log.warning("agent response attachments are not a list; ignored")
        return ()
    files = []
    for item in items:
        if not isinstance(item, dict):
            log.warning("agent response attachment is not an object; ignored")
            continue
        name, path, content = item.get("name"), item.get("path"), item.get("content")
        if isinstance(content, str):
            files.append(OutboundFile(name=name if isinstance(name, str) and name else "file.txt",
                                      content=content))
            continue
        if isinstance(path, str) and path:
            found = _file(path, workdir)
            files.append(OutboundFile(name=name if isinstance(name, str) and name
                                      else found.name, path=found.path))
            continue
        files.append(OutboundFile(name=name if isinstance(name, str) and name else "file"))
    return tuple(files)
