"""cortex.internal.v1.JoinService: joining, served on the public gRPC port
(a new node knows only that address) beside, not inside, the public
CortexService. Its calls need the peer credential (the public server gates
them with `PeerAuthInterceptor`), not the API token, and JoinCluster proves
the cluster secret again over a one-time nonce (cortex.membership.joining)."""

from __future__ import annotations

import grpc

from cortex.api.servicer import maps_errors
from cortex.errors import InvalidArgument
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.membership.cluster_status import ClusterStatus
from cortex.membership.joining import JoinAdmission, JoinClaim
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

JOIN_SERVICE_PREFIX = "/cortex.internal.v1.JoinService/"


class JoinServicer(peer_grpc.JoinServiceServicer):
    def __init__(self, joins: JoinAdmission, cluster: ClusterStatus) -> None:
        self._joins = joins
        self._cluster = cluster

    @maps_errors
    def JoinChallenge(
        self, request: peer_pb.JoinChallengeRequest, context: grpc.ServicerContext
    ) -> peer_pb.JoinChallengeResponse:
        nonce, ttl_s = self._joins.challenge()
        return peer_pb.JoinChallengeResponse(nonce=nonce, ttl_ms=int(ttl_s * 1000))

    @maps_errors
    def JoinCluster(
        self, request: peer_pb.JoinClusterRequest, context: grpc.ServicerContext
    ) -> peer_pb.JoinClusterResponse:
        role = request.role or pb.NODE_ROLE_VOTER
        if role not in pb.NodeRole.values():
            raise InvalidArgument(f"role: unknown value {request.role}")
        # An observer listens on no Raft port, so it has no Raft address.
        if not request.node_id or (not request.raft_address and role != pb.NODE_ROLE_OBSERVER):
            raise InvalidArgument("node_id and raft_address are required to join")
        claim = JoinClaim(
            request.node_id,
            request.raft_address,
            request.grpc_address,
            request.peer_address,
            enum_name(pb.NodeRole, role),
        )
        members = self._joins.admit(claim, request.nonce, request.proof)
        return peer_pb.JoinClusterResponse(
            raft_members=members, leader=self._cluster.leader_address or ""
        )
