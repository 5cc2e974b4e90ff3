"""Files an agent sends: how its answer names them (`MEDIA:` lines, Markdown images, picobot's
`attachments`), what the bridge keeps of them and what it withholds, and what type they are."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from picobridge.agent.filestore import NO_FILES, OutboundFiles
from picobridge.agent.outfiles import files_in_record, files_in_text
from picobridge.contract import OGG_OPUS, OutboundFile, OutgoingReply, file_type
from tests.e2e.media_support import OPUS, PDF, PNG

WORK = Path("/work/dir")


def test_media_lines_and_local_images_leave_the_text_in_order() -> None:
    text, files = files_in_text(
        "Here.\nMEDIA: out/a.pdf\n  MEDIA:   `/abs/b c.txt`  \nSee ![the chart](c.png) and "
        "![web](https://example.org/x.png) ![data](data:image/png;base64,AA==).\n"
        "![pic](<d e.jpg> \"title\")\nEnd.", WORK)
    assert [(f.name, f.path, f.caption) for f in files] == [
        ("a.pdf", "/work/dir/out/a.pdf", ""), ("b c.txt", "/abs/b c.txt", ""),
        ("c.png", "/work/dir/c.png", "the chart"), ("d e.jpg", "/work/dir/d e.jpg", "pic")]
    assert text == ("Here.\nSee  and ![web](https://example.org/x.png) "
                    "![data](data:image/png;base64,AA==).\nEnd.")


def test_code_blocks_and_lines_that_only_mention_media_are_text() -> None:
    answer = ("```\nMEDIA: a.png\n![x](b.png)\n```\n~~~~\n```\nMEDIA: c.png\n~~~~\n"
              "Use a MEDIA: line to send a file.\nMEDIA:")
    assert files_in_text(answer, WORK) == (answer, ())


def test_picobot_attachments_by_path_and_content() -> None:
    files = files_in_record([
        {"name": "chart.png", "path": "out/chart.png"}, {"name": "notes.md", "content": "hi"},
        {"path": "/tmp/x.bin"}, {"name": "broken"}, "junk"], WORK)
    assert [(f.name, f.path, f.content) for f in files] == [
        ("chart.png", "/work/dir/out/chart.png", None), ("notes.md", "", "hi"),
        ("x.bin", "/tmp/x.bin", None), ("broken", "", None)]
    assert files_in_record(None, WORK) == ()


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path, OutboundFiles]:
    work, store = tmp_path / "work", tmp_path / "state" / "media" / "outbound"
    work.mkdir()
    return work, store, OutboundFiles(store, [work], max_bytes=len(PDF))


def test_allowed_files_are_kept_under_state_dir_and_typed_by_their_bytes(
        folders: tuple[Path, Path, OutboundFiles]) -> None:
    work, store, files = folders
    (work / "chart.jpg").write_bytes(PNG)  # the name lies; the bytes do not
    (work / "voice.ogg").write_bytes(OPUS)
    reply = files.stage(OutgoingReply("text", files=(
        OutboundFile("chart.jpg", str(work / "chart.jpg"), caption="c"),
        OutboundFile("notes.md", content="# hi"),
        OutboundFile("voice.ogg", str(work / "voice.ogg")))))
    assert reply.text == "text"
    assert [(f.name, f.mime, f.size, f.caption) for f in reply.files] == [
        ("chart.jpg", "image/png", len(PNG), "c"), ("notes.md", "text/markdown", 4, ""),
        ("voice.ogg", OGG_OPUS, len(OPUS), "")]
    for file in reply.files:
        assert Path(file.path).is_relative_to(store)
    with (work / "voice.ogg").open("r+b") as same:  # the next answer's file, written over
        same.truncate(0)
        same.write(b"next")
    (work / "chart.jpg").unlink()  # the agent cleans up: the kept copies stay
    assert Path(reply.files[0].path).read_bytes() == PNG
    assert Path(reply.files[2].path).read_bytes() == OPUS


def test_files_outside_the_allowed_folders_missing_or_too_large_are_notes(
        folders: tuple[Path, Path, OutboundFiles], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    work, store, files = folders
    (tmp_path / "secret").write_text("no")
    os.symlink(tmp_path / "secret", work / "link")
    (work / "big.pdf").write_bytes(PDF + b"x")
    (work / "sub").mkdir()
    with caplog.at_level(logging.WARNING, logger="picobridge.files"):
        reply = files.stage(OutgoingReply("Answer.", files=tuple(
            OutboundFile(Path(p).name, p) for p in (
                "/etc/passwd", str(work / ".." / "secret"), str(work / "link"),
                str(work / "gone.png"), str(work / "big.pdf"), str(work / "sub"), ""))))
    assert reply.files == ()
    assert reply.text.splitlines() == [
        "Answer.", "",
        "📎 passwd was not sent: withheld (not in a folder the bridge sends files from)",
        "📎 secret was not sent: withheld (not in a folder the bridge sends files from)",
        "📎 link was not sent: withheld (not in a folder the bridge sends files from)",
        "📎 gone.png was not sent: the file was not found",
        f"📎 big.pdf was not sent: it is {len(PDF) + 1:,} bytes, "
        f"over the limit of {len(PDF):,} bytes",
        "📎 sub was not sent: withheld (not a regular file)",
        "📎 file was not sent: the agent named no file"]
    assert "outside attachments.outbound_dirs" in caplog.text
    assert str(tmp_path / "secret") in caplog.text
    assert not store.exists() or not any(store.rglob("*.pdf"))


def test_without_a_store_files_are_notes() -> None:
    reply = NO_FILES.stage(OutgoingReply("x", files=(OutboundFile("a.png", "/a.png"),)))
    assert reply.files == () and "a.png was not sent" in reply.text


@pytest.mark.parametrize(("head", "name", "mime"), [
    (PNG, "x.jpg", "image/png"), (PDF, "x.txt", "application/pdf"), (OPUS, "", OGG_OPUS),
    (b"OggS\x00\x02" + b"\x00" * 40, "a.ogg", "audio/ogg"), (b"a,b\n1,2\n", "t.csv", "text/csv"),
    (b"plain words", "x.png", "text/plain"), (b"\x00\x01\x02", "x.png",
                                              "application/octet-stream"),
    ("é".encode() * 40, "", "text/plain"),
])
def test_a_files_type_is_what_its_bytes_say(head: bytes, name: str, mime: str) -> None:
    assert file_type(head, name) == mime


def test_the_kept_copies_are_private(folders: tuple[Path, Path, OutboundFiles]) -> None:
    work, _, files = folders
    (work / "a.pdf").write_bytes(PDF)
    old = os.umask(0)
    try:
        (kept,) = files.stage(OutgoingReply("x", files=(
            OutboundFile("a.pdf", str(work / "a.pdf")),))).files
        spoken = files.keep_bytes("answer.ogg", OPUS)
    finally:
        os.umask(old)
    for path in (Path(kept.path), Path(spoken.path)):
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
