"""Group commit at the leader (`cortex.raft.merging`) on a real 3-process
cluster: many clients submitting to every node at once make the leader log
batches of different nodes in shared entries, what followers forward waits
for the leader's own next batch, and every client still gets its own task
back, every task runs once, and the nodes agree."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, completion_counts, shared_cluster, wait_until
from tests.metrics_scrape import scrape

pytestmark = pytest.mark.cluster

CLIENTS = 24
ROUND = 96
MAX_ROUNDS = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "merged")


def _merged_batches(cluster: Cluster) -> float:
    return _total(cluster, "cortex_raft_merged_batches_total")


def _total(cluster: Cluster, metric: str) -> float:
    return sum(scrape(f"http://{node.http}/metrics").value(metric) for node in cluster.nodes)


def _submit_round(cluster: Cluster, first: int) -> dict[str, str]:
    """ROUND tasks from CLIENTS threads, round-robin over the nodes, each
    labelled with its number; the task id each submit was answered with,
    by number. Fails if an answer names a task with another number."""
    answered: dict[str, str] = {}
    wrong: list[tuple[str, str]] = []
    lock = threading.Lock()
    numbers = iter(range(first, first + ROUND))

    def client_thread(worker: int) -> None:
        node = cluster.nodes[worker % len(cluster.nodes)]
        with node.client() as client:
            while True:
                with lock:
                    number = next(numbers, None)
                if number is None:
                    return
                spec = pb.TaskSpec(type="noop", labels={"n": str(number)})
                reply = client.submit_task(spec, idempotency_key=f"merged-{number}")
                with lock:
                    answered[str(number)] = reply.task.id
                    if reply.task.spec.labels.get("n") != str(number):
                        wrong.append((str(number), dict(reply.task.spec.labels).get("n", "")))

    threads = [threading.Thread(target=client_thread, args=(w,)) for w in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not wrong, f"submits answered with another submit's task: {wrong[:5]}"
    assert len(answered) == ROUND
    return answered


def test_batches_of_every_node_share_entries_and_each_client_gets_its_own_task(
    cluster: Cluster,
) -> None:
    merged_before = _merged_batches(cluster)
    holds_before = _total(cluster, "cortex_raft_merge_holds_total")
    answered: dict[str, str] = {}
    deadline = time.monotonic() + 120
    rounds = 0

    def merged_and_held() -> tuple[bool, bool]:
        return (
            _merged_batches(cluster) > merged_before,
            _total(cluster, "cortex_raft_merge_holds_total") > holds_before,
        )

    while rounds < MAX_ROUNDS and time.monotonic() < deadline:
        answered.update(_submit_round(cluster, rounds * ROUND))
        rounds += 1
        if merged_and_held() == (True, True):
            break
    assert merged_and_held() == (True, True), f"merged, held after {rounds} rounds"
    ids = set(answered.values())
    assert len(ids) == len(answered)

    with cluster.nodes[0].client() as client:

        def all_completed() -> bool:
            states = {client.get_task(task_id).task.state for task_id in ids}
            return states == {pb.TASK_STATE_COMPLETED}

        wait_until(all_completed, 120, interval=0.25, what=f"{len(ids)} tasks completed")
        for number, task_id in answered.items():
            assert client.get_task(task_id).task.spec.labels["n"] == number
    digest, applied = cluster.wait_converged()
    for node in cluster.nodes:
        counts = completion_counts(node)
        assert ids <= set(counts)
        assert {counts[task_id] for task_id in ids} == {1}, node.node_id
    statuses = [node.status() for node in cluster.nodes]
    assert {(s.state_digest, s.applied_index) for s in statuses} == {(digest, applied)}
