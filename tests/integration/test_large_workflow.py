"""A 6 MB, 5,500-task workflow on a real 3-node cluster: it travels in parts,
so no apply holds the Raft thread for long (no election, no "may have
diverged"), memory stays bounded, and it runs only once complete. Then, at
25,000 tasks, `cortex status` answers quickly for 8 callers at once, since
the state digest is kept up by apply rather than recomputed per call."""

from __future__ import annotations

import json
import statistics
import threading
import time

import psutil
import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, wait_until

pytestmark = pytest.mark.cluster

RSS_LIMIT = 400 * 1024 * 1024


def _definition(name: str, count: int, padding: int) -> str:
    tasks: dict[str, dict[str, object]] = {}
    for i in range(count):
        task: dict[str, object] = {"type": "noop", "spec": {"env": {"PAD": "x" * padding}}}
        if i % 50:
            task["dependsOn"] = [f"t{i - 1}"]
        tasks[f"t{i}"] = task
    return json.dumps({"name": name, "tasks": tasks})


def _terms(cluster: Cluster) -> list[int]:
    return [node.status().term for node in cluster.nodes]


def _watch_rss(cluster: Cluster, stop: threading.Event, peaks: dict[str, int]) -> None:
    processes = {n.node_id: psutil.Process(n.process.pid) for n in cluster.nodes if n.process}
    while not stop.is_set():
        for node_id, process in processes.items():
            peaks[node_id] = max(peaks.get(node_id, 0), process.memory_info().rss)
        stop.wait(0.05)


def test_a_huge_workflow_neither_stalls_raft_nor_runs_before_it_is_whole(make_cluster):
    cluster = make_cluster(3)
    leader = cluster.leader()
    with leader.client(timeout_s=120) as client:
        for node in cluster.nodes:  # nothing runs: this is about replication
            client.cordon_node(node.node_id)
        definition = _definition("huge", 5_500, 1_050)
        assert len(definition) > 6_000_000
        terms = _terms(cluster)
        peaks: dict[str, int] = {}
        stop = threading.Event()
        watcher = threading.Thread(target=_watch_rss, args=(cluster, stop, peaks))
        watcher.start()
        try:
            workflow_id = client.submit_workflow(
                definition, format=pb.DEFINITION_FORMAT_JSON
            ).workflow_id
            cluster.wait_converged(timeout=120)
        finally:
            stop.set()
            watcher.join()
        workflow = client.get_workflow(workflow_id).workflow
        assert workflow.state == pb.WORKFLOW_STATE_RUNNING and len(workflow.tasks) == 5_500
        counts = {c.state: c.count for c in workflow.task_counts}
        assert counts == {pb.TASK_STATE_QUEUED: 110, pb.TASK_STATE_PENDING: 5_390}
    assert _terms(cluster) == terms, "an election happened during the submission"
    for node in cluster.nodes:
        assert "may have diverged" not in node.log_text()
    assert max(peaks.values()) < RSS_LIMIT, {k: v // 2**20 for k, v in peaks.items()}

    # Up to 25,000 tasks: status stays cheap for many callers at once (a digest
    # recomputed per call would read every row of them).
    with leader.client(timeout_s=120) as client:
        for number in range(4):
            client.submit_workflow(
                _definition(f"more-{number}", 5_000, 10), format=pb.DEFINITION_FORMAT_JSON
            )
        assert sum(c.count for c in client.get_cluster_status().task_counts) >= 25_000
    latencies: list[float] = []
    lock = threading.Lock()

    def caller(node_index: int) -> None:
        with cluster.nodes[node_index % 3].client() as c:
            for _ in range(5):
                started = time.perf_counter()
                c.get_cluster_status()
                with lock:
                    latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    print(f"status at 25k tasks, 8 callers: median {statistics.median(latencies) * 1000:.1f} ms,"
          f" max {max(latencies) * 1000:.1f} ms")  # fmt: skip
    assert len(latencies) == 40
    assert statistics.median(latencies) < 0.1

    # A cancel of it all goes in bounded batches, and reaches every task.
    with leader.client(timeout_s=120) as client:
        client.cancel_workflow(workflow_id)

        def cancelled() -> int:
            counts = client.get_workflow(workflow_id).workflow.task_counts
            return sum(c.count for c in counts if c.state == pb.TASK_STATE_CANCELLED)

        wait_until(
            lambda: cancelled() == 5_500,
            60,
            what="every task of the huge workflow cancelled",
        )
