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

from cortex.raft import RaftGroup, RaftSettings
from cortex.state import StateMachine
from cortex.state import entries as e
from tests.cluster import free_ports

# What applying one entry takes on pysyncobj's clock here: past the
# leader's heartbeat period (0.1 s), and three of them past the shortest
# election timeout (0.4 s).
APPLY_S = 0.3


def _batch(task_id: str) -> bytes:
    return e.encode_batch([e.Entry.create(e.TaskSubmit(task_id, {"type": "noop"}), "n1")])


def _tick_until(group: RaftGroup, done: Any, what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        group.doTick(0.01)


def test_a_leader_sends_its_appends_between_slow_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skew = [0.0]
    monkeypatch.setattr(pysyncobj.syncobj, "monotonicTime", lambda: time.monotonic() + skew[0])
    machine = StateMachine(str(tmp_path / "state.db"))
    group = RaftGroup(
        RaftSettings(
            self_address=f"127.0.0.1:{free_ports(1)[0]}",
            peers=[],
            data_dir=str(tmp_path),
            secret="appends-between-entries-test-secret",
            auto_tick=False,
        ),
        machine,
    )
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
        _tick_until(group, lambda: group.is_leader, "the one node to lead")
        # Each its own entry (a merged entry is not a batch, so the queue
        # merges none of them), all logged by one tick and committed by the next.
        for name in ("a", "b", "c"):
            group.apply_merged(
                (_batch(name),),
                callback=lambda result, error, name=name: results.setdefault(name, error),
            )
        _tick_until(group, lambda: len(results) == 3, "the three entries to be applied")
        _tick_until(group, lambda: events[-1][0] == "appends", "the appends after them")
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
