"""Acceptance of the replicated core on real 3-process clusters."""

from __future__ import annotations

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, completion_counts, shell_spec, wait_until

pytestmark = pytest.mark.cluster


def _submit_round_robin(cluster: Cluster, count: int, prefix: str) -> list[str]:
    clients = [n.client() for n in cluster.nodes if n.alive]
    try:
        ids = []
        for i in range(count):
            reply = clients[i % len(clients)].submit_task(
                shell_spec(["echo", f"{prefix}-{i}"]), idempotency_key=f"{prefix}-{i}"
            )
            ids.append(reply.task.id)
        return ids
    finally:
        for client in clients:
            client.close()


def _wait_all_completed(cluster: Cluster, ids: list[str], timeout: float = 120.0) -> None:
    node = next(n for n in cluster.nodes if n.alive)
    with node.client() as client:

        def done() -> bool:
            listed = client.list_tasks(states=[pb.TASK_STATE_COMPLETED], page_size=1)
            return listed.total_size >= len(ids)

        wait_until(done, timeout, interval=0.25, what=f"{len(ids)} tasks completed")
        for task_id in ids:
            task = client.get_task(task_id).task
            assert task.state == pb.TASK_STATE_COMPLETED, (task_id, task.state)


def test_200_tasks_round_robin_complete_exactly_once_and_digests_match(make_cluster):
    cluster = make_cluster(3)
    ids = _submit_round_robin(cluster, 200, "rr")
    assert len(set(ids)) == 200
    _wait_all_completed(cluster, ids)
    digest, applied = cluster.wait_converged()
    for node in cluster.nodes:
        counts = completion_counts(node)
        assert set(counts) == set(ids)
        assert set(counts.values()) == {1}, f"{node.node_id} has a task completed more than once"
    ran_on = set()
    with cluster.nodes[0].client() as client:
        for task_id in ids[:30]:
            task = client.get_task(task_id).task
            assert task.result.stdout.decode().startswith("rr-")
            ran_on.add(task.node_id)
    assert ran_on <= {n.node_id for n in cluster.nodes}
    statuses = [n.status() for n in cluster.nodes]
    assert {(s.state_digest, s.applied_index) for s in statuses} == {(digest, applied)}


def test_killed_follower_catches_up_after_restart(make_cluster):
    cluster = make_cluster(3)
    first = _submit_round_robin(cluster, 20, "before")
    _wait_all_completed(cluster, first)
    victim = cluster.followers()[0]
    victim.kill9()
    survivors = [n for n in cluster.nodes if n.alive]
    clients = [n.client() for n in survivors]
    more = []
    for i in range(40):
        more.append(clients[i % 2].submit_task(shell_spec(["echo", f"during-{i}"])).task.id)
    for client in clients:
        client.close()
    _wait_all_completed(cluster, first + more)
    victim.start(peers=cluster.peers)
    cluster.wait_level(victim)
    counts = completion_counts(victim)
    assert set(counts) == set(first + more) and set(counts.values()) == {1}


def test_whole_cluster_restart_keeps_tasks_and_never_reruns_completed(make_cluster, tmp_path):
    cluster = make_cluster(3)
    runs = tmp_path / "runs.log"
    with cluster.nodes[0].client() as client:
        ids = [
            client.submit_task(shell_spec(f'echo "$CORTEX_TASK_ID" >> {runs}')).task.id
            for _ in range(30)
        ]
    _wait_all_completed(cluster, ids)
    digest_before, _ = cluster.wait_converged()
    cluster.stop()
    assert not any(n.alive for n in cluster.nodes)
    cluster.start()
    cluster.wait_ready()
    # A task submitted after the restart completing means every agent has
    # reconciled what it found in its database.
    with cluster.nodes[1].client() as client:
        sentinel = client.submit_task(shell_spec(["true"])).task.id
        result = client.get_task_result(sentinel, wait=True, timeout_ms=60_000)
        assert result.task.state == pb.TASK_STATE_COMPLETED
        for task_id in ids:
            task = client.get_task(task_id).task
            assert task.state == pb.TASK_STATE_COMPLETED and task.attempt == 1
    cluster.wait_converged()
    lines = runs.read_text().split()
    assert sorted(lines) == sorted(ids), "a completed task ran again after the restart"
    assert digest_before  # state existed before the restart


def test_idempotency_key_on_two_nodes_yields_one_task(make_cluster):
    cluster = make_cluster(3)
    a, b = cluster.nodes[0].client(), cluster.nodes[2].client()
    try:
        first = a.submit_task(shell_spec(["echo", "once"]), idempotency_key="same-key")
        again = a.submit_task(shell_spec(["echo", "once"]), idempotency_key="same-key")
        elsewhere = b.submit_task(shell_spec(["echo", "once"]), idempotency_key="same-key")
        assert first.created and not again.created and not elsewhere.created
        assert first.task.id == again.task.id == elsewhere.task.id
        assert first.commit_index == again.commit_index == elsewhere.commit_index
        listed = a.list_tasks(page_size=1000)
        assert [t.id for t in listed.tasks if t.idempotency_key == "same-key"] == [first.task.id]
    finally:
        a.close()
        b.close()


def test_fourth_node_joins_through_snapshot_and_converges(make_cluster):
    cluster = make_cluster(3, extra_args=["--compaction-min-entries", "50"])
    clients = [n.client() for n in cluster.nodes]
    ids = []
    for i in range(500):
        spec = shell_spec([], type="noop")
        ids.append(clients[i % 3].submit_task(spec, idempotency_key=f"j-{i}").task.id)
    for client in clients:
        client.close()
    _wait_all_completed(cluster, ids)
    cluster.wait_converged()
    leader = cluster.leader()
    # The log has been compacted: the leader no longer holds every entry.
    wait_until(lambda: leader.status().log_size < leader.status().applied_index // 2, 60,
               what="log compaction")  # fmt: skip
    newcomer = cluster.add_node(extra_args=["--compaction-min-entries", "50"])
    newcomer.start(join=cluster.nodes[0].grpc)
    # Its own registration is the last entry it brings; then all four agree.
    wait_until(lambda: len(newcomer.status().nodes) == 4, 60, what="newcomer registered")
    digest, applied = cluster.wait_converged(timeout=90)
    assert newcomer in cluster.nodes and newcomer.alive
    assert "restored from snapshot" in newcomer.log_text()
    counts = completion_counts(newcomer)
    assert len(counts) == 500 and set(counts.values()) == {1}


def test_follower_restarted_after_compacting_its_own_log_converges(make_cluster):
    """The snapshot is built off the Raft thread while entries keep applying;
    a node killed after compacting restarts from it and its journal."""
    compacting = ["--compaction-min-entries", "50"]
    cluster = make_cluster(3, extra_args=compacting)
    first = _submit_round_robin(cluster, 150, "before")
    _wait_all_completed(cluster, first)
    victim = cluster.followers()[0]
    wait_until(lambda: "snapshot written" in victim.log_text(), 60, what="a snapshot on the victim")
    victim.kill9()
    more = _submit_round_robin(cluster, 30, "during")
    _wait_all_completed(cluster, first + more)
    victim.start(peers=cluster.peers)
    cluster.wait_level(victim)
    counts = completion_counts(victim)
    assert set(counts) == set(first + more) and set(counts.values()) == {1}
