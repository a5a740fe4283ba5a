"""Limits per concurrency key: at most `max_running` tasks of the key
assigned or running cluster-wide, and starts no faster than a rate (a token
bucket of `burst` tokens refilled at `rate_per_min`).

The bucket is replicated state: apply takes tokens for each assignment at
the assigning entry's time (carried in the entry), so the leader and every
follower compute the same bucket, and a new leader continues where the old
one left off. Whole numbers only: a token is `TOKEN_UNITS` units and the
bucket refills `rate_per_min` units per millisecond."""

from __future__ import annotations

from dataclasses import dataclass, field

# Units per token: a rate of N per minute refills N units per millisecond.
TOKEN_UNITS = 60_000
MAX_RATE_PER_MIN = 60_000_000
MAX_BURST = 100_000
MAX_RUNNING = 1_000_000


@dataclass(frozen=True)
class KeyLimit:
    """A key's limits; 0 means none of that kind."""

    key: str
    max_running: int = 0
    rate_per_min: int = 0
    burst: int = 1

    def describe_rate(self) -> str:
        if self.rate_per_min % 60 == 0:
            return f"{self.rate_per_min // 60}/s"
        return f"{self.rate_per_min}/m"


@dataclass(frozen=True)
class Bucket:
    """`units` held at `at_ms` (the time of the entry that last took some)."""

    units: int
    at_ms: int


def available_units(limit: KeyLimit, bucket: Bucket | None, now_ms: int) -> int:
    """The units in the bucket at `now_ms`; a key never limited yet starts full."""
    capacity = limit.burst * TOKEN_UNITS
    if bucket is None:
        return capacity
    return min(capacity, bucket.units + max(now_ms - bucket.at_ms, 0) * limit.rate_per_min)


def take_tokens(limit: KeyLimit, bucket: Bucket | None, now_ms: int, count: int) -> Bucket | None:
    """The bucket after `count` starts at `now_ms`, or None when it holds
    fewer tokens. Time never runs back: an entry stamped earlier than the
    bucket (another proposer's clock) takes at the bucket's time."""
    at_ms = max(now_ms, bucket.at_ms) if bucket is not None else now_ms
    units = available_units(limit, bucket, at_ms) - count * TOKEN_UNITS
    return Bucket(units, at_ms) if units >= 0 else None


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
