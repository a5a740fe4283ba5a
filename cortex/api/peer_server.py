"""The peer listener: node-to-node calls (cortex.internal.v1.PeerService) on
their own gRPC server with their own threads, so no client load on the
public listener can delay a heartbeat or a relay. Same TLS settings as the
public server; every call needs the peer credential (cortex.api.auth)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc

from cortex.api.admission import AdmissionInterceptor, peer_admission
from cortex.api.auth import PeerAuthInterceptor
from cortex.api.peer_convert import heartbeat_from_proto, removal_to_proto
from cortex.api.servicer import maps_errors, maps_stream_errors
from cortex.api.tls import ServerTls
from cortex.errors import ConfigError, FailedPrecondition, InvalidArgument
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.membership.administration import NodeAdministration
from cortex.membership.cluster_status import ClusterStatus
from cortex.membership.heartbeat import HeartbeatReceiver
from cortex.output import StreamingService
from cortex.output.relay import RELAY_HEADER

log = logging.getLogger(__name__)

PEER_SERVICE_PREFIX = "/cortex.internal.v1.PeerService/"
# Threads beyond the relayed-stream limit, for heartbeats and other short
# calls: heartbeats from every node each interval take milliseconds each.
SHORT_CALL_THREADS = 16
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# How long a ReadIndex call without a deadline may take.
READ_INDEX_TIMEOUT_S = 5.0


def _caller(context: grpc.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == RELAY_HEADER:
            return str(value)
    return "another node"


def read_index_unavailable(timeout_s: float) -> int:
    """The read index of a server without a Raft group to ask (tests, tools)."""
    raise FailedPrecondition("read index not available")


class PeerServicer(peer_grpc.PeerServiceServicer):
    def __init__(
        self,
        heartbeats: HeartbeatReceiver,
        nodes: NodeAdministration,
        cluster: ClusterStatus,
        streaming: StreamingService | None,
        read_index: Callable[[float], int] = read_index_unavailable,
    ) -> None:
        """`read_index(timeout_s)`: an index at or past everything committed
        before the call, when this node leads (cortex.api.consistency)."""
        self._heartbeats = heartbeats
        self._nodes = nodes
        self._cluster = cluster
        self._streaming = streaming
        self._read_index = read_index

    @maps_errors
    def Heartbeat(
        self, request: peer_pb.HeartbeatRequest, context: grpc.ServicerContext
    ) -> peer_pb.HeartbeatResponse:
        if not request.node_id:
            raise InvalidArgument("node_id is required")
        self._heartbeats.receive(heartbeat_from_proto(request))
        return peer_pb.HeartbeatResponse()

    @maps_stream_errors
    def RelayTaskOutput(
        self, request: peer_pb.RelayTaskOutputRequest, context: grpc.ServicerContext
    ) -> Iterator[peer_pb.RelayTaskOutputResponse]:
        if self._streaming is None:
            raise FailedPrecondition("this server does not stream output")
        chunks = self._streaming.task_output(request.request, context, relayed_for=_caller(context))
        for chunk in chunks:
            yield peer_pb.RelayTaskOutputResponse(chunk=chunk)

    @maps_errors
    def GetAppliedIndex(
        self, request: peer_pb.GetAppliedIndexRequest, context: grpc.ServicerContext
    ) -> peer_pb.GetAppliedIndexResponse:
        return peer_pb.GetAppliedIndexResponse(applied_index=self._cluster.applied_index())

    @maps_errors
    def GetNodeState(
        self, request: peer_pb.GetNodeStateRequest, context: grpc.ServicerContext
    ) -> peer_pb.GetNodeStateResponse:
        state = self._cluster.node_state()
        return peer_pb.GetNodeStateResponse(
            applied_index=state.applied_index,
            state_digest=state.state_digest,
            commit_index=state.commit_index,
            term=state.term,
            raft_state=state.raft_state,
        )

    @maps_errors
    def ReadIndex(
        self, request: peer_pb.ReadIndexRequest, context: grpc.ServicerContext
    ) -> peer_pb.ReadIndexResponse:
        remaining = context.time_remaining()
        timeout_s = READ_INDEX_TIMEOUT_S if remaining is None else max(remaining - 0.1, 0.0)
        return peer_pb.ReadIndexResponse(read_index=self._read_index(timeout_s))

    @maps_errors
    def PassRemoval(
        self, request: peer_pb.PassRemovalRequest, context: grpc.ServicerContext
    ) -> peer_pb.PassRemovalResponse:
        removal = self._nodes.remove(request.request.node_id, request.request.reason)
        response = removal_to_proto(removal)
        # Applied here before the call returns: at or past the removal's index.
        response.commit_index = self._cluster.applied_index()
        return peer_pb.PassRemovalResponse(response=response)


class PeerListener:
    """Bound at construction (so its port, possibly chosen by the OS, is
    known before the node announces it); serving once `start` is called."""

    def __init__(
        self,
        node_id: str,
        address: str,
        secret: str,
        max_streams: int,
        tls: ServerTls | None = None,
    ) -> None:
        self.admission = peer_admission(node_id, max_streams)
        threads = max_streams + SHORT_CALL_THREADS
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="peer"),
            interceptors=[
                PeerAuthInterceptor(secret),
                AdmissionInterceptor(self.admission, (PEER_SERVICE_PREFIX,)),
            ],
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
            # A call beyond the threads is refused at once, never queued.
            maximum_concurrent_rpcs=threads,
        )
        try:
            if tls is None:
                self.port = self._server.add_insecure_port(address)
            else:
                self.port = self._server.add_secure_port(address, tls.credentials())
        except RuntimeError as err:
            raise ConfigError(f"config key peer: cannot listen on {address}: {err}") from None
        if self.port == 0:
            raise ConfigError(f"config key peer: cannot listen on {address} (in use?)")

    def start(self, servicer: peer_grpc.PeerServiceServicer) -> None:
        peer_grpc.add_PeerServiceServicer_to_server(servicer, self._server)
        self._server.start()

    def stop(self, grace_s: float | None = None) -> Any:
        return self._server.stop(grace_s)
