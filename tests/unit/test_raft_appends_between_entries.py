"""A leader whose heartbeat falls due while it applies the entries one tick
found committed sends its appends between two of them
(`RaftGroup._SyncObj__doApplyCommand`), and `on_append_gap` is told each
interval between two rounds of appends. A real one-node group, ticked by
hand, on pysyncobj's clock moved on by each apply as a slow apply would."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pysyncobj.syncobj
import pytest

from cortex.state import StateMachine
from tests.raft_by_hand import noop_batch, one_node_group, tick_until

# What applying one entry takes on pysyncobj's clock here: past the
# leader's heartbeat period (0.1 s), and three of them past the shortest
# election timeout (0.4 s).
APPLY_S = 0.3


def test_a_leader_sends_its_appends_between_slow_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skew = [0.0]
    monkeypatch.setattr(pysyncobj.syncobj, "monotonicTime", lambda: time.monotonic() + skew[0])
    machine = StateMachine(str(tmp_path / "state.db"))
    group = one_node_group(tmp_path, machine, "appends-between-entries-test-secret")
    events: list[tuple[str, float]] = []
    apply = machine.apply_batches

    def slow(index: int, batches: list[bytes]) -> Any:
        skew[0] += APPLY_S
        events.append(("apply", index))
        return apply(index, batches)

    machine.apply_batches = slow  # type: ignore[method-assign]
    group.on_append_gap = lambda gap: events.append(("appends", gap))
    results: dict[str, int] = {}
    try:
        tick_until(group, lambda: group.is_leader, "the one node to lead")
        # Each its own entry (a merged entry is not a batch, so the queue
        # merges none of them), all logged by one tick and committed by the next.
        for name in ("a", "b", "c"):
            group.apply_merged(
                (noop_batch(name),),
                callback=lambda result, error, name=name: results.setdefault(name, error),
            )
        tick_until(group, lambda: len(results) == 3, "the three entries to be applied")
        tick_until(group, lambda: events[-1][0] == "appends", "the appends after them")
    finally:
        group.destroy()
        machine.close()
    assert results == {"a": 0, "b": 0, "c": 0}
    applies = [number for number, (kind, _) in enumerate(events) if kind == "apply"]
    first, last = applies[-3], applies[-1]
    assert last - first > 2, f"no appends went out between the entries: {events[first:]}"
    for one, other in zip(applies[-3:], applies[-2:], strict=False):
        assert any(kind == "appends" for kind, _ in events[one + 1 : other]), events[first:]
    gaps = [gap for kind, gap in events[first:] if kind == "appends"]
    # No gap held more than one entry's apply (and a little of the tick's own time).
    assert gaps and max(gaps) < 2 * APPLY_S, gaps
