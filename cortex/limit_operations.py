"""Limits per concurrency key and weights of fairness keys, as every
interface offers them (gRPC, MCP, CLI): validate, propose, read."""

from __future__ import annotations

import time

from cortex.errors import InvalidArgument, UnknownId
from cortex.raft.proposer import Proposer
from cortex.refusals import refusal_error
from cortex.state import entries as e
from cortex.state.key_limits import limit_problem
from cortex.state.limit_bounds import MAX_WEIGHT
from cortex.state.limit_queries import LimitView, WeightView
from cortex.state.queries import StateReader
from cortex.state.spec_rules import key_problem


def _now_ms() -> int:
    return int(time.time() * 1000)


def check_key(key: str, what: str = "key") -> None:
    problem = key_problem(key)
    if problem:
        raise InvalidArgument(f"{what} {key!r} {problem}")


class LimitOperations:
    def __init__(
        self, node_id: str, proposer: Proposer, reader: StateReader, propose_timeout_s: float
    ) -> None:
        self.node_id = node_id
        self._proposer = proposer
        self._reader = reader
        self._timeout = propose_timeout_s

    def _propose(self, payload: e.Payload, doing: str) -> None:
        result = self._proposer.propose_one(e.Entry.create(payload, self.node_id), self._timeout)
        if not result.get("ok"):
            raise refusal_error(result, doing)

    def set_limit(self, key: str, max_running: int = 0, rate_per_min: int = 0,
                  burst: int = 0) -> LimitView:  # fmt: skip
        """Sets a key's limits, replacing what it had. `burst` 0: one token,
        or a second's worth of the rate when that is more."""
        check_key(key)
        if burst == 0:
            burst = max(1, rate_per_min // 60)
        problem = limit_problem(key, max_running, rate_per_min, burst)
        if problem:
            raise InvalidArgument(problem)
        self._propose(e.LimitSet(key, max_running, rate_per_min, burst), f"limit on {key}")
        return self.get_limit(key)

    def get_limit(self, key: str) -> LimitView:
        check_key(key)
        found = self._reader.limits(_now_ms(), key)
        if not found:
            raise UnknownId(f"no limit on key {key!r}")
        return found[0]

    def list_limits(self) -> list[LimitView]:
        return self._reader.limits(_now_ms())

    def delete_limit(self, key: str) -> LimitView:
        """Removes a key's limits; returns them as they were."""
        view = self.get_limit(key)
        self._propose(e.LimitDelete(key), f"limit on {key} could not be deleted")
        return view

    def set_weight(self, key: str, weight: int) -> WeightView:
        check_key(key)
        if not 1 <= weight <= MAX_WEIGHT:
            raise InvalidArgument(f"weight must be between 1 and {MAX_WEIGHT}, not {weight}")
        self._propose(e.WeightSet(key, weight), f"weight of {key}")
        return next(
            (view for view in self._reader.weight_views() if view.key == key),
            WeightView(key, weight, 0, 0),
        )

    def list_weights(self) -> list[WeightView]:
        return self._reader.weight_views()


_RATE_UNITS = {"s": 60, "sec": 60, "m": 1, "min": 1}


def parse_rate(text: str) -> int:
    """A rate such as `5/s` or `30/m`, as starts per minute."""
    count, _, unit = text.strip().partition("/")
    per_min = _RATE_UNITS.get(unit.strip().lower())
    if per_min is None or not count.strip().isdigit():
        raise InvalidArgument(f"rate {text!r} must read N/s or N/m (e.g. 5/s)")
    return int(count) * per_min
