"""Read-your-writes across nodes on a real 3-node cluster: the public client's
session (one Client over every node, round-robin), LINEARIZABLE reads on a
follower after a write acknowledged elsewhere, a cancel on a follower right
after the leader acknowledged the submit, separate CLI invocations on
different nodes, and an old leader cut off from its quorum after a newer
leader committed refusing LINEARIZABLE reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest

from cortex.client import Client, NotFound, Unavailable
from tests.cluster import Cluster, wait_until

pytestmark = pytest.mark.cluster

ROUNDS = 200


def _client(cluster: Cluster, *nodes: int, **options: object) -> Client:
    return Client([cluster.nodes[i].grpc for i in nodes], token="", tls=False, **options)  # type: ignore[arg-type]


def test_one_client_over_every_node_reads_its_writes_on_the_others(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    with _client(cluster, 0, 1, 2) as client:
        for _ in range(ROUNDS):
            task = client.submit_task(["true"], type="noop")
            # Round-robin: the read goes to the node after the one that took the write.
            read = client.get_task(task.id)
            assert read.id == task.id
        assert client.session.index > 0


def test_a_session_read_on_another_node_after_a_write_never_misses_it(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    writer = _client(cluster, 0)
    readers = [_client(cluster, 1), _client(cluster, 2)]
    try:
        for round_ in range(ROUNDS):
            task = writer.submit_task(["true"], type="noop")
            reader = readers[round_ % 2]
            # The writer's session index handed over, as a program passing it on would.
            reader.session.observe_index(writer.session.index)
            assert reader.get_task(task.id).id == task.id
    finally:
        for client in (writer, *readers):
            client.close()


def test_linearizable_reads_on_followers_see_writes_acknowledged_anywhere(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    writers = [_client(cluster, i) for i in range(3)]
    readers = [_client(cluster, i, consistency="linearizable") for i in range(3)]
    stale_misses = 0
    stale = [_client(cluster, i, consistency="stale") for i in range(3)]
    try:
        for round_ in range(ROUNDS):
            task = writers[round_ % 3].submit_task(["true"], type="noop")
            other = (round_ + 1 + round_ % 2) % 3
            try:
                stale[other].get_task(task.id)
            except NotFound:
                stale_misses += 1  # allowed: a STALE read may lag
            assert readers[other].get_task(task.id).id == task.id
    finally:
        for client in (*writers, *readers, *stale):
            client.close()
    print(f"stale reads that missed the write just acknowledged: {stale_misses}/{ROUNDS}")


def test_a_write_on_a_follower_finds_what_the_leader_just_acknowledged(
    make_cluster: Callable[..., Cluster],
) -> None:
    """A cancel sent to a follower right after the leader acknowledged the
    submit: the follower may not have applied the submit yet, but a write
    refuses an unknown id only after catching up with the leader, with or
    without the writer's session index."""
    cluster = make_cluster(3)
    leader = cluster.nodes.index(cluster.leader())
    followers = [i for i in range(3) if i != leader]
    with _client(cluster, leader) as writer:
        cancellers = [_client(cluster, i) for i in followers]
        try:
            for round_ in range(ROUNDS // 2):
                task = writer.submit_task(["sleep", "300"])
                canceller = cancellers[round_ % 2]
                if round_ % 4 < 2:
                    canceller.session.observe_index(writer.session.index)
                assert canceller.cancel_task(task.id, "not needed").state == "cancelled"
            with pytest.raises(NotFound):
                cancellers[0].cancel_task("no-such-task")
        finally:
            for client in cancellers:
                client.close()


def test_separate_cli_invocations_on_different_nodes_see_their_writes(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    env = {**os.environ, "CORTEX_API_TOKEN": ""}
    for round_ in range(10):
        submit_node = cluster.nodes[round_ % 3].grpc
        read_node = cluster.nodes[(round_ + 1) % 3].grpc
        submitted = subprocess.run(
            [sys.executable, "-m", "cortex.cli.main", "--node", submit_node, "task", "submit",
             "--json", "--", "true"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        task_id = json.loads(submitted.stdout)["id"]
        got = subprocess.run(
            [sys.executable, "-m", "cortex.cli.main", "--node", read_node, "task", "get",
             task_id, "--json"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["id"] == task_id


def test_an_old_leader_cut_off_from_its_quorum_refuses_linearizable_reads(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    old = cluster.leader()
    others = [n for n in cluster.nodes if n is not old]
    assert old.process is not None
    os.kill(old.process.pid, signal.SIGSTOP)
    try:
        # The others elect a new leader and commit a write the old one never sees.
        with _client(cluster, *(cluster.nodes.index(n) for n in others)) as client:
            task = wait_until(
                lambda: client.submit_task(["true"], type="noop"),
                timeout=60,
                what="a write on the majority side",
            )
        for node in others:
            assert node.process is not None
            os.kill(node.process.pid, signal.SIGSTOP)
        os.kill(old.process.pid, signal.SIGCONT)
        index = cluster.nodes.index(old)
        with _client(cluster, index, consistency="stale", timeout=5, retries=0) as stale:
            # STALE reads are answered from what the node has, quorum or not.
            # Whether that includes the write depends on whether the new
            # leader's appends sat in the frozen node's socket buffer (the
            # kernel takes them while the process is stopped).
            try:
                stale.get_task(task.id)
            except NotFound:
                pass
        with _client(cluster, index, consistency="linearizable", timeout=4, retries=0) as strict:
            with pytest.raises(Unavailable):
                strict.get_task(task.id)
    finally:
        for node in cluster.nodes:
            if node.alive:
                assert node.process is not None
                os.kill(node.process.pid, signal.SIGCONT)
