"""JSON-ready views of the limits per concurrency key and the weights of
fairness keys, shared by the CLI's --json output and the MCP tools, in the
shape of `cortex.api.views`."""

from __future__ import annotations

from typing import Any

from cortex.api.views import iso_time
from cortex.state.limit_bounds import describe_rate
from cortex.v1 import cortex_pb2 as pb

__all__ = ["limit_json", "rate_text", "weight_json"]


def rate_text(limit: pb.Limit) -> str:
    """Its rate as `5/s` or `7/m`; empty without one."""
    return describe_rate(limit.rate_per_minute) if limit.rate_per_minute else ""


def limit_json(limit: pb.Limit) -> dict[str, Any]:
    return {
        "key": limit.key,
        "max_running": limit.max_running,
        "rate_per_minute": limit.rate_per_minute,
        "rate": rate_text(limit) or None,
        "burst": limit.burst,
        "running": limit.running,
        "queued": limit.queued,
        "tokens": round(limit.tokens, 3),
        "updated_at": iso_time(limit, "update_time"),
    }


def weight_json(weight: pb.FairnessWeight) -> dict[str, Any]:
    return {
        "key": weight.key,
        "weight": weight.weight,
        "queued": weight.queued,
        "active": weight.active,
    }
