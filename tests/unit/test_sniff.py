from __future__ import annotations

from pathlib import Path

import pytest

from picobridge.contract import agent_image_type, sniff_file, sniff_mime

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


@pytest.mark.parametrize(("head", "mime"), [
    (PNG, "image/png"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
    (b"GIF89a\x01\x00", "image/gif"),
    (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
    (b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio/wav"),
    (b"%PDF-1.7\n", "application/pdf"),
    (b"OggS\x00\x02", "audio/ogg"),
    (b"\x00\x00\x00\x18ftypmp42", "video/mp4"),
    (b"\x00\x00\x00\x18ftypM4A ", "audio/mp4"),
    (b"hello, world", None),
    (b"", None),
    (b"RIFF", None),
])
def test_bytes_say_what_they_are(head: bytes, mime: str | None) -> None:
    assert sniff_mime(head) == mime


def test_only_formats_models_take_are_agent_images() -> None:
    assert agent_image_type(PNG) == "image/png"
    assert agent_image_type(b"%PDF-1.4") is None
    assert agent_image_type(b"<svg xmlns='http://www.w3.org/2000/svg'/>") is None


def test_a_file_is_sniffed_from_its_head_and_a_missing_one_is_unknown(tmp_path: Path) -> None:
    picture = tmp_path / "p.dat"
    picture.write_bytes(PNG + b"\x00" * 1000)
    assert sniff_file(picture) == "image/png"
    assert sniff_file(tmp_path / "missing") is None
