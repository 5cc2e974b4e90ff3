"""deploy/grafana-dashboard.json charts what /metrics exports: every series it queries exists,
and every series picobridge exports (the per-worker ones included) has a panel."""

from __future__ import annotations

import json
import re
from pathlib import Path

from picobridge.adapters.registry import PLATFORMS
from picobridge.ops.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
# What Prometheus adds to a family's name: counters' _total, histograms' parts.
SUFFIXES = ("_bucket", "_count", "_sum", "_created")


def exported_families() -> set[str]:
    text = Metrics(PLATFORMS).render().decode()
    names = set(re.findall(r"^# TYPE (picobridge_\w+) ", text, flags=re.M))
    # prometheus_client also exports each counter's creation time; nothing to chart.
    return {n for n in names if not n.endswith("_created")}


def queried_series() -> dict[str, str]:
    """Series name -> the title of a panel that queries it."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            for name in re.findall(r"picobridge_\w+", target["expr"]):
                found.setdefault(name, panel["title"])
    return found


def family(series: str, families: set[str]) -> str | None:
    for name in (series, *(series.removesuffix(s) for s in SUFFIXES),
                 series.removesuffix("_total")):
        if name in families:
            return name
    return None


def test_every_queried_series_is_exported() -> None:
    families = exported_families()
    unknown = {s: title for s, title in queried_series().items() if family(s, families) is None}
    assert unknown == {}


def test_every_exported_series_has_a_panel() -> None:
    families = exported_families()
    charted = {family(s, families) for s in queried_series()}
    assert families - charted == set()
    for worker_series in ("picobridge_worker_up", "picobridge_worker_busy",
                          "picobridge_worker_restarts_total", "picobridge_worker_turns_total"):
        assert worker_series in charted


def test_it_imports_with_a_data_source_choice() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert all('instance=~"$instance"' in t["expr"] for t in panel["targets"])
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def test_per_platform_panels_follow_the_platform_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert "platform" in names
    per_platform = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])
                    if "by (platform)" in t["expr"]]
    assert per_platform
    assert all('platform=~"$platform"' in expr for expr in per_platform)
