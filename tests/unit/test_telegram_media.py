"""Which Bot API call sends each file of a reply, and where the reply's text goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from picobridge.adapters.telegram.media import (
    PHOTO_MAX,
    UPLOAD_MAX,
    MediaStep,
    NoteStep,
    caption_for,
    media_steps,
)
from picobridge.adapters.telegram.send import plan_reply
from picobridge.contract import OGG_OPUS, OutboundFile, OutgoingReply


@pytest.fixture
def there(tmp_path: Path) -> Path:
    (tmp_path / "f").write_bytes(b"x")
    return tmp_path / "f"


def file(there: Path, name: str, mime: str, size: int = 100) -> OutboundFile:
    return OutboundFile(name, str(there), mime, size)


def test_each_kind_of_file_takes_its_method_and_photos_in_a_row_are_albums(there: Path) -> None:
    photos = [file(there, f"p{n}.png", "image/png") for n in range(12)]
    steps = media_steps((*photos, file(there, "v.ogg", OGG_OPUS),
                         file(there, "s.mp3", "audio/mpeg"), file(there, "big.png", "image/png",
                                                                  PHOTO_MAX + 1),
                         file(there, "d.pdf", "application/pdf"),
                         file(there, "one.jpg", "image/jpeg")), None)
    assert [(s.method, len(s.files)) for s in steps if isinstance(s, MediaStep)] == [
        ("album", 10), ("album", 2), ("voice", 1), ("audio", 1), ("document", 1),
        ("document", 1), ("photo", 1)]


def test_a_file_over_what_a_bot_may_upload_or_gone_is_a_note(there: Path) -> None:
    steps = media_steps((file(there, "huge.bin", "application/zip", UPLOAD_MAX + 1),
                         OutboundFile("gone.png", str(there.parent / "gone"), "image/png", 1)),
                        None)
    assert steps == [
        NoteStep("📎 huge.bin was not sent: it is 50 MB, and Telegram takes files up to 50 MB "
                 "from a bot."),
        NoteStep("📎 gone.png was not sent: the file is no longer there.")]


def test_the_text_is_the_first_files_caption_when_it_fits(there: Path) -> None:
    files = (file(there, "a.png", "image/png"), file(there, "b.pdf", "application/pdf"))
    short = plan_reply(OutgoingReply("**Here**", files=files), 5)
    assert [type(s).__name__ for s in short] == ["MediaStep", "MediaStep"]
    first = short[0]
    assert isinstance(first, MediaStep) and first.caption is not None
    assert first.caption.text == "Here" and first.caption.entities
    long = plan_reply(OutgoingReply("word " * 300, files=files), 5)
    assert [type(s).__name__ for s in long] == ["TextStep", "MediaStep", "MediaStep"]
    assert all(s.caption is None for s in long if isinstance(s, MediaStep))
    alone = plan_reply(OutgoingReply("", files=files), 5)
    assert [type(s).__name__ for s in alone] == ["MediaStep", "MediaStep"]
    assert caption_for("x" * 1025) is None and caption_for("x" * 1024) is not None
