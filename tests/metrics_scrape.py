"""Scraping `/metrics` in tests: real HTTP requests, the exposition read by
prometheus_client's own parser."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

# Every metric a node serves, with its type: what dashboards and alerts use.
METRICS = {
    "cortex_tasks_total": "counter",
    "cortex_queue_depth": "gauge",
    "cortex_queue_oldest_age_seconds": "gauge",
    "cortex_schedule_latency_seconds": "histogram",
    "cortex_task_duration_seconds": "histogram",
    "cortex_raft_term": "gauge",
    "cortex_raft_commit_index": "gauge",
    "cortex_raft_applied_index": "gauge",
    "cortex_raft_is_leader": "gauge",
    "cortex_raft_commit_latency_seconds": "histogram",
    "cortex_raft_apply_seconds": "histogram",
    "cortex_raft_journal_sync_seconds": "histogram",
    "cortex_raft_append_gap_seconds": "histogram",
    "cortex_raft_elections_total": "counter",
    "cortex_raft_merged_batches_total": "counter",
    "cortex_raft_merge_holds_total": "counter",
    "cortex_raft_merge_holds_given_up_total": "counter",
    "cortex_node_up": "gauge",
    "cortex_node_capacity": "gauge",
    "cortex_node_used": "gauge",
    "cortex_node_allocated": "gauge",
    "cortex_workflows_total": "gauge",
    "cortex_dead_letter_tasks": "gauge",
    "cortex_output_stream_clients": "gauge",
    "cortex_agent_attempts": "gauge",
    "cortex_thread_cpu_seconds_total": "counter",
}


@dataclass(frozen=True)
class Response:
    status: int
    headers: Message
    body: bytes


def request(
    url: str,
    token: str | None = None,
    method: str = "GET",
    context: ssl.SSLContext | None = None,
    timeout_s: float = 10.0,
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
) -> Response:
    """The answer to one request, whatever its status."""
    sent_headers = {"Authorization": f"Bearer {token}"} if token else {}
    sent = urllib.request.Request(
        url, method=method, headers={**sent_headers, **(headers or {})}, data=data
    )
    try:
        with urllib.request.urlopen(sent, timeout=timeout_s, context=context) as answer:
            return Response(answer.status, answer.headers, answer.read())
    except urllib.error.HTTPError as refused:
        return Response(refused.code, refused.headers, refused.read())


@dataclass(frozen=True)
class Scrape:
    """One exposition, its families keyed by the name a scrape config or a
    query uses (counters with their `_total`)."""

    families: dict[str, Metric]

    @classmethod
    def parse(cls, text: str) -> Scrape:
        families = {}
        for family in text_string_to_metric_families(text):
            name = f"{family.name}_total" if family.type == "counter" else family.name
            families[name] = family
        return cls(families)

    def type_of(self, name: str) -> str:
        return self.families[name].type

    def value(self, name: str, **labels: str) -> float:
        """The one sample of `name` carrying exactly these labels (0 when
        there is none yet: a counter never incremented has no sample)."""
        family = self.families[name]
        sample_name = name if family.type != "histogram" else f"{name}_count"
        found = [s.value for s in family.samples if s.name == sample_name and s.labels == labels]
        assert len(found) <= 1, (name, labels, found)
        return found[0] if found else 0.0

    def total(self, name: str) -> float:
        """All samples of `name` added up (of a histogram: its counts)."""
        family = self.families[name]
        sample_name = name if family.type != "histogram" else f"{name}_count"
        return sum(s.value for s in family.samples if s.name == sample_name)

    def labelled(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        family = self.families[name]
        return {tuple(sorted(s.labels.items())): s.value for s in family.samples}


def scrape(url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> Scrape:
    answer = request(url, token, context=context)
    assert answer.status == 200, (answer.status, answer.body[:200])
    assert answer.headers["Content-Type"].startswith("text/plain"), answer.headers
    return Scrape.parse(answer.body.decode())
