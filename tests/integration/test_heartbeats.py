"""Heartbeats carry resource reports outside Raft, to each node's peer
listener, signed with the cluster secret: one without the peer credential,
altered, replayed, or sent too long ago (or too far ahead) is refused, and
the public address does not take them at all."""

from __future__ import annotations

import secrets
import time

import grpc
import pytest

from cortex.api.auth import peer_metadata
from cortex.api.peer_convert import heartbeat_to_proto
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.membership.heartbeat import signed_heartbeat
from cortex.scheduler.model import NodeResources
from tests.cluster import SECRET

pytestmark = pytest.mark.cluster

BOOT = secrets.token_hex(16)
CREDENTIAL = peer_metadata(SECRET)


def _signed(seq: int, sent_at: int | None = None, boot: str = BOOT) -> peer_pb.HeartbeatRequest:
    return heartbeat_to_proto(signed_heartbeat(
        SECRET, "probe", boot, seq, sent_at or int(time.time() * 1000),
        NodeResources(cpu_cores=4, memory_available_mb=2048), {"arch": "x86_64"}, 1,
    ))  # fmt: skip


def _refusal(call, request, metadata=CREDENTIAL) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, metadata=metadata, timeout=5)
    return refused.value.code(), refused.value.details() or ""


def test_heartbeats_are_taken_only_on_the_peer_listener_and_only_once(make_cluster):
    node = make_cluster(1).nodes[0]
    with node.client() as client:
        peer_address = client.list_nodes().nodes[0].peer_address
    assert peer_address and peer_address != node.grpc

    with grpc.insecure_channel(node.grpc) as public:
        code, _ = _refusal(peer_grpc.PeerServiceStub(public).Heartbeat, _signed(1))
        assert code == grpc.StatusCode.UNIMPLEMENTED

    with grpc.insecure_channel(peer_address) as channel:
        stub = peer_grpc.PeerServiceStub(channel)
        for metadata in ((), (("cortex-peer-auth", "0" * 64),)):
            code, detail = _refusal(stub.Heartbeat, _signed(1), metadata)
            assert code == grpc.StatusCode.UNAUTHENTICATED and "peer credential" in detail

        stub.Heartbeat(_signed(1), metadata=CREDENTIAL, timeout=5)

        code, detail = _refusal(stub.Heartbeat, _signed(1))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "replay" in detail

        for change in ("memory", "running", "seq", "boot"):
            altered = _signed(2)
            if change == "memory":
                altered.resources.memory_available_mb = 64_000
            elif change == "running":
                altered.running_tasks = 0
            elif change == "seq":
                altered.seq = 99
            else:
                altered.boot_id = secrets.token_hex(16)
            code, _ = _refusal(stub.Heartbeat, altered)
            assert code == grpc.StatusCode.UNAUTHENTICATED, change

        now = int(time.time() * 1000)
        for sent_at, word in ((now - 60_000, "old"), (now + 60_000, "ahead")):
            code, detail = _refusal(stub.Heartbeat, _signed(3, sent_at))
            assert code == grpc.StatusCode.FAILED_PRECONDITION and word in detail, detail

        taken = int(time.time() * 1000)
        stub.Heartbeat(_signed(2, taken), metadata=CREDENTIAL, timeout=5)
        # A new boot of the sender is taken with a fresh report (sent after
        # the last one taken, even within the same millisecond)...
        new_boot = secrets.token_hex(16)
        stub.Heartbeat(_signed(1, taken + 5, boot=new_boot), metadata=CREDENTIAL, timeout=5)
        # ...and the old boot cannot come back with reports sent before it.
        code, detail = _refusal(stub.Heartbeat, _signed(3, now - 1000))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "replay" in detail
