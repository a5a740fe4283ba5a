"""The leader-only retention loop: proposes `TASKS_PURGE` entries for tasks,
workflows and events that finished longer than the retention period ago, in
bounded batches, back to back while old rows remain. The cutoff is this
node's clock at proposal time; apply only compares it with stored times."""

from __future__ import annotations

import logging

from cortex.raft.leader_loop import LeaderContext, LeaderLoop
from cortex.raft.proposer import MAX_BATCH_TASKS
from cortex.state import entries as e
from cortex.steps import Step, wall_ms

log = logging.getLogger(__name__)


class RetentionLoop(LeaderLoop):
    def __init__(
        self,
        context: LeaderContext,
        retention_s: float,
        batch_size: int = MAX_BATCH_TASKS,
        interval_s: float = 30.0,
    ) -> None:
        super().__init__("retention", context, interval_s)
        self._retention_ms = int(retention_s * 1000)
        self._batch_size = batch_size

    def work(self) -> Step[bool]:
        """Proposes one purge when something is old enough; True (run again
        at once) when it removed anything, since more may be waiting."""
        now_ms = wall_ms(self._clock)
        before_ms = now_ms - self._retention_ms
        if not self._reader.purge_due(before_ms):
            return False
        entry = e.Entry.create(e.TasksPurge(before_ms, self._batch_size), self._node_id, ts=now_ms)
        (result,) = yield self._proposer.submit_all([entry])
        if not result.get("ok"):
            log.warning("purge before %d rejected: %s", before_ms, result.get("reason"))
            return False
        log.info(
            "purged %d tasks, %d workflows and %d events finished before %d",
            result["tasks"], result["workflows"], result["events"], before_ms,
        )  # fmt: skip
        return result["tasks"] + result["events"] > 0
