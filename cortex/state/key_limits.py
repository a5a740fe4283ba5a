"""Limits per concurrency key and weights of fairness keys, as replicated
state: the LIMIT_SET, LIMIT_DELETE and WEIGHT_SET handlers, and the check
TASK_ASSIGN makes of each placement (`KeyCharges`).

A key's limits: at most `max_running` of its tasks assigned or running
cluster-wide, and starts no faster than a rate (a token bucket of `burst`
tokens refilled at `rate_per_min`). The bucket is replicated: apply takes a
token for each assignment at the assigning entry's time (carried in the
entry), so every node computes the same bucket and a new leader continues
where the old one left off. Whole numbers only: a token is `TOKEN_UNITS`
units and the bucket refills `rate_per_min` units per millisecond."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cortex.state import entries as e
from cortex.state.limit_bounds import (
    DEFAULT_WEIGHT,
    MAX_BURST,
    MAX_RATE_PER_MIN,
    MAX_RUNNING,
    MAX_WEIGHT,
    TOKEN_UNITS,
    describe_rate,
)
from cortex.state.reasons import INVALID_PAYLOAD, LIMIT_REACHED, Rejected, quoted
from cortex.state.spec_rules import key_problem

if TYPE_CHECKING:
    from cortex.state.transitions import ApplyContext, EntryHandler


@dataclass(frozen=True)
class KeyLimit:
    """A key's limits; 0 means none of that kind."""

    key: str
    max_running: int = 0
    rate_per_min: int = 0
    burst: int = 1

    def describe_rate(self) -> str:
        return describe_rate(self.rate_per_min)


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


def limit_problem(key: str, max_running: int, rate_per_min: int, burst: int) -> str | None:
    """What is wrong with a limit, or None (the same words at the edge and in apply)."""
    problem = key_problem(key)
    if problem:
        return f"key {quoted(key)} {problem}"
    if not 0 <= max_running <= MAX_RUNNING:
        return f"max running must be between 0 and {MAX_RUNNING}"
    if not 0 <= rate_per_min <= MAX_RATE_PER_MIN:
        return f"rate must be between 0 and {MAX_RATE_PER_MIN} per minute"
    if not 1 <= burst <= MAX_BURST:
        return f"burst must be between 1 and {MAX_BURST}"
    if not max_running and not rate_per_min:
        return "a limit needs a max running count, a rate, or both"
    return None


def limit_from_row(row: sqlite3.Row) -> KeyLimit:
    return KeyLimit(row["key"], row["max_running"], row["rate_per_min"], row["burst"])


def bucket_from_row(row: sqlite3.Row) -> Bucket | None:
    if row["bucket_units"] is None:
        return None
    return Bucket(row["bucket_units"], row["bucket_at"])


class KeyCharges:
    """One TASK_ASSIGN's check of each placement against its key's limits:
    refuses one that would pass `max_running` or take a token the bucket
    does not hold, and takes the token of one that passes."""

    def __init__(self, ctx: ApplyContext) -> None:
        self._ctx = ctx
        # Each key's limit and bucket as read once, the bucket kept as charged.
        self._keys: dict[str, tuple[KeyLimit, Bucket | None] | None] = {}

    def _limit(self, key: str) -> tuple[KeyLimit, Bucket | None] | None:
        if key not in self._keys:
            row = self._ctx.cur.execute("SELECT * FROM key_limits WHERE key = ?", (key,)).fetchone()
            self._keys[key] = None if row is None else (limit_from_row(row), bucket_from_row(row))
        return self._keys[key]

    def charge(self, task: sqlite3.Row) -> None:
        key = task["concurrency_key"]
        found = self._limit(key) if key is not None else None
        if found is None:
            return
        limit, bucket = found
        cur = self._ctx.cur
        if limit.max_running:
            active = cur.execute(
                "SELECT COUNT(*) FROM tasks WHERE concurrency_key = ?"
                " AND state IN ('assigned', 'running')",
                (key,),
            ).fetchone()[0]
            if active >= limit.max_running:
                raise Rejected(
                    LIMIT_REACHED,
                    f"task {task['id']}: key {quoted(key)} is at {active}/{limit.max_running}"
                    " running",
                )
        if limit.rate_per_min:
            taken = take_tokens(limit, bucket, self._ctx.entry.ts, 1)
            if taken is None:
                raise Rejected(
                    LIMIT_REACHED,
                    f"task {task['id']}: key {quoted(key)} is at its rate of"
                    f" {limit.describe_rate()}",
                )
            cur.execute(
                "UPDATE key_limits SET bucket_units = ?, bucket_at = ? WHERE key = ?",
                (taken.units, taken.at_ms, key),
            )
            self._keys[key] = (limit, taken)


def limit_set(ctx: ApplyContext, p: e.LimitSet) -> dict[str, Any]:
    problem = limit_problem(p.key, p.max_running, p.rate_per_min, p.burst)
    if problem:
        raise Rejected(INVALID_PAYLOAD, f"{p.TYPE}: {problem}")
    prior = ctx.cur.execute("SELECT * FROM key_limits WHERE key = ?", (p.key,)).fetchone()
    units, at = (None, None) if prior is None else (prior["bucket_units"], prior["bucket_at"])
    if units is not None:
        units = min(units, p.burst * TOKEN_UNITS)
    ctx.cur.execute(
        "INSERT OR REPLACE INTO key_limits (key, max_running, rate_per_min, burst, bucket_units,"
        " bucket_at, updated_at) VALUES (?,?,?,?,?,?,?)",
        (p.key, p.max_running, p.rate_per_min, p.burst, units, at, ctx.entry.ts),
    )
    ctx.event("limit_set", detail={"key": p.key, "max_running": p.max_running,
                                   "rate_per_min": p.rate_per_min, "burst": p.burst})  # fmt: skip
    return {"key": p.key, "created": prior is None}


def limit_delete(ctx: ApplyContext, p: e.LimitDelete) -> dict[str, Any]:
    deleted = ctx.cur.execute("DELETE FROM key_limits WHERE key = ?", (p.key,)).rowcount
    if deleted:
        ctx.event("limit_deleted", detail={"key": p.key})
    return {"key": p.key, "deleted": bool(deleted)}


def weight_set(ctx: ApplyContext, p: e.WeightSet) -> dict[str, Any]:
    problem = key_problem(p.key)
    if problem:
        raise Rejected(INVALID_PAYLOAD, f"{p.TYPE}: key {quoted(p.key)} {problem}")
    if not 1 <= p.weight <= MAX_WEIGHT:
        raise Rejected(INVALID_PAYLOAD, f"{p.TYPE}: weight must be between 1 and {MAX_WEIGHT}")
    if p.weight == DEFAULT_WEIGHT:
        ctx.cur.execute("DELETE FROM fairness_weights WHERE key = ?", (p.key,))
    else:
        ctx.cur.execute(
            "INSERT OR REPLACE INTO fairness_weights (key, weight, updated_at) VALUES (?,?,?)",
            (p.key, p.weight, ctx.entry.ts),
        )
    ctx.event("weight_set", detail={"key": p.key, "weight": p.weight})
    return {"key": p.key, "weight": p.weight}


LIMIT_HANDLERS: dict[type[e.Payload], EntryHandler] = {
    e.LimitSet: limit_set,
    e.LimitDelete: limit_delete,
    e.WeightSet: weight_set,
}
