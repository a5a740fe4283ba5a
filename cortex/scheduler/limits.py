"""One scheduling round's view of the limits per concurrency key (their
rules and replicated buckets: `cortex.state.key_limits`): which tasks wait
for their key, charged for each placement the round makes."""

from __future__ import annotations

from dataclasses import dataclass, field

from cortex.state.key_limits import Bucket, KeyLimit, available_units, take_tokens
from cortex.state.limit_bounds import MAX_BURST, MAX_RATE_PER_MIN, MAX_RUNNING, TOKEN_UNITS

__all__ = [
    "MAX_BURST",
    "MAX_RATE_PER_MIN",
    "MAX_RUNNING",
    "TOKEN_UNITS",
    "Bucket",
    "KeyLimit",
    "LimitGate",
    "available_units",
    "take_tokens",
]


@dataclass
class LimitGate:
    """One scheduling round's view of the limits: what each key runs and
    holds now, charged for each placement made in the round."""

    limits: dict[str, KeyLimit]
    running: dict[str, int]
    buckets: dict[str, Bucket]
    now_ms: int
    _placed: dict[str, int] = field(default_factory=dict)

    def held(self, key: str | None) -> str | None:
        """Why a task of `key` cannot start now, or None when it can."""
        limit = self.limits.get(key) if key else None
        if limit is None:
            return None
        placed = self._placed.get(limit.key, 0)
        if limit.max_running:
            running = self.running.get(limit.key, 0) + placed
            if running >= limit.max_running:
                return f"waiting: key {limit.key} at {running}/{limit.max_running} running"
        if limit.rate_per_min:
            units = available_units(limit, self.buckets.get(limit.key), self.now_ms)
            if units < (placed + 1) * TOKEN_UNITS:
                return f"waiting: key {limit.key} at its rate of {limit.describe_rate()}"
        return None

    def admit(self, key: str | None) -> None:
        if key and key in self.limits:
            self._placed[key] = self._placed.get(key, 0) + 1

    def next_token_ms(self) -> int | None:
        """When the next key now held by its rate gets a token (ms since the
        epoch), or None when no key waits for one."""
        due = None
        for limit in self.limits.values():
            if not limit.rate_per_min:
                continue
            units = available_units(limit, self.buckets.get(limit.key), self.now_ms)
            if units < TOKEN_UNITS:
                wait = -(-(TOKEN_UNITS - units) // limit.rate_per_min)
                due = self.now_ms + wait if due is None else min(due, self.now_ms + wait)
        return due
