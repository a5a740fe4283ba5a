"""Reads of the limits per concurrency key and the fairness weights, and
what the scheduler needs of them: active tasks per key, the replicated
token buckets, and the queue read per fairness key."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from cortex.state.key_limits import (
    Bucket,
    KeyLimit,
    available_units,
    bucket_from_row,
    limit_from_row,
)
from cortex.state.limit_bounds import TOKEN_UNITS

# Queued tasks of a workflow still `submitting`, or cancelled with tasks left
# to cancel, wait (a dead letter retried after its workflow failed runs).
NOT_HELD = (
    "(workflow_id IS NULL OR NOT EXISTS (SELECT 1 FROM workflows w"
    " WHERE w.id = tasks.workflow_id AND w.state IN ('submitting', 'cancelled')))"
)
# The queue's first fairness key (after another, with a condition added):
# one seek in the queue's index, named so a query that could not use it
# fails instead of reading every queued row.
_FIRST_QUEUED_KEY = (
    "SELECT MIN(fairness_key) FROM tasks INDEXED BY tasks_queue WHERE state = 'queued'"
)
# The most fairness keys one round reads the queue of.
MAX_FAIRNESS_KEYS = 1000


@dataclass(frozen=True)
class LimitView:
    """A concurrency key's limits (0: none of that kind), with its tasks
    assigned or running and queued now, and the tokens its bucket holds."""

    key: str
    max_running: int
    rate_per_min: int
    burst: int
    running: int
    queued: int
    tokens: float
    updated_at: int


@dataclass(frozen=True)
class WeightView:
    """A fairness key with its weight (1 unless set), and its tasks queued
    and active now."""

    key: str
    weight: int
    queued: int
    active: int


@dataclass(frozen=True)
class LimitState:
    """What the scheduler reads of the limits each round."""

    limits: dict[str, KeyLimit]
    buckets: dict[str, Bucket]
    running: dict[str, int]


class LimitQueries:
    """Limit and fairness reads; the host class supplies this thread's connection."""

    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError

    def limit_state(self, count_running: bool = True) -> LimitState:
        """The limits and buckets, and with `count_running` each key's tasks
        assigned or running (what a round needs; a key's next token does not)."""
        conn = self._conn()
        rows = conn.execute("SELECT * FROM key_limits").fetchall()
        limits = {row["key"]: limit_from_row(row) for row in rows}
        buckets = {row["key"]: b for row in rows if (b := bucket_from_row(row)) is not None}
        running: dict[str, int] = {}
        if limits and count_running:
            running = {
                row[0]: row[1]
                for row in conn.execute(
                    "SELECT concurrency_key, COUNT(*) FROM tasks WHERE concurrency_key IS NOT NULL"
                    " AND state IN ('assigned', 'running') GROUP BY concurrency_key"
                )
            }
        return LimitState(limits, buckets, running)

    def limits(self, now_ms: int, key: str | None = None) -> list[LimitView]:
        conn = self._conn()
        rows = conn.execute(
            "SELECT l.*, (SELECT COUNT(*) FROM tasks t WHERE t.concurrency_key = l.key"
            " AND t.state IN ('assigned', 'running')) AS running,"
            " (SELECT COUNT(*) FROM tasks t WHERE t.concurrency_key = l.key"
            " AND t.state = 'queued') AS queued FROM key_limits l"
            + (" WHERE l.key = ?" if key is not None else "")
            + " ORDER BY l.key",
            (key,) if key is not None else (),
        ).fetchall()
        out = []
        for row in rows:
            limit = limit_from_row(row)
            units = available_units(limit, bucket_from_row(row), now_ms)
            out.append(
                LimitView(
                    row["key"],
                    row["max_running"],
                    row["rate_per_min"],
                    row["burst"],
                    row["running"],
                    row["queued"],
                    units / TOKEN_UNITS if limit.rate_per_min else 0.0,
                    row["updated_at"],
                )  # fmt: skip
            )
        return out

    def weights(self) -> dict[str, int]:
        return {
            row[0]: row[1]
            for row in self._conn().execute("SELECT key, weight FROM fairness_weights")
        }

    def weight_views(self) -> list[WeightView]:
        """Every key with a weight set or tasks queued or active."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            # The queue's counts from its own index (`tasks_queue`).
            queued = dict(
                conn.execute(
                    "SELECT fairness_key, COUNT(*) FROM tasks INDEXED BY tasks_queue"
                    " WHERE state = 'queued' GROUP BY fairness_key"
                ).fetchall()
            )
            active = self.active_by_fairness_key()
            weights = self.weights()
        finally:
            conn.execute("COMMIT")
        keys = sorted(set(queued) | set(active) | set(weights))
        return [WeightView(k, weights.get(k, 1), queued.get(k, 0), active.get(k, 0)) for k in keys]

    def active_by_fairness_key(self) -> dict[str, int]:
        return {
            row[0]: row[1]
            for row in self._conn().execute(
                "SELECT fairness_key, COUNT(*) FROM tasks WHERE state IN ('assigned', 'running')"
                " GROUP BY fairness_key"
            )
        }

    def queued_fairness_keys(self) -> list[str]:
        """The fairness keys with tasks queued, each found by one index seek."""
        conn = self._conn()
        keys: list[str] = []
        row = conn.execute(_FIRST_QUEUED_KEY).fetchone()
        while row is not None and row[0] is not None and len(keys) < MAX_FAIRNESS_KEYS:
            keys.append(row[0])
            row = conn.execute(
                f"{_FIRST_QUEUED_KEY} AND fairness_key > ?",
                (row[0],),
            ).fetchone()
        return keys

    def runnable_queue(
        self, now_ms: int, limit: int, waiting_keys: frozenset[str] = frozenset()
    ) -> list[sqlite3.Row]:
        """What the scheduler needs of runnable queued tasks: up to `limit`
        of each fairness key, in scheduling order, without decoding whole
        specs. Tasks of the concurrency keys in `waiting_keys` (at their
        limit now) are left out, so they do not fill the window."""
        conn = self._conn()
        waiting = sorted(waiting_keys)
        skip = (
            f" AND (concurrency_key IS NULL OR concurrency_key NOT IN ({','.join('?' * len(waiting))}))"
            if waiting
            else ""
        )
        select = (
            "SELECT id, type, attempt, priority, created_at, constraints, concurrency_key,"
            " fairness_key FROM tasks INDEXED BY tasks_queue"
            " WHERE state = 'queued' AND scheduled_after <= ?"
            f" AND {NOT_HELD}{skip}"
        )
        rows: list[sqlite3.Row] = []
        for key in self.queued_fairness_keys():
            rows.extend(
                conn.execute(
                    f"{select} AND fairness_key = ?"
                    " ORDER BY priority DESC, created_at, submit_index LIMIT ?",
                    (now_ms, *waiting, key, limit),
                ).fetchall()
            )
        return rows
