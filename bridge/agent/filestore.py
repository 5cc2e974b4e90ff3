"""The files of an agent's reply, checked and kept under state_dir the moment the answer is read.

Only a file inside `attachments.outbound_dirs` (symlinks resolved first) is sent: an agent
talked into naming /etc/passwd, `../../` or a symlink out of its workdir sends nothing. A file
that is withheld, missing or too large becomes a short note in the reply's text (the log says
why); the rest of the reply goes as it is, never lost over one file.

The bridge's copy is what the platform gets, so the agent may delete its file as soon as it
answered, and a reply stored before a crash still has its files after the restart. It is made
while the answer's line is read, before anything else is written to the agent (the worker
calls `stage` before it hands the answer on). Copies live in
`<state_dir>/media/outbound/`, one folder per reply, and go with the other saved media after
`attachments.retention_days`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from picobridge.contract import (
    HEAD_BYTES,
    OutboundFile,
    OutgoingReply,
    file_type,
    human_size,
    safe_name,
)
from picobridge.private import FILE_MODE, private_dir

log = logging.getLogger("picobridge.files")


class FileStage(Protocol):
    def stage(self, reply: OutgoingReply) -> OutgoingReply:
        """The reply with its files stored under state_dir (notes for those left out)."""
        ...


class _NoFiles:
    """Where nothing is configured to store files (unit tests): every file an agent names is
    left out with a note, never sent from where the agent keeps it."""

    def stage(self, reply: OutgoingReply) -> OutgoingReply:
        if not reply.files:
            return reply
        notes = "\n".join(f"📎 {safe_name(f.name)} was not sent: files are off"
                          for f in reply.files)
        return dataclasses.replace(reply, text=f"{reply.text.rstrip()}\n\n{notes}".strip(),
                                   files=())


NO_FILES: FileStage = _NoFiles()


class Withheld(Exception):
    """The file is not sent; the message is the chat's note."""


def _keep(source: Path, target: Path) -> None:
    # A copy, not a hard link: an agent that writes its next chart.png over this one (same
    # file, truncated) must not change a reply still waiting to be sent. Not copy2 either:
    # the copy's age, which retention counts, is the reply's. (copyfile uses sendfile(2):
    # a file at the 50 MB limit takes tens of milliseconds.)
    shutil.copyfile(source, target)
    os.chmod(target, FILE_MODE)


class OutboundFiles:
    def __init__(self, store_dir: Path, allowed: Sequence[Path], max_bytes: int) -> None:
        self._store_dir = store_dir
        self._allowed = tuple(allowed)
        self._max_bytes = max_bytes

    def stage(self, reply: OutgoingReply) -> OutgoingReply:
        """The reply with its files kept under state_dir, and a note for each left out."""
        if not reply.files:
            return reply
        folder = self._store_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
        stored: list[OutboundFile] = []
        notes: list[str] = []
        for number, file in enumerate(reply.files):
            display = safe_name(file.name)
            try:
                stored.append(self._copy(file, display, folder / f"{number:02d}-{display}"))
            except Withheld as exc:
                notes.append(f"📎 {display} was not sent: {exc}")
        text = reply.text
        if notes:
            text = "\n\n".join(part for part in (text.rstrip(), "\n".join(notes)) if part)
        return dataclasses.replace(reply, text=text, files=tuple(stored))

    def keep_bytes(self, name: str, data: bytes) -> OutboundFile:
        """A file the bridge made itself (a spoken answer), kept like an agent's."""
        display = safe_name(name)
        folder = self._store_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
        target = private_dir(folder) / display
        target.write_bytes(data)
        os.chmod(target, FILE_MODE)
        return OutboundFile(name=display, path=str(target), mime=file_type(data[:HEAD_BYTES],
                                                                          display),
                            size=len(data))

    def _allowed_dirs(self) -> list[Path]:
        dirs = []
        for folder in self._allowed:
            try:
                dirs.append(folder.resolve(strict=True))
            except OSError:
                continue  # a folder that does not exist holds no files
        return dirs

    def _source(self, file: OutboundFile, display: str) -> Path:
        if not file.path:
            log.warning("agent file %r withheld: the agent gave no path or content", display)
            raise Withheld("the agent named no file")
        try:
            source = Path(file.path).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            log.warning("agent file %s not sent: %s", file.path,
                        getattr(exc, "strerror", None) or exc.__class__.__name__)
            raise Withheld("the file was not found") from None
        if not any(source.is_relative_to(folder) for folder in self._allowed_dirs()):
            log.warning("agent file %s withheld: %s is outside attachments.outbound_dirs (%s)",
                        file.path, source, ", ".join(str(d) for d in self._allowed))
            raise Withheld("withheld (not in a folder the bridge sends files from)")
        if not source.is_file():
            log.warning("agent file %s withheld: not a regular file", source)
            raise Withheld("withheld (not a regular file)")
        size = source.stat().st_size
        if size > self._max_bytes:
            log.warning("agent file %s withheld: %d bytes, over attachments.outbound_max_bytes",
                        source, size)
            raise Withheld(f"it is {human_size(size)}, "
                           f"over the limit of {human_size(self._max_bytes)}")
        return source

    def _copy(self, file: OutboundFile, display: str, target: Path) -> OutboundFile:
        source = self._source(file, display) if file.content is None else None
        try:
            private_dir(target.parent)
            if source is None:
                data = (file.content or "").encode("utf-8", "replace")
                target.write_bytes(data)
                os.chmod(target, FILE_MODE)
                head = data[:HEAD_BYTES]
            else:
                _keep(source, target)
                with target.open("rb") as fh:
                    head = fh.read(HEAD_BYTES)
        except OSError as exc:
            # A full disk, say: the reply still goes, without this file.
            log.warning("agent file %s could not be stored as %s: %s", source or display,
                        target, exc.strerror or exc.__class__.__name__)
            raise Withheld("it could not be stored") from None
        return OutboundFile(name=display, path=str(target), mime=file_type(head, display),
                            size=target.stat().st_size, caption=file.caption)
