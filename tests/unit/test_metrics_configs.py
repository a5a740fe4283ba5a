"""The example Prometheus scrape config and Grafana dashboard in `configs/`
name only metrics nodes serve, and scrape where `cortex dev` listens."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from cortex.cli.dev import plan_nodes
from tests.metrics_scrape import METRICS

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
_SUFFIXES = ("_bucket", "_count", "_sum")


def _served(name: str) -> bool:
    if name in METRICS:
        return True
    base = next((name.removesuffix(s) for s in _SUFFIXES if name.endswith(s)), None)
    return base is not None and METRICS.get(base) == "histogram"


def test_the_dashboard_queries_only_served_metrics() -> None:
    dashboard = json.loads((CONFIGS / "grafana-dashboard.json").read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert queries
    names = {name for query in queries for name in re.findall(r"\bcortex_\w+", query)}
    assert names and {name for name in names if not _served(name)} == set()
    # Every metric is on some panel.
    shown = {next((n.removesuffix(s) for s in _SUFFIXES if n.endswith(s)), n) for n in names}
    assert set(METRICS) - shown == set()


def test_the_scrape_config_targets_a_dev_cluster(tmp_path: Path) -> None:
    config = yaml.safe_load((CONFIGS / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    targets = [t for group in job["static_configs"] for t in group["targets"]]
    assert targets == [node.http for node in plan_nodes(3, 7100, tmp_path)]
