"""What must hold in every simulated run. Each failure names the invariant,
the simulated time and what was seen."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    invariant: str
    sim_time_s: float
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"invariant": self.invariant, "sim_time_s": self.sim_time_s, "detail": self.detail}


APPLIED_STATE_AGREES = "applied-state-agrees"
NO_ACKNOWLEDGED_WRITE_LOST = "no-acknowledged-write-lost"
ONE_COMPLETION_PER_TASK = "one-completion-per-task"
SCHEDULER_RESPECTS_NODES = "scheduler-respects-nodes"
WORKFLOW_RULES = "workflow-rules"
# An idempotency key names one submission: reused with another spec, it is
# refused (`idempotency_conflict`), never a second task nor the first one.
IDEMPOTENCY_KEYS_HOLD = "idempotency-keys-hold"
# No key ever has more tasks assigned or running than its max-running
# limit allows, and no schedule's slot starts two runs.
LIMITS_AND_SLOTS_HOLD = "limits-and-slots-hold"
LIVENESS = "liveness"
NODE_STARTS = "node-starts"
# Nothing raises out of a node's Raft or components: in a real node such an
# exception stalls the cluster or kills a loop.
NO_UNEXPECTED_EXCEPTION = "no-unexpected-exception"


class DigestLedger:
    """Invariant 1: every node that applied index i has the same digest there."""

    def __init__(self) -> None:
        self._at: dict[int, tuple[str, str]] = {}
        self._diverged: set[str] = set()
        self.failures: list[Failure] = []

    def record(self, node: str, index: int, digest: str, now_s: float) -> None:
        seen = self._at.get(index)
        if seen is None:
            self._at[index] = (digest, node)
        elif seen[0] != digest and node not in self._diverged:
            # Once apart, a node differs at every later index: the first says it.
            self._diverged.add(node)
            self.failures.append(
                Failure(
                    APPLIED_STATE_AGREES,
                    now_s,
                    f"at raft index {index}: {node} has digest {digest[:16]},"
                    f" {seen[1]} had {seen[0][:16]}",
                )
            )

    @property
    def highest(self) -> int:
        return max(self._at, default=0)
