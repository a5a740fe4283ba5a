"""Read consistency on the public API: every read waits until the node has
applied what its ReadOptions ask for (SESSION: `min_index`; LINEARIZABLE:
the leader's read index), and every response carries a ResponseHeader
saying which state it reflects."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from cortex.v1 import cortex_pb2 as pb


class ReadGate:
    """The servicer's one place for consistency: `before_read` at the start
    of every read, `header` in every response."""

    def __init__(self, node_id: str, applied_index: Callable[[], int]) -> None:
        self._node_id = node_id
        self._applied_index = applied_index

    def before_read(
        self, options: pb.ReadOptions, context: grpc.ServicerContext | None
    ) -> pb.ReadConsistency.ValueType:
        """Waits (bounded by the call's deadline) until this node may answer a
        read with these options; returns the consistency it is served at.
        Raises Unavailable when it cannot get there in time."""
        return options.consistency or pb.READ_CONSISTENCY_SESSION

    def header(
        self, consistency: pb.ReadConsistency.ValueType = pb.READ_CONSISTENCY_UNSPECIFIED
    ) -> pb.ResponseHeader:
        """The header of a response answered now (`consistency` unset for writes)."""
        return pb.ResponseHeader(
            node_id=self._node_id,
            applied_index=self._applied_index(),
            consistency=consistency,
        )
