"""Heartbeats carry resource reports outside Raft, signed with the cluster
secret: a report that was altered, or replayed, is refused."""

from __future__ import annotations

import time

import grpc
import pytest

from cortex.api.convert import resources_from_proto
from cortex.membership.heartbeat import heartbeat_proof
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.cluster import SECRET

pytestmark = pytest.mark.cluster


def _signed(sent_at: int, memory_mb: float = 2048, running: int = 1) -> pb.HeartbeatRequest:
    request = pb.HeartbeatRequest(
        node_id="probe",
        resources=pb.NodeResources(cpu_cores=4, memory_available_mb=memory_mb),
        capabilities={"arch": "x86_64"},
        running_tasks=running,
        sent_at_ms=sent_at,
    )
    request.proof = heartbeat_proof(
        SECRET, "probe", sent_at, resources_from_proto(request.resources),
        dict(request.capabilities), running,
    )  # fmt: skip
    return request


def test_altered_or_replayed_heartbeats_are_refused(make_cluster):
    node = make_cluster(1).nodes[0]
    now = int(time.time() * 1000)
    with grpc.insecure_channel(node.grpc) as channel:
        stub = pb_grpc.CortexStub(channel)
        stub.Heartbeat(_signed(now), timeout=5)

        with pytest.raises(grpc.RpcError) as replayed:
            stub.Heartbeat(_signed(now), timeout=5)
        assert replayed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "not newer" in (replayed.value.details() or "")

        for change in ("memory", "running"):
            altered = _signed(now + 1)
            if change == "memory":
                altered.resources.memory_available_mb = 64_000
            else:
                altered.running_tasks = 0
            with pytest.raises(grpc.RpcError) as refused:
                stub.Heartbeat(altered, timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, change

        stub.Heartbeat(_signed(now + 1), timeout=5)
