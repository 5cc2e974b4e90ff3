"""The soak's explanation of an out-of-order chat names the stage that broke the order."""

from __future__ import annotations

from pathlib import Path

from picobridge.contract import ChatRef, InboundMessage, OutgoingReply
from picobridge.store import Store
from tests.reliability.soak_stages import first_appearances, stage_report


async def test_an_answer_stored_out_of_order_is_named_as_that_stage(tmp_path: Path) -> None:
    db = tmp_path / "soak.db"
    store = await Store.open(db)
    chat = ChatRef("telegram", "710020")
    try:
        stored = []
        for n in (35, 36, 37):
            message = await store.record_inbound(InboundMessage(
                chat=chat, sender_id="710020", text=f"c20 m{n:03d}",
                platform_message_id=f"710020:{n}"))
            assert message is not None
            stored.append(message)
        for settles in ([stored[0]], [stored[2]], [stored[1]]):
            await store.add_reply(chat, OutgoingReply(f"echo: {settles[0].text}"),
                                  settles=settles)
    finally:
        await store.close()
    delivered = first_appearances([[35], [37], [36]])
    lines = stage_report(db, chat.key, delivered, [100.0], clock_offset=0.0)
    assert lines[0].startswith(f"{chat.key}: intake in order; answers as stored out of order "
                               "(37 before 36); delivered out of order (37 before 36)")
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "message 1 m035", "message 2 m036", "message 3 m037",
        "reply 1 answers [35]", "reply 2 answers [37]", "reply 3 answers [36]"]
