"""The joining node's side of cortex.internal.v1.JoinService: asks the node it
joins through (at its public gRPC address) for a challenge and answers it,
every call carrying the peer credential derived from the cluster secret."""

from __future__ import annotations

from types import TracebackType

import grpc

from cortex.api.auth import peer_metadata
from cortex.api.channels import open_channel, rpc_error
from cortex.api.tls import ClientTls
from cortex.errors import CortexError
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.membership.joining import JoinClaim, join_proof
from cortex.proto_enums import enum_value
from cortex.v1 import cortex_pb2 as pb

JOIN_TIMEOUT_S = 30.0


class JoinClient:
    def __init__(
        self, address: str, secret: str, tls: ClientTls | None, timeout_s: float = JOIN_TIMEOUT_S
    ) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._secret = secret
        self._tls = tls
        self._metadata = peer_metadata(secret)
        self._channel = open_channel(address, tls)
        self._stub = peer_grpc.JoinServiceStub(self._channel)

    def __enter__(self) -> JoinClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _error(self, err: grpc.RpcError) -> CortexError:
        return rpc_error(self.address, err, self._tls)

    def challenge(self) -> str:
        """A nonce for `join`, valid once and briefly, on this node only."""
        try:
            reply = self._stub.JoinChallenge(
                peer_pb.JoinChallengeRequest(), timeout=self.timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as err:
            raise self._error(err) from None
        return str(reply.nonce)

    def join_request(self, claim: JoinClaim, nonce: str) -> peer_pb.JoinClusterRequest:
        """The JoinCluster request for `claim`, proving the secret over `nonce`."""
        return peer_pb.JoinClusterRequest(
            node_id=claim.node_id,
            raft_address=claim.raft_address,
            grpc_address=claim.grpc_address,
            peer_address=claim.peer_address,
            role=enum_value(pb.NodeRole, claim.role),
            nonce=nonce,
            proof=join_proof(self._secret, nonce, claim),
        )

    def join_cluster(self, request: peer_pb.JoinClusterRequest) -> list[str]:
        """The Raft members once the node is admitted."""
        try:
            reply = self._stub.JoinCluster(request, timeout=self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as err:
            raise self._error(err) from None
        return list(reply.raft_members)

    def join(self, claim: JoinClaim) -> list[str]:
        """Joins through this node: a challenge, then the proof of the secret."""
        return self.join_cluster(self.join_request(claim, self.challenge()))
