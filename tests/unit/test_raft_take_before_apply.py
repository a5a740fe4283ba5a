"""A proposal waiting in the command queue as an entry commits is logged
(and sent) before that entry is applied, not after
(`RaftGroup._SyncObj__applyLogEntries`): its replication overlaps the apply.
A real one-node group, ticked by hand, shows the order: the entry proposed
between two ticks is in the log when the first is applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cortex.state import StateMachine
from tests.raft_by_hand import noop_batch, one_node_group, tick_until


def test_a_proposal_waiting_as_an_entry_commits_is_logged_before_that_apply(
    tmp_path: Path,
) -> None:
    machine = StateMachine(str(tmp_path / "state.db"))
    group = one_node_group(tmp_path, machine, "take-before-apply-test-secret")
    # For each batch applied: the last index in the log as it was applied.
    log_end_at_apply: dict[bytes, int] = {}
    apply = machine.apply_batches

    def watched(index: int, batches: list[bytes]) -> Any:
        for batch in batches:
            log_end_at_apply[batch] = group.journal.last_index
        return apply(index, batches)

    machine.apply_batches = watched  # type: ignore[method-assign]
    results: dict[str, Any] = {}
    try:
        tick_until(group, lambda: group.is_leader, "the one node to lead")
        first, second = noop_batch("first"), noop_batch("second")
        group.propose_batch(first, lambda result, error: results.setdefault("first", error))
        # The tick that logs `first` (its commit comes with the next one).
        logged = group.journal.last_index
        tick_until(group, lambda: group.journal.last_index > logged, "the first to be logged")
        assert first not in log_end_at_apply
        first_index = group.journal.last_index
        # Waiting in the queue as `first` commits.
        group.propose_batch(second, lambda result, error: results.setdefault("second", error))
        tick_until(group, lambda: "second" in results, "both to be applied")
    finally:
        group.destroy()
        machine.close()
    assert results == {"first": 0, "second": 0}
    # `second` was already in the log when `first` was applied.
    assert log_end_at_apply[first] == first_index + 1
    assert log_end_at_apply[second] == first_index + 1
