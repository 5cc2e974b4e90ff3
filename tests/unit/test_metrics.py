"""bridge/metrics.py: names, labels, values, and isolation from the global registry."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from picobridge.adapters.registry import PLATFORMS
from picobridge.core.stats import Histogram
from picobridge.ops.metrics import Metrics


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse render() back, as a scraper would: {(sample name, labels): value}."""
    found = {}
    for family in text_string_to_metric_families(metrics.render().decode("utf-8")):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(metrics: Metrics, name: str, **labels: str) -> float:
    if "platform" in labels:
        labels.setdefault("bot", "default")
    return samples(metrics)[(name, tuple(sorted(labels.items())))]


def test_every_promised_series_is_exported_with_the_prefix() -> None:
    names = {name for name, _ in samples(Metrics(PLATFORMS))}
    for expected in (
        "picobridge_messages_in_total",
        "picobridge_messages_out_total",
        "picobridge_turns_total",
        "picobridge_agent_restarts_total",
        "picobridge_delivery_failures_total",
        "picobridge_platform_429_total",
        "picobridge_duplicates_total",
        "picobridge_denied_total",
        "picobridge_turn_latency_seconds_count",
        "picobridge_turn_latency_seconds_sum",
        "picobridge_queue_depth",
        "picobridge_in_flight",
        "picobridge_outbox_pending",
        "picobridge_oldest_undelivered_age_seconds",
        "picobridge_agent_up",
    ):
        assert expected in names, expected
    assert all(name.startswith("picobridge_") for name in names)


def test_known_labels_start_at_zero() -> None:
    metrics = Metrics(platforms=["telegram"])
    assert value(metrics, "picobridge_messages_in_total", platform="telegram", bot="default") == 0
    assert value(metrics, "picobridge_turns_total", outcome="requeued") == 0
    assert ("picobridge_messages_in_total", (("bot", "default"), ("platform", "slack"))
            ) not in samples(metrics)


def test_a_further_bot_is_its_platform_with_a_bot_label() -> None:
    metrics = Metrics(platforms=["telegram", "telegram@work"])
    metrics.sync_platform_totals("messages_in", {"telegram@work": 2, "telegram": 1})
    assert value(metrics, "picobridge_messages_in_total", platform="telegram", bot="work") == 2
    assert value(metrics, "picobridge_messages_in_total", platform="telegram",
                 bot="default") == 1


def test_totals_count_per_label() -> None:
    metrics = Metrics(PLATFORMS)
    metrics.sync_platform_totals("messages_in", {"telegram": 2, "slack": 1})
    metrics.sync_platform_totals("messages_out", {"slack": 1})
    metrics.sync_platform_totals("delivery_failures", {"telegram": 1})
    metrics.sync_platform_totals("platform_429", {"slack": 2})
    metrics.sync_platform_totals("duplicates", {"telegram": 1})
    metrics.sync_platform_totals("denied", {"slack": 1})
    metrics.sync_worker("w1", restarts=1, turns=4)
    assert value(metrics, "picobridge_messages_in_total", platform="telegram") == 2
    assert value(metrics, "picobridge_messages_in_total", platform="slack") == 1
    assert value(metrics, "picobridge_messages_out_total", platform="slack") == 1
    assert value(metrics, "picobridge_messages_out_total", platform="telegram") == 0
    assert value(metrics, "picobridge_delivery_failures_total", platform="telegram") == 1
    assert value(metrics, "picobridge_platform_429_total", platform="slack") == 2
    assert value(metrics, "picobridge_duplicates_total", platform="telegram") == 1
    assert value(metrics, "picobridge_denied_total", platform="slack") == 1
    assert value(metrics, "picobridge_agent_restarts_total") == 1
    assert value(metrics, "picobridge_worker_restarts_total", worker="w1", agent="default") == 1
    assert value(metrics, "picobridge_worker_turns_total", worker="w1", agent="default") == 4


def test_turns_and_the_routers_latency_histogram() -> None:
    metrics = Metrics(PLATFORMS)
    durations = Histogram()
    for seconds in (1.5, 45.0, -0.1):  # a clock hiccup must not poison the sum
        durations.observe(seconds)
    metrics.sync_turn_totals({"done": 2, "failed": 1})
    metrics.sync_turn_latency(durations.snapshot())
    assert value(metrics, "picobridge_turns_total", outcome="done") == 2
    assert value(metrics, "picobridge_turns_total", outcome="failed") == 1
    assert value(metrics, "picobridge_turn_latency_seconds_count") == 3
    assert value(metrics, "picobridge_turn_latency_seconds_sum") == pytest.approx(46.5)
    assert value(metrics, "picobridge_turn_latency_seconds_bucket", le="2.0") == 2
    assert value(metrics, "picobridge_turn_latency_seconds_bucket", le="60.0") == 3
    assert value(metrics, "picobridge_turn_latency_seconds_bucket", le="+Inf") == 3


def test_gauges_follow_the_latest_values() -> None:
    metrics = Metrics(PLATFORMS)
    metrics.set_queue(7, 1)
    metrics.set_outbox(3, 12.5)
    metrics.set_agent_up(True)
    assert value(metrics, "picobridge_queue_depth") == 7
    assert value(metrics, "picobridge_in_flight") == 1
    assert value(metrics, "picobridge_outbox_pending") == 3
    assert value(metrics, "picobridge_oldest_undelivered_age_seconds") == 12.5
    assert value(metrics, "picobridge_agent_up") == 1
    metrics.set_queue(0, 0)
    metrics.set_outbox(0, None)
    metrics.set_agent_up(False)
    assert value(metrics, "picobridge_queue_depth") == 0
    assert value(metrics, "picobridge_oldest_undelivered_age_seconds") == 0
    assert value(metrics, "picobridge_agent_up") == 0


def test_sync_from_running_totals_counts_only_the_difference() -> None:
    metrics = Metrics(PLATFORMS)
    metrics.sync_platform_totals("messages_in", {"telegram": 3, "slack": 1})
    metrics.sync_platform_totals("messages_in", {"telegram": 5, "slack": 1})
    metrics.sync_worker("w1", restarts=2, turns=0)
    metrics.sync_worker("w1", restarts=2, turns=0)
    metrics.sync_worker("w1", restarts=4, turns=0)
    assert value(metrics, "picobridge_messages_in_total", platform="telegram") == 5
    assert value(metrics, "picobridge_messages_in_total", platform="slack") == 1
    assert value(metrics, "picobridge_agent_restarts_total") == 4
    # The source was recreated and counts from zero: its new count is all new.
    metrics.sync_platform_totals("messages_in", {"telegram": 2})
    assert value(metrics, "picobridge_messages_in_total", platform="telegram") == 7


def test_each_instance_has_its_own_registry() -> None:
    # Shared, the second would raise "Duplicated timeseries".
    first, second = Metrics(PLATFORMS), Metrics(PLATFORMS)
    first.sync_platform_totals("messages_in", {"telegram": 1})
    assert value(second, "picobridge_messages_in_total", platform="telegram") == 0
    assert (
        REGISTRY.get_sample_value("picobridge_messages_in_total",
                                  {"platform": "telegram", "bot": "default"}) is None
    )
