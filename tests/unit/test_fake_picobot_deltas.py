"""tests/fakes/fake_picobot.py --delta-chars: answers streamed as many tiny text_deltas."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_fake_picobot import Fake, _kind

pytestmark = pytest.mark.timeout(60)


async def test_answer_streams_in_deltas_of_the_given_size(tmp_path: Path) -> None:
    fake = await Fake.start(tmp_path / "state", "--delta-chars", "1")
    try:
        assert (await fake.next_line()).record == {"type": "ready"}
        await fake.message("stream it #huge=5000")
        lines = await fake.until(lambda r: _kind(r) == "response", within=30)
        deltas = [line.record["text"] for line in lines
                  if _kind(line.record) == "progress" and line.record["event"] == "text_delta"]
        answer = lines[-1].record["content"]
        assert len(answer) == 5000
        assert len(deltas) == 5000 and {len(d) for d in deltas} == {1}
        assert "".join(deltas) == answer
    finally:
        await fake.close()


async def test_without_the_flag_an_answer_streams_in_three_deltas(tmp_path: Path) -> None:
    fake = await Fake.start(tmp_path / "state")
    try:
        assert (await fake.next_line()).record == {"type": "ready"}
        await fake.message("hello there")
        lines = await fake.until(lambda r: _kind(r) == "response")
        deltas = [line.record["text"] for line in lines
                  if _kind(line.record) == "progress" and line.record["event"] == "text_delta"]
        assert "".join(deltas) == "echo: hello there"
        assert len(deltas) == 3
    finally:
        await fake.close()
