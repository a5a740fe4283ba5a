"""The one way a node calls another: the other node's peer listener, with
the peer credential, over TLS when this node has TLS settings. One channel
per address, kept open. Implements membership's `PeerCalls` and the output
relay's `RelayCalls`; failed calls raise Cortex errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import grpc

from cortex.api.auth import peer_metadata
from cortex.api.channels import connect_error, open_channel, rpc_error
from cortex.api.peer_convert import heartbeat_to_proto, removal_from_proto
from cortex.api.tls import ClientTls
from cortex.errors import CortexError
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.membership.peer_calls import Heartbeat, NodeState, Removal
from cortex.v1 import cortex_pb2 as pb

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # A restarted node should be reachable again within seconds, not after
    # gRPC's default reconnect back-off of up to two minutes.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class RelayedStream:
    """A RelayTaskOutput call seen as the stream it relays: iterating it
    yields the StreamTaskOutputResponse messages the source sends."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def initial_metadata(self) -> Any:
        return self._call.initial_metadata()

    def cancel(self) -> bool:
        return bool(self._call.cancel())

    def __iter__(self) -> Iterator[pb.StreamTaskOutputResponse]:
        return (message.chunk for message in self._call)


class PeerClient:
    def __init__(self, node_id: str, secret: str, tls: ClientTls | None = None) -> None:
        self.node_id = node_id
        self.tls = tls
        self._metadata = peer_metadata(secret)
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._closed = False

    def _stub(self, address: str) -> peer_grpc.PeerServiceStub:
        with self._lock:
            if self._closed:
                raise CortexError("this node is shutting down")
            channel = self._channels.get(address)
            if channel is None:
                channel = open_channel(address, self.tls, _CHANNEL_OPTIONS)
                self._channels[address] = channel
        return peer_grpc.PeerServiceStub(channel)

    def error(self, address: str, err: grpc.RpcError) -> CortexError:
        return rpc_error(address, err, self.tls)

    def connect_error(self, address: str, detail: str) -> CortexError | None:
        return connect_error(address, detail, self.tls)

    def heartbeat(self, address: str, heartbeat: Heartbeat, timeout_s: float) -> Future[None]:
        """The call runs on gRPC's own threads; its outcome, as a Cortex error
        when it fails, is set on the returned future."""
        outcome: Future[None] = Future()
        try:
            call = self._stub(address).Heartbeat.future(
                heartbeat_to_proto(heartbeat), timeout=timeout_s, metadata=self._metadata
            )
        except CortexError as err:
            outcome.set_exception(err)
            return outcome
        except grpc.RpcError as err:
            outcome.set_exception(self.error(address, err))
            return outcome

        def done(call: Any) -> None:
            if call.cancelled():
                outcome.set_exception(CortexError(f"heartbeat to {address} cancelled"))
                return
            error = call.exception()
            if error is None:
                outcome.set_result(None)
            elif isinstance(error, grpc.RpcError):
                outcome.set_exception(self.error(address, error))
            else:
                outcome.set_exception(error)

        call.add_done_callback(done)
        return outcome

    def stream_output(
        self,
        address: str,
        request: pb.StreamTaskOutputRequest,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> RelayedStream:
        """The call (iterate it for the source's messages; cancel it to stop)."""
        call = self._stub(address).RelayTaskOutput(
            peer_pb.RelayTaskOutputRequest(request=request),
            metadata=(*self._metadata, *metadata),
        )
        return RelayedStream(call)

    def applied_index(self, address: str, timeout_s: float) -> int:
        try:
            reply = self._stub(address).GetAppliedIndex(
                peer_pb.GetAppliedIndexRequest(), timeout=timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as err:
            raise self.error(address, err) from None
        return int(reply.applied_index)

    def node_state(self, address: str, timeout_s: float) -> NodeState:
        """The Raft view and state digest of the node at `address`."""
        try:
            reply = self._stub(address).GetNodeState(
                peer_pb.GetNodeStateRequest(), timeout=timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as err:
            raise self.error(address, err) from None
        return NodeState(
            applied_index=int(reply.applied_index),
            state_digest=reply.state_digest,
            commit_index=int(reply.commit_index),
            term=int(reply.term),
            raft_state=reply.raft_state,
        )

    def read_index(self, address: str, timeout_s: float) -> int:
        """The leader's read index, asked of the leader at `address`."""
        try:
            reply = self._stub(address).ReadIndex(
                peer_pb.ReadIndexRequest(), timeout=timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as err:
            raise self.error(address, err) from None
        return int(reply.read_index)

    def remove_node(self, address: str, node_id: str, reason: str, timeout_s: float) -> Removal:
        try:
            reply = self._stub(address).PassRemoval(
                peer_pb.PassRemovalRequest(
                    request=pb.RemoveNodeRequest(node_id=node_id, reason=reason)
                ),
                timeout=timeout_s,
                metadata=self._metadata,
            )
        except grpc.RpcError as err:
            raise self.error(address, err) from None
        return removal_from_proto(reply.response)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
        for channel in channels:
            channel.close()
