"""Every node of a real 3-node cluster serves Prometheus metrics over HTTP:
every metric name with its type, task transitions counted on every node,
one Raft leader, the cluster's nodes, output streams being served, and the
API token and TLS of the gRPC API on the metrics port too."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, shared_cluster, shell_spec, wait_until
from tests.metrics_scrape import METRICS, Scrape, request, scrape
from tests.tls import write_tls_files

pytestmark = pytest.mark.cluster

TASKS = 12
TOKEN = "metrics-api-token-5678"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "metrics")


def metrics_of(node: ClusterNode) -> Scrape:
    return scrape(f"http://{node.http}/metrics")


def test_every_node_serves_every_metric_with_its_type(cluster: Cluster) -> None:
    for node in cluster.nodes:
        scraped = metrics_of(node)
        assert {name: scraped.type_of(name) for name in METRICS if name in scraped.families} == (
            METRICS
        ), node.node_id
        assert scraped.value("cortex_raft_applied_index") > 0


def test_completed_tasks_are_counted_on_every_node(cluster: Cluster) -> None:
    def completed(node: ClusterNode) -> float:
        return metrics_of(node).value("cortex_tasks_total", state="completed")

    before = {node.node_id: completed(node) for node in cluster.nodes}
    for number in range(TASKS):
        with cluster.nodes[number % len(cluster.nodes)].client() as client:
            client.submit_task(pb.TaskSpec(type="noop"), f"metrics-noop-{number}")

    def all_counted() -> bool:
        return all(completed(node) >= before[node.node_id] + TASKS for node in cluster.nodes)

    wait_until(all_counted, 60, interval=0.2, what=f"{TASKS} completions counted on every node")
    for node in cluster.nodes:
        scraped = metrics_of(node)
        assert (
            scraped.value("cortex_tasks_total", state="completed") == before[node.node_id] + TASKS
        )
        assert scraped.value("cortex_tasks_total", state="queued") >= TASKS
        assert scraped.value("cortex_raft_apply_seconds") > 0
        # Every node synced the entries it appended (raft_sync is on).
        assert scraped.value("cortex_raft_journal_sync_seconds") > 0
        # Applying them took the Raft thread's CPU, counted under its name.
        assert scraped.value("cortex_thread_cpu_seconds_total", thread="raft") > 0
    # The leader timed the intervals between its rounds of appends.
    assert metrics_of(cluster.leader()).value("cortex_raft_append_gap_seconds") > 0

    def observed(node: ClusterNode) -> bool:
        # The histograms are observed off the Raft thread, a moment later.
        scraped = metrics_of(node)
        return (
            scraped.value("cortex_task_duration_seconds", executor="noop", outcome="completed")
            >= TASKS
            and scraped.value("cortex_schedule_latency_seconds") >= TASKS
        )

    for node in cluster.nodes:
        wait_until(lambda n=node: observed(n), 30, what=f"task histograms on {node.node_id}")
    # Submissions were taken by every node; each proposed and timed its own.
    for node in cluster.nodes:
        assert metrics_of(node).value("cortex_raft_commit_latency_seconds") > 0, node.node_id


def test_exactly_one_node_is_the_leader(cluster: Cluster) -> None:
    def agreed() -> tuple[str, list[Scrape]] | None:
        scrapes = [metrics_of(node) for node in cluster.nodes]
        leaders = [
            node.node_id
            for node, scraped in zip(cluster.nodes, scrapes, strict=True)
            if scraped.value("cortex_raft_is_leader") == 1
        ]
        terms = {scraped.value("cortex_raft_term") for scraped in scrapes}
        if len(leaders) == 1 and len(terms) == 1:
            return leaders[0], scrapes
        return None

    leader_id, scrapes = wait_until(agreed, 30, what="one leader in one term")
    assert sum(s.value("cortex_raft_is_leader") for s in scrapes) == 1
    assert leader_id == cluster.leader().node_id
    for scraped in scrapes:
        assert scraped.value("cortex_raft_elections_total") >= 0
        assert scraped.value("cortex_raft_commit_index") >= 1


def growing_samples(scraped: Scrape) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample that may only grow: counters', and histograms' counts,
    sums and buckets."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in scraped.families.values()
        if family.type in ("counter", "histogram")
        for sample in family.samples
    }


def test_counters_only_grow_during_a_run_and_one_node_leads(cluster: Cluster) -> None:
    """Scraped over and over on every node while tasks run: no counter or
    histogram sample ever goes down, and in every round of scrapes within
    one term exactly one node says it leads."""
    with cluster.nodes[0].client() as client:
        ids = [
            client.submit_task(
                shell_spec("sleep 0.2") if n % 3 else pb.TaskSpec(type="noop")
            ).task.id
            for n in range(24)
        ]
    last: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    rounds = one_leader_rounds = 0

    def finished() -> bool:
        with cluster.nodes[1].client() as client:
            states = [client.get_task(task_id).task.state for task_id in ids]
        return all(state == pb.TASK_STATE_COMPLETED for state in states)

    while True:
        done = finished()
        scrapes = [metrics_of(node) for node in cluster.nodes]
        rounds += 1
        for node, scraped in zip(cluster.nodes, scrapes, strict=True):
            now = growing_samples(scraped)
            for key, value in last.get(node.node_id, {}).items():
                assert now.get(key, 0.0) >= value, (node.node_id, key, value, now.get(key))
            last[node.node_id] = now
        if len({scraped.value("cortex_raft_term") for scraped in scrapes}) == 1:
            leaders = sum(scraped.value("cortex_raft_is_leader") for scraped in scrapes)
            assert leaders == 1, [s.value("cortex_raft_is_leader") for s in scrapes]
            one_leader_rounds += 1
        if done:
            break
        assert rounds < 600, "the run did not finish within 600 rounds of scrapes"
    assert rounds >= 2 and one_leader_rounds >= 1
    # The run itself was counted: the samples grew, not just stayed put.
    assert all(
        last[node.node_id][("cortex_tasks_total", (("state", "completed"),))] >= len(ids)
        for node in cluster.nodes
    )


def test_every_node_sees_every_node_up_with_its_resources(cluster: Cluster) -> None:
    ids = {node.node_id for node in cluster.nodes}

    def reported(node: ClusterNode) -> Scrape | None:
        scraped = metrics_of(node)
        up = {labels[0][1]: value for labels, value in scraped.labelled("cortex_node_up").items()}
        memory = [scraped.value("cortex_node_capacity", node=i, resource="memory_mb") for i in ids]
        return scraped if up == dict.fromkeys(ids, 1.0) and all(memory) else None

    for node in cluster.nodes:
        scraped = wait_until(lambda n=node: reported(n), 30, what="nodes up with reports")
        for node_id in ids:
            assert scraped.value("cortex_node_capacity", node=node_id, resource="tasks") == 64
            assert scraped.value("cortex_node_capacity", node=node_id, resource="cpu_cores") > 0
            assert scraped.value("cortex_node_used", node=node_id, resource="memory_mb") > 0
            assert scraped.value("cortex_node_allocated", node=node_id, resource="tasks") >= 0


def test_output_streams_are_counted_while_served(cluster: Cluster, tmp_path: Path) -> None:
    release = tmp_path / "release"
    command = f"echo started; while [ ! -e {release} ]; do sleep 0.05; done; echo done"
    node = cluster.nodes[0]
    with node.client() as client:
        task_id = client.submit_task(shell_spec(command), "metrics-stream").task.id
    received: list[pb.StreamTaskOutputResponse] = []

    def follow() -> None:
        with node.client() as client:
            received.extend(client.stream_task_output(task_id, follow=True, timeout_s=60))

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    try:
        wait_until(
            lambda: metrics_of(node).value("cortex_output_stream_clients") >= 1,
            30,
            what="the stream to be counted",
        )
    finally:
        release.touch()
    follower.join(60)
    assert not follower.is_alive() and received
    wait_until(
        lambda: all(
            metrics_of(n).value("cortex_output_stream_clients") == 0 for n in cluster.nodes
        ),
        30,
        what="the stream to be uncounted",
    )


def test_the_api_token_and_tls_guard_the_metrics_port(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    files = write_tls_files(tmp_path / "certs")
    (node,) = make_cluster(1, api_token=TOKEN, tls=files).nodes
    trusting = ssl.create_default_context(cafile=str(files.ca))
    url = f"https://{node.http}/metrics"
    for token in (None, "not-the-token"):
        refused = request(url, token, context=trusting)
        assert refused.status == 401, token
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    scraped = scrape(url, TOKEN, context=trusting)
    assert scraped.value("cortex_raft_is_leader") == 1
    assert request(f"https://{node.http}/nope", TOKEN, context=trusting).status == 404
    with pytest.raises(OSError):
        request(f"http://{node.http}/metrics", TOKEN)
