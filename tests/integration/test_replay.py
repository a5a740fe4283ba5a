"""Replaying captured node-to-node traffic, as an attacker on the network
could: real heartbeats and a real join exchange are captured on the wire
(tests/peer_capture.py) and sent again, byte for byte, later. A replayed
heartbeat keeps no dead node online, not even on a node that restarted
since (and so remembers nothing); a replayed join re-adds nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest

from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, wait_until
from tests.peer_capture import CAPTURE_ENV, LAUNCHER, Captured, read_capture

pytestmark = pytest.mark.cluster

FAILURE_TIMEOUT_S = 3.0
HEARTBEAT_INTERVAL_S = 0.5
FAST = [
    "--failure-timeout", str(FAILURE_TIMEOUT_S), "--heartbeat-interval",
    str(HEARTBEAT_INTERVAL_S), "--shutdown-drain", "0",
]  # fmt: skip
# Default max_clock_skew_s plus one heartbeat interval.
FRESHNESS_WINDOW_S = 5.0 + HEARTBEAT_INTERVAL_S
HEARTBEAT = "/cortex.internal.v1.PeerService/Heartbeat"
JOIN = "/cortex.internal.v1.JoinService/JoinCluster"


def _send_raw(
    channel: grpc.Channel, method: str, captured: Captured, payload: bytes | None = None
) -> tuple[grpc.StatusCode, str]:
    """Sends captured bytes as they were (no serializer: bytes in, bytes out)."""
    call = channel.unary_unary(method)
    try:
        call(payload if payload is not None else captured.payload,
             metadata=captured.metadata, timeout=5)  # fmt: skip
    except grpc.RpcError as err:
        return err.code(), err.details() or ""
    return grpc.StatusCode.OK, ""


def _capturing(cluster: Cluster, node: ClusterNode) -> Path:
    path = node.data_dir.parent / f"{node.node_id}.capture"
    node.launcher = LAUNCHER
    node.env = {CAPTURE_ENV: str(path)}
    return path


def _peer_addresses(node: ClusterNode) -> dict[str, str]:
    with node.client(timeout_s=5) as client:
        return {n.id: n.peer_address for n in client.list_nodes().nodes}


def _status_of(node: ClusterNode, node_id: str) -> pb.NodeStatus:
    with node.client(timeout_s=5) as client:
        return next(n.status for n in client.list_nodes().nodes if n.id == node_id)


def test_a_replayed_heartbeat_keeps_no_dead_node_online(make_cluster):
    cluster: Cluster = make_cluster(3, extra_args=FAST, start=False)
    captures = {node.node_id: _capturing(cluster, node) for node in cluster.nodes}
    cluster.start()
    cluster.wait_ready()
    leader = cluster.leader()
    sender, other = cluster.followers()
    leader_peer = _peer_addresses(leader)[leader.node_id]
    assert leader_peer and leader_peer != leader.grpc

    def to_leader() -> list[Captured]:
        return [
            c
            for c in read_capture(captures[sender.node_id])
            if c.kind == "heartbeat" and c.address == leader_peer
        ]

    wait_until(lambda: len(to_leader()) >= 4, 30, what="heartbeats from the sender captured")
    sender.kill9()
    killed_at = time.monotonic()
    # The last but one: its send had finished before the next was made, so
    # the leader took it (the last may have died with the sender).
    captured = to_leader()[-2]
    sent_at_ms = peer_pb.HeartbeatRequest.FromString(captured.payload).sent_at_ms

    answers: list[tuple[grpc.StatusCode, str]] = []
    stop = threading.Event()

    def replay() -> None:
        with grpc.insecure_channel(leader_peer) as channel:
            while not stop.is_set():
                answers.append(_send_raw(channel, HEARTBEAT, captured))
                stop.wait(0.1)

    replayer = threading.Thread(target=replay)
    replayer.start()
    try:
        wait_until(
            lambda: _status_of(leader, sender.node_id) == pb.NODE_STATUS_OFFLINE,
            FAILURE_TIMEOUT_S + 10,
            interval=0.1,
            what="the dead sender to be marked offline despite the replays",
        )
        offline_after = time.monotonic() - killed_at
    finally:
        stop.set()
        replayer.join(10)
    assert answers, "no replay was sent"
    assert {code for code, _ in answers} == {grpc.StatusCode.FAILED_PRECONDITION}, answers[:3]
    assert all("replay" in detail for _, detail in answers), answers[:3]
    # Silent for the failure timeout, plus the supervisor's half-second
    # round and a commit: the replays bought nothing.
    assert offline_after < FAILURE_TIMEOUT_S + 3, offline_after

    # A node that restarted since remembers no heartbeat, and still refuses
    # this one: it was sent too long ago.
    old_peer = _peer_addresses(leader)[other.node_id]
    other.stop()
    other.start(peers=cluster.peers)
    # Its peer listener has a new port; it announces it once it is back.
    restarted_peer = wait_until(
        lambda: (
            _peer_addresses(leader).get(other.node_id) not in (old_peer, "", None)
            and _peer_addresses(leader)[other.node_id]
        ),
        60,
        what="the restarted node to announce its peer listener",
    )
    wait_until(
        lambda: time.time() * 1000 - sent_at_ms > FRESHNESS_WINDOW_S * 1000 + 500,
        FRESHNESS_WINDOW_S + 5,
        what="the captured heartbeat to age past the freshness window",
    )
    with grpc.insecure_channel(restarted_peer) as channel:
        code, detail = _send_raw(channel, HEARTBEAT, captured)
    assert code == grpc.StatusCode.FAILED_PRECONDITION, (code, detail)
    assert "old" in detail and "replay" in detail, detail
    assert _status_of(other, sender.node_id) == pb.NODE_STATUS_OFFLINE


def test_a_replayed_join_of_a_removed_node_is_refused(make_cluster):
    cluster: Cluster = make_cluster(2, extra_args=FAST)
    leader = cluster.leader()
    joiner = cluster.add_node()
    capture = _capturing(cluster, joiner)
    joiner.start(join=leader.grpc)
    with leader.client() as client:
        wait_until(
            lambda: any(
                n.id == joiner.node_id and n.status == pb.NODE_STATUS_ACTIVE
                for n in client.list_nodes().nodes
            ),
            60,
            what="the new node to join",
        )
        joins = [c for c in read_capture(capture) if c.kind == "join"]
        assert len(joins) == 1 and joins[0].address == leader.grpc
        join = joins[0]
        captured = peer_pb.JoinClusterRequest.FromString(join.payload)
        assert captured.raft_address == joiner.raft
        assert captured.role in (pb.NODE_ROLE_UNSPECIFIED, pb.NODE_ROLE_VOTER)

        removal = client.remove_node(joiner.node_id, "retired")
        assert joiner.raft not in removal.members
        wait_until(lambda: not joiner.alive, 30, what="the removed node to stop")
        before = client.get_cluster_status()

        with grpc.insecure_channel(leader.grpc) as channel:
            # The same bytes again: their nonce is spent.
            code, detail = _send_raw(channel, JOIN, join)
            assert code == grpc.StatusCode.UNAUTHENTICATED, (code, detail)
            assert "challenge" in detail, detail
            # With a fresh nonce, the old proof does not fit.
            request = peer_pb.JoinClusterRequest.FromString(join.payload)
            request.nonce = (
                peer_grpc.JoinServiceStub(channel)
                .JoinChallenge(peer_pb.JoinChallengeRequest(), metadata=join.metadata, timeout=5)
                .nonce
            )
            code, detail = _send_raw(channel, JOIN, join, request.SerializeToString())
            assert code == grpc.StatusCode.UNAUTHENTICATED, (code, detail)
            assert "secret" in detail, detail

        # Nothing was proposed: no membership change entered the log.
        after = client.get_cluster_status()
        assert after.commit_index == before.commit_index
        assert [n.id for n in after.nodes] == sorted(n.node_id for n in cluster.nodes[:2])
        statuses = {n.id: n.status for n in client.list_nodes(include_removed=True).nodes}
        assert statuses[joiner.node_id] == pb.NODE_STATUS_REMOVED
