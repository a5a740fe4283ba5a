"""Observer nodes on real processes over loopback: `cortex node start
--observer --join ...` joins a running cluster as a read replica. It catches
up from a snapshot, serves reads of what the voters wrote from its own state,
forwards writes, never gets a task, never votes (three voters and two
observers keep a quorum with one voter killed and lose it with two), and a
data dir keeps its role."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cortex.api.client import CortexClient
from cortex.errors import Unavailable
from cortex.raft.group import SNAPSHOT_FILE
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import SECRET, Cluster, ClusterNode, shell_spec, wait_until, write_secret

PROPOSE_TIMEOUT_S = 4.0
TERMINAL = {pb.TASK_STATE_COMPLETED, pb.TASK_STATE_FAILED, pb.TASK_STATE_DEAD_LETTER}


def _voters_cluster(make_cluster: Callable[..., Cluster], voter_args: list[str]) -> Cluster:
    cluster = make_cluster(3, start=False)
    for node in cluster.nodes:
        node.env["CORTEX_PROPOSE_TIMEOUT_S"] = str(PROPOSE_TIMEOUT_S)
        node.extra_args += voter_args
    cluster.start()
    wait_until(
        lambda: all(n.status().leader_id for n in cluster.nodes)
        and len(_active(cluster.nodes[0])) == 3,
        60, what="the voters to elect a leader and register",
    )  # fmt: skip
    return cluster


def _active(node: ClusterNode) -> dict[str, pb.Node]:
    with node.client(timeout_s=5) as client:
        nodes = client.list_nodes().nodes
    return {n.id: n for n in nodes if n.status == pb.NODE_STATUS_ACTIVE}


def _start_observer(cluster: Cluster, join_through: ClusterNode) -> ClusterNode:
    observer = cluster.add_node(extra_args=["--observer"])
    observer.node_id = observer.node_id.replace("n", "obs", 1)
    observer.data_dir = observer.data_dir.with_name(observer.node_id)
    observer.env["CORTEX_PROPOSE_TIMEOUT_S"] = str(PROPOSE_TIMEOUT_S)
    observer.start(join=join_through.grpc)
    return observer


def _observer_ready(observer: ClusterNode, voters: list[ClusterNode]) -> bool:
    status = observer.status()
    listed = _active(voters[0])
    return (
        status.raft_role == pb.RAFT_ROLE_OBSERVER
        and status.node_role == pb.NODE_ROLE_OBSERVER
        and bool(status.leader_id)
        and status.has_quorum
        and observer.node_id in listed
    )


def _submit(node: ClusterNode, count: int, prefix: str) -> list[str]:
    with node.client() as client:
        return [
            client.submit_task(shell_spec(["echo", f"{prefix}-{i}"]), f"{prefix}-{i}").task.id
            for i in range(count)
        ]


def _submit_until_accepted(node: ClusterNode, key: str, timeout: float = 30.0) -> str:
    """One write, retried with its idempotency key while a leader is elected."""

    def attempt() -> str | None:
        with node.client(timeout_s=PROPOSE_TIMEOUT_S + 5) as client:
            return str(client.submit_task(shell_spec(["echo", key]), key).task.id)

    return wait_until(attempt, timeout, interval=0.2, what=f"a write through {node.node_id}")


def test_an_observer_replicates_serves_reads_forwards_writes_and_runs_nothing(
    make_cluster: Callable[..., Cluster],
) -> None:
    # Voters compact their logs early: a late observer starts from a snapshot.
    cluster = _voters_cluster(make_cluster, ["--compaction-min-entries", "10"])
    voters = list(cluster.nodes)
    early = _submit(voters[0], 15, "early")
    observers = [_start_observer(cluster, voters[0]), _start_observer(cluster, voters[1])]
    for observer in observers:
        wait_until(lambda o=observer: _observer_ready(o, voters), 60, what="the observer")
        # The leader's, received: observers compact only after 5000 entries.
        assert (observer.data_dir / SNAPSHOT_FILE).exists()
    observer_ids = {o.node_id for o in observers}
    voter_ids = {v.node_id for v in voters}

    # Tasks submitted on voters, round-robin, plus some through an observer.
    task_ids = list(early)
    for number, voter in enumerate(voters):
        task_ids += _submit(voter, 5, f"voter{number}")
    task_ids += _submit(observers[0], 5, "via-observer")  # forwarded to the leader

    # Every task is readable on each observer from its own state, and done.
    for observer in observers:
        with observer.client() as client:
            client.consistency = pb.READ_CONSISTENCY_STALE

            def all_done(c: CortexClient = client) -> bool:
                return all(c.get_task(t).task.state in TERMINAL for t in task_ids)

            wait_until(all_done, 90, interval=0.2, what=f"tasks on {observer.node_id}")
            for task_id in task_ids:
                reply = client.get_task(task_id, include_events=True)
                assert reply.header.node_id == observer.node_id
                assert reply.task.state == pb.TASK_STATE_COMPLETED, reply.task
                assert reply.task.node_id in voter_ids
                # Placed, started and completed on voters (a submission names
                # the node that took it, which may be an observer).
                placed = {e.node_id for e in reply.events if e.type != pb.EVENT_TYPE_SUBMITTED}
                assert placed <= voter_ids, reply.events
            for observer_id in observer_ids:
                assert list(client.list_tasks(node_id=observer_id).tasks) == []
            nodes = {n.id: n for n in client.list_nodes().nodes}
        assert {i for i, n in nodes.items() if n.role == pb.NODE_ROLE_OBSERVER} == observer_ids
        assert {i for i, n in nodes.items() if n.role == pb.NODE_ROLE_VOTER} == voter_ids
        assert all(nodes[i].raft_address == "" and not nodes[i].executors for i in observer_ids)

    # Read-your-writes on an observer: SESSION at the index a voter wrote at.
    with voters[2].client() as writer:
        written = writer.submit_task(shell_spec(["echo", "session"]), "session")
    for observer in observers:
        with observer.client() as client:
            client.advance_session(written.commit_index)
            reply = client.get_task(written.task.id)
        assert reply.header.consistency == pb.READ_CONSISTENCY_SESSION
        assert reply.header.applied_index >= written.commit_index
        assert reply.task.id == written.task.id

    # LINEARIZABLE on an observer: it asks the leader for the read index,
    # so a write acknowledged on a voter is seen without handing any index over.
    for number in range(5):
        with voters[number % 3].client() as writer:
            fresh = writer.submit_task(shell_spec(["echo", "fresh"]), f"fresh-{number}").task
        for observer in observers:
            with observer.client() as client:
                client.consistency = pb.READ_CONSISTENCY_LINEARIZABLE
                reply = client.get_task(fresh.id)
            assert reply.header.consistency == pb.READ_CONSISTENCY_LINEARIZABLE
            assert reply.task.id == fresh.id

    # Voters and observers hold the same state.
    cluster.wait_converged([*voters, *observers])
    for voter in voters:
        assert voter.status().node_role == pb.NODE_ROLE_VOTER

    # Removing an observer leaves the voters as they were; it stops itself.
    second = observers[1]
    with voters[0].client() as client:
        removal = client.remove_node(second.node_id, "observer no longer needed")
    assert sorted(removal.members) == sorted(v.raft for v in voters)
    wait_until(lambda: not second.alive, 30, what="the removed observer to stop")

    # A data dir keeps its role: the observer's cannot start as a voter.
    first = observers[0]
    first.stop()
    refused = subprocess.run(
        [
            sys.executable, "-m", "cortex.cli.main", "node", "start",
            "--node-id", first.node_id, "--data-dir", str(first.data_dir),
            "--raft", first.raft, "--grpc", first.grpc, "--join", voters[0].grpc,
            "--secret-file", str(write_secret(first.data_dir.parent / "refused.secret", SECRET)),
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "cannot start as a voter" in refused.stderr + refused.stdout


def test_observers_do_not_count_towards_a_quorum(make_cluster: Callable[..., Cluster]) -> None:
    cluster = _voters_cluster(make_cluster, [])
    voters = list(cluster.nodes)
    observers = [_start_observer(cluster, voters[0]), _start_observer(cluster, voters[2])]
    for observer in observers:
        wait_until(lambda o=observer: _observer_ready(o, voters), 60, what="the observer")

    # One voter of three killed (the leader): the other two elect one and write.
    leader_id = voters[0].status().leader_id
    first = next(v for v in voters if v.node_id == leader_id)
    first.kill9()
    survivors = [v for v in voters if v is not first]
    _submit_until_accepted(survivors[0], "one-voter-down", timeout=60)
    _submit_until_accepted(observers[0], "one-voter-down-via-observer", timeout=30)
    assert all(not o.alive or o.status().raft_role == pb.RAFT_ROLE_OBSERVER for o in observers)

    # Two of three killed: one voter and two observers are no quorum.
    survivors[0].kill9()
    last = survivors[1]
    for node in (last, *observers):
        started = time.monotonic()
        with (
            node.client(timeout_s=PROPOSE_TIMEOUT_S + 10) as client,
            pytest.raises(Unavailable),
        ):
            client.submit_task(shell_spec(["echo", "no"]), f"no-quorum-{node.node_id}")
        assert time.monotonic() - started < PROPOSE_TIMEOUT_S + 2

    def no_leader(node: ClusterNode) -> bool:
        status = node.status()
        return (
            status.raft_role == pb.RAFT_ROLE_OBSERVER
            and not status.leader_id
            and not status.has_quorum
        )

    for observer in observers:
        wait_until(lambda o=observer: no_leader(o), 30, what="the observer to lose its leader")


def test_an_observer_with_peers_is_refused(tmp_path: Path) -> None:
    secret = write_secret(tmp_path / "secret", SECRET)
    refused = subprocess.run(
        [
            sys.executable, "-m", "cortex.cli.main", "node", "start", "--observer",
            "--data-dir", str(tmp_path / "data"), "--peers", "127.0.0.1:1,127.0.0.1:2",
            "--secret-file", str(secret),
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0
    output = refused.stderr + refused.stdout
    assert "config key observer" in output and "--join" in output
