"""The CPU scheduling policy of a node's threads and of its tasks' processes
(`cortex.cpu_policy`), on a real cluster of three nodes started three ways:
with `--sched-batch` every thread of the node runs under SCHED_BATCH and its
tasks under the default policy; by default both keep the default; a node
started under another policy (`chrt --idle`) keeps it for both, even with
`--sched-batch`."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import ClusterNode, shell_spec

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies"),
]

PRINT_POLICY = "import os; print(os.sched_getscheduler(0))"


def _thread_policies(node: ClusterNode) -> dict[int, int]:
    assert node.process is not None
    tasks = Path(f"/proc/{node.process.pid}/task")
    return {int(tid): os.sched_getscheduler(int(tid)) for tid in os.listdir(tasks)}


@pytest.mark.skipif(shutil.which("chrt") is None, reason="needs chrt (util-linux)")
def test_sched_batch_puts_node_threads_under_batch_and_tasks_keep_the_starting_policy(make_cluster):
    cluster = make_cluster(3, start=False)
    batch, default, idle = cluster.nodes
    batch.extra_args = [*batch.extra_args, "--sched-batch"]
    idle.extra_args = [*idle.extra_args, "--sched-batch"]
    # Each started under a given policy, whatever this process runs under.
    batch.wrapper = default.wrapper = ["chrt", "--other", "0"]
    idle.wrapper = ["chrt", "--idle", "0"]
    cluster.start()
    cluster.wait_ready()

    expected = {
        batch.node_id: (os.SCHED_BATCH, os.SCHED_OTHER),
        default.node_id: (os.SCHED_OTHER, os.SCHED_OTHER),
        idle.node_id: (os.SCHED_IDLE, os.SCHED_IDLE),
    }
    for node in cluster.nodes:
        threads = _thread_policies(node)
        assert len(threads) > 10, threads  # Raft, gRPC, agent, loops: all of them
        assert set(threads.values()) == {expected[node.node_id][0]}, (node.node_id, threads)

    with batch.client() as client:
        for node in cluster.nodes:
            spec = shell_spec(
                [sys.executable, "-c", PRINT_POLICY],
                constraints=pb.Constraints(target_node=node.node_id),
            )
            task_id = client.submit_task(spec).task.id
            task = client.get_task_result(task_id, wait=True, timeout_ms=30_000).task
            assert task.state == pb.TASK_STATE_COMPLETED, task
            assert task.node_id == node.node_id
            assert int(task.result.stdout) == expected[node.node_id][1], node.node_id

    # The attempt's thread went back to the task's policy; the node's others did not.
    policies = set(_thread_policies(batch).values())
    assert policies == {os.SCHED_BATCH, os.SCHED_OTHER}, policies
