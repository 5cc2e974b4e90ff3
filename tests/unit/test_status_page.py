"""The status page's HTML from plain values: states and figures a person reads, every value
escaped, and nothing when there is nothing."""

from __future__ import annotations

import re

from picobridge.core.stats import Delivery, OutboxStats
from picobridge.ops.health import HealthSnapshot, WorkerHealth
from picobridge.ops.status_page import ChatLabels, render

NOW = 1_800_000_000.0


def snapshot(*workers: WorkerHealth, **platforms: bool) -> HealthSnapshot:
    return HealthSnapshot(workers=workers, platforms=platforms, queue_depth=3, in_flight=1,
                          outbox_pending=2, oldest_undelivered_age_seconds=75.4)


def test_a_struggling_bridge_says_why() -> None:
    snap = snapshot(WorkerHealth("w1", "ready", 10, NOW - 5, 0, busy=1),
                    WorkerHealth("w2", "stopped", None, None, 7, down_seconds=900),
                    telegram=False)
    outbox = OutboxStats(sent={"telegram": 4}, failed={"telegram": 1},
                         recent=(Delivery(NOW - 30, "telegram:42", True),
                                 Delivery(NOW - 10, "telegram:<b>x</b>", False)))
    labels = ChatLabels(b"k" * 32)
    page = render(snap, outbox, now=NOW, label=labels)
    assert '<span class="verdict unhealthy">unhealthy</span>' in page
    assert "<li>telegram disconnected</li>" in page and "worker w2 is stopped" in page
    assert '<td>w1</td><td class="state"><span class="ready">ready</span></td><td>1</td>' in page
    assert "<td>5 s ago</td>" in page and "<td>never</td>" in page
    assert "<b>3</b>queue depth" in page and "<b>75 s</b>oldest unanswered" in page
    # Newest first, as a keyed hash: no user or chat id, and nothing of it as markup.
    assert page.index(labels("telegram:<b>x</b>")) < page.index(labels("telegram:42"))
    assert re.fullmatch(r"telegram:[0-9a-f]{10}", labels("telegram:42"))
    assert "42<" not in page and ":42" not in page
    assert '<span class="failed">failed</span>' in page and "<b>x</b>" not in page


def test_chat_labels_are_stable_for_a_key_and_differ_across_keys() -> None:
    one, other = ChatLabels(b"a" * 32), ChatLabels(b"b" * 32)
    assert one("telegram:4242") == one("telegram:4242") != one("telegram:4343")
    assert one("telegram:4242") != other("telegram:4242")
    assert one("slack:D0123:1700000000.1").startswith("slack:")


def test_a_snapshot_that_could_not_be_taken() -> None:
    page = render("no snapshot within 5s", OutboxStats(), now=NOW)
    assert "unhealthy" in page and "no snapshot within 5s" in page
    assert "Recent deliveries" not in page


def test_a_quiet_bridge() -> None:
    page = render(snapshot(WorkerHealth("w1", "ready", 10, NOW, 0)), OutboxStats(), now=NOW)
    assert '<span class="verdict ok">ok</span>' in page
    assert "No platform is enabled." in page and "Nothing delivered since the start." in page


def test_with_several_agents_each_worker_says_whose_it_is() -> None:
    snap = snapshot(WorkerHealth("w1", "ready", 10, NOW - 5, 0, agent="default"),
                    WorkerHealth("coder/w1", "restarting", None, None, 3, down_seconds=2,
                                 agent="coder"))
    page = render(snap, OutboxStats(), now=NOW, label=ChatLabels(b"k" * 32))
    assert "<th>agent</th>" in page
    assert re.search(r"<td>coder/w1</td>.*?<td>3</td><td>coder</td>", page, re.S)
    alone = render(snapshot(WorkerHealth("w1", "ready", 10, NOW - 5, 0)), OutboxStats(),
                   now=NOW, label=ChatLabels(b"k" * 32))
    assert "<th>agent</th>" not in alone
