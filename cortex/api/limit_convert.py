"""Limits per concurrency key and weights of fairness keys as the API's
messages."""

from __future__ import annotations

from cortex.api.convert import timestamp
from cortex.state.limit_queries import LimitView, WeightView
from cortex.v1 import cortex_pb2 as pb


def limit_to_proto(view: LimitView) -> pb.Limit:
    return pb.Limit(
        key=view.key,
        max_running=view.max_running,
        rate_per_minute=view.rate_per_min,
        burst=view.burst,
        running=view.running,
        queued=view.queued,
        tokens=view.tokens,
        update_time=timestamp(view.updated_at),
    )


def weight_to_proto(view: WeightView) -> pb.FairnessWeight:
    return pb.FairnessWeight(
        key=view.key, weight=view.weight, queued=view.queued, active=view.active
    )
