"""`cortex node remove` on real clusters: a removed node's work moves, the
node leaves the Raft group and stops, and it can only come back by joining
again with an empty data dir."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cortex.errors import FailedPrecondition, InvalidArgument, NotFound
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import SECRET, Cluster, pid_alive, shell_spec, wait_until

pytestmark = pytest.mark.cluster

FAST = ["--failure-timeout", "3", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]


def _cli(node, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cortex.cli.main", "--node", node.grpc, *args],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip


def test_removed_node_hands_back_its_task_stops_and_can_join_again(make_cluster, tmp_path):
    cluster: Cluster = make_cluster(3, extra_args=FAST)
    leader = cluster.leader()
    victim, other = cluster.followers()
    pid_file = tmp_path / "pid"
    # Long on the victim, quick anywhere else.
    command = (
        f'if [ "$CORTEX_NODE_ID" = {victim.node_id} ]; then '
        f"sleep 600 & echo $! > {pid_file}; wait; else echo moved; fi"
    )
    with leader.client() as client:
        for node in (leader, other):
            client.cordon_node(node.node_id)
        task_id = client.submit_task(shell_spec(command)).task.id
        wait_until(lambda: client.get_task(task_id).task.state == pb.TASK_STATE_RUNNING, 30,
                   what="task running")  # fmt: skip
        sleeper = wait_until(lambda: pid_file.exists() and int(pid_file.read_text()), 20)
        assert pid_alive(sleeper)
        for node in (leader, other):
            client.uncordon_node(node.node_id)

    # Asked of the victim itself: it passes the request on, since it cannot
    # see its own removal commit.
    result = _cli(victim, "node", "remove", victim.node_id, "--reason", "retired", "--json")
    assert result.returncode == 0, result.stderr
    removal = json.loads(result.stdout)
    assert removal["requeued_tasks"] == 1
    assert sorted(removal["members"]) == sorted([leader.raft, other.raft])

    with leader.client() as client:
        task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
        assert task.state == pb.TASK_STATE_COMPLETED and task.node_id != victim.node_id
        assert task.result.stdout == b"moved\n"
        events = [ev.type for ev in client.get_task(task_id, include_events=True).events]
        # Moved without spending a retry: re-queued, never failed or retried.
        assert pb.EVENT_TYPE_REQUEUED in events
        assert pb.EVENT_TYPE_FAILED not in events and pb.EVENT_TYPE_RETRIED not in events
        assert [n.id for n in client.list_nodes().nodes] == sorted([leader.node_id, other.node_id])
        status = client.get_cluster_status()
        assert victim.node_id not in {n.id for n in status.nodes}
    listed = json.loads(_cli(leader, "node", "list", "--all", "--json").stdout)
    assert {n["node_id"]: n["status"] for n in listed}[victim.node_id] == "removed"
    wait_until(lambda: not victim.alive, 30, what="the removed node to stop by itself")
    assert "was removed from the cluster" in victim.log_text()
    wait_until(lambda: not pid_alive(sleeper), 10, what="the removed node's task to be killed")
    cluster.wait_converged([leader, other])

    # Its old data dir cannot be started as a member again.
    victim.start(peers=cluster.peers)
    assert victim.process is not None
    assert victim.process.wait(30) != 0
    assert "cannot be started again" in victim.log_text()

    # A fresh data dir and --join bring the same node id back, active.
    victim.data_dir = tmp_path / "again"
    victim.start(join=leader.grpc, secret=SECRET)
    with leader.client() as client:
        wait_until(
            lambda: any(
                n.id == victim.node_id and n.status == pb.NODE_STATUS_ACTIVE
                for n in client.list_nodes().nodes
            ),
            60,
            what="the node to join again",
        )
        spec = shell_spec(["echo", "back"], constraints=pb.Constraints(target_node=victim.node_id))
        again = client.get_task_result(
            client.submit_task(spec).task.id, wait=True, timeout_ms=60_000
        ).task
        assert (again.state, again.node_id) == (pb.TASK_STATE_COMPLETED, victim.node_id)
    cluster.wait_converged()


def test_a_dead_node_is_removed_and_the_rest_carry_on(make_cluster):
    cluster: Cluster = make_cluster(3, extra_args=FAST)
    leader = cluster.leader()
    dead, follower = cluster.followers()
    dead.kill9()
    with follower.client(timeout_s=60) as client:
        removal = client.remove_node(dead.node_id)
        assert sorted(removal.members) == sorted([leader.raft, follower.raft])
        assert removal.commit_index and removal.header.applied_index >= removal.commit_index
        # Idempotent: a retry of an interrupted removal finishes or confirms it.
        assert client.remove_node(dead.node_id).members == removal.members
        with pytest.raises(FailedPrecondition, match="was removed"):
            client.drain_node(dead.node_id)
        assert dead.node_id not in [n.id for n in client.list_nodes().nodes]
        gone = [n for n in client.list_nodes(include_removed=True).nodes if n.id == dead.node_id]
        assert [(n.status, n.status_reason) for n in gone] == [
            (pb.NODE_STATUS_REMOVED, "removed by request")
        ]
        done = client.get_task_result(
            client.submit_task(shell_spec(["echo", "ok"])).task.id, wait=True, timeout_ms=60_000
        ).task
        assert done.state == pb.TASK_STATE_COMPLETED
        assert done.node_id in (leader.node_id, follower.node_id)
    # Two members left: both must agree for anything to commit, and they do.
    cluster.wait_converged([leader, follower])


def test_remove_refuses_the_leader_unknown_nodes_and_bad_ids(make_cluster):
    cluster: Cluster = make_cluster(3, extra_args=FAST)
    leader = cluster.leader()
    follower = cluster.followers()[0]
    with follower.client() as client:
        with pytest.raises(FailedPrecondition, match="is the Raft leader"):
            client.remove_node(leader.node_id)
        with pytest.raises(NotFound, match="no node with id ghost"):
            client.remove_node("ghost")
        with pytest.raises(InvalidArgument):
            client.remove_node("")
        assert len(client.get_cluster_status().nodes) == 3
    result = _cli(follower, "node", "remove", leader.node_id)
    assert result.returncode != 0 and "is the Raft leader" in result.stderr
