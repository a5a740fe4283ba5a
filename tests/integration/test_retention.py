"""Retention on a real 3-process cluster: with a one-second retention the
leader purges finished tasks and workflows through the log; running, queued
and dead-lettered tasks stay; every node drops the purged rows and the
purged tasks' output directories, and all digests agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, shell_spec, wait_until

pytestmark = pytest.mark.cluster

PIPELINE = {
    "name": "short-lived",
    "tasks": {
        "build": {"spec": {"command": ["echo", "build"]}},
        "test": {"spec": {"command": ["echo", "test"]}, "dependsOn": ["build"]},
    },
}


def _listed(node: ClusterNode) -> tuple[dict[str, pb.TaskState], set[str]]:
    """Task states by id, and workflow ids, as this node's database has them."""
    with node.client() as client:
        tasks = client.list_tasks(page_size=1000)
        workflows = client.list_workflows(page_size=1000)
    assert not tasks.next_page_token and not workflows.next_page_token
    return {t.id: t.state for t in tasks.tasks}, {w.id for w in workflows.workflows}


def _attempt_dirs(cluster: Cluster) -> set[str]:
    """Task ids with an attempts directory on any node."""
    found = set()
    for node in cluster.nodes:
        root: Path = node.data_dir / "attempts"
        if root.is_dir():
            found |= {path.name for path in root.iterdir()}
    return found


def test_finished_tasks_are_purged_on_every_node_and_active_ones_stay(make_cluster):
    cluster = make_cluster(3, extra_args=["--task-retention", "1"], start=False)
    for node in cluster.nodes:
        node.env["CORTEX_PURGE_INTERVAL_S"] = "0.5"
    cluster.start()
    cluster.wait_ready()

    with cluster.nodes[0].client() as client:
        done = [client.submit_task(shell_spec(["echo", f"done-{i}"])).task.id for i in range(12)]
        assert client.submit_workflow(json.dumps(PIPELINE), pb.DEFINITION_FORMAT_JSON).workflow_id
        running = client.submit_task(shell_spec(["sleep", "300"])).task.id
        queued = client.submit_task(
            shell_spec(["true"], constraints=pb.Constraints(node_labels=["no-such-label"]))
        ).task.id
        # One retry to spend: without a budget a failing task fails, not dead-letters.
        policy = pb.RetryPolicy(max_retries=1, backoff=Duration(nanos=1_000_000))
        dead = client.submit_task(shell_spec("exit 3", retry_policy=policy)).task.id
        wait_until(lambda: client.get_task(running).task.state == pb.TASK_STATE_RUNNING, 60,
                   what="running task")  # fmt: skip
        wait_until(lambda: client.get_task(dead).task.state == pb.TASK_STATE_DEAD_LETTER, 60,
                   what="dead letter")  # fmt: skip
    kept = {
        running: pb.TASK_STATE_RUNNING,
        queued: pb.TASK_STATE_QUEUED,
        dead: pb.TASK_STATE_DEAD_LETTER,
    }

    def purged_everywhere() -> bool:
        return all(_listed(node) == (kept, set()) for node in cluster.nodes)

    wait_until(purged_everywhere, 90, interval=0.5, what="finished tasks purged on every node")

    # Each node removes the purged tasks' output on its own disk.
    wait_until(lambda: not _attempt_dirs(cluster) & set(done), 30, what="purged output removed")
    assert running in _attempt_dirs(cluster)

    digest, applied = cluster.wait_converged()
    statuses = [node.status() for node in cluster.nodes]
    assert {(s.state_digest, s.applied_index) for s in statuses} == {(digest, applied)}
    for node in cluster.nodes:
        assert _listed(node) == (kept, set())
        with node.client() as client:
            assert client.get_task(running).task.state == pb.TASK_STATE_RUNNING
            dead_letters = client.list_dead_letter_tasks()
        assert [t.id for t in dead_letters.tasks] == [dead]
