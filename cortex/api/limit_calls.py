"""The limit and fairness RPCs of cortex.v1.CortexService, for
`CortexServicer`: limits per concurrency key and weights of fairness keys,
through the node's `LimitOperations`. Reads wait for their ReadOptions;
writes answer once applied on this node, with its applied index as their
commit index."""

from __future__ import annotations

import grpc

from cortex.api.consistency import ReadGate, caught_up_before_not_found
from cortex.api.limit_convert import limit_to_proto, weight_to_proto
from cortex.api.status_codes import maps_errors
from cortex.errors import FailedPrecondition
from cortex.limit_operations import LimitOperations
from cortex.v1 import cortex_pb2 as pb


class LimitCalls:
    """Mixed into `CortexServicer`, which sets these attributes."""

    _limits: LimitOperations | None
    _reads: ReadGate

    def _limit_operations(self) -> LimitOperations:
        if self._limits is None:
            raise FailedPrecondition("this server does not serve limits")
        return self._limits

    @maps_errors
    def SetLimit(
        self, request: pb.SetLimitRequest, context: grpc.ServicerContext
    ) -> pb.SetLimitResponse:
        view = self._limit_operations().set_limit(
            request.key, request.max_running, request.rate_per_minute, request.burst
        )
        header = self._reads.header()
        return pb.SetLimitResponse(
            limit=limit_to_proto(view), commit_index=header.applied_index, header=header
        )

    @maps_errors
    def ListLimits(
        self, request: pb.ListLimitsRequest, context: grpc.ServicerContext
    ) -> pb.ListLimitsResponse:
        operations = self._limit_operations()
        served = self._reads.before_read(request.read_options, context)
        return pb.ListLimitsResponse(
            limits=[limit_to_proto(view) for view in operations.list_limits()],
            header=self._reads.header(served),
        )

    @maps_errors
    @caught_up_before_not_found
    def DeleteLimit(
        self, request: pb.DeleteLimitRequest, context: grpc.ServicerContext
    ) -> pb.DeleteLimitResponse:
        view = self._limit_operations().delete_limit(request.key)
        header = self._reads.header()
        return pb.DeleteLimitResponse(
            limit=limit_to_proto(view), commit_index=header.applied_index, header=header
        )

    @maps_errors
    def SetFairnessWeight(
        self, request: pb.SetFairnessWeightRequest, context: grpc.ServicerContext
    ) -> pb.SetFairnessWeightResponse:
        view = self._limit_operations().set_weight(request.key, request.weight)
        header = self._reads.header()
        return pb.SetFairnessWeightResponse(
            weight=weight_to_proto(view), commit_index=header.applied_index, header=header
        )

    @maps_errors
    def ListFairnessWeights(
        self, request: pb.ListFairnessWeightsRequest, context: grpc.ServicerContext
    ) -> pb.ListFairnessWeightsResponse:
        operations = self._limit_operations()
        served = self._reads.before_read(request.read_options, context)
        return pb.ListFairnessWeightsResponse(
            weights=[weight_to_proto(view) for view in operations.list_weights()],
            header=self._reads.header(served),
        )
