"""Merged entries (`cortex.raft.merging`): batches a leader logged together
in one entry apply exactly as one batch of all their entries would, and
each batch gets its own entries' results. Generated as the runs' property
test generates batches (submissions, assignments, starts and outcomes,
cancellations, stale and refused entries among them); the reference applies
the batches' entries concatenated into one batch. Properties: each batch's
results are its slice of the reference's, and both databases end with the
same digest, the same rows and the same task changes handed to listeners.
A batch that cannot be decoded is refused on its own."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cortex.state.entries import Entry, encode_batch
from cortex.state.machine import StateMachine
from tests.property.test_apply_runs_properties import (
    _batch,
    _dump,
    _tasks,
    first_batch,
    side_by_side,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_merged_batches_apply_as_one_batch_of_their_entries(data: st.DataObject) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        side_by_side(tmp, StateMachine, StateMachine) as both,
    ):
        merged, whole = both.one, both.other
        first = first_batch()
        assert merged.apply_batch(1, first) == whole.apply_batch(1, first)
        number = 0
        for index in range(2, 2 + data.draw(st.integers(1, 6), label="entries")):
            batches = []
            for part in range(data.draw(st.integers(1, 4), label="batches")):
                entries = data.draw(_batch(_tasks(both.peek_one), number), label=f"{index}.{part}")
                number += len(entries)
                batches.append(entries)
            results = merged.apply_batches(index, [encode_batch(b) for b in batches])
            reference = whole.apply_batch(index, encode_batch([e for b in batches for e in b]))
            assert results is not None and reference is not None
            assert [len(r) for r in results] == [len(b) for b in batches]
            assert [r for part in results for r in part] == reference
            assert merged.digest() == whole.digest()
            if len(batches) > 1 and any(not r["ok"] for r in reference):
                event("a merged entry held a refused entry")
        assert both.seen["one"] == both.seen["other"]
        assert _dump(both.peek_one) == _dump(both.peek_other)


def test_a_batch_that_cannot_be_decoded_is_refused_alone() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        machine = StateMachine(os.path.join(tmp, "state.db"))
        try:
            machine.apply_batch(1, first_batch())
            good = [
                encode_batch([
                    Entry(type="TASK_SUBMIT", id=f"submit-{n}", ts=1000 + n, node="n1",
                          payload={"task_id": f"task-{n}", "spec": {"type": "noop"}})
                ])
                for n in range(2)
            ]  # fmt: skip
            results = machine.apply_batches(2, [good[0], b'[{"type": "TASK_SUBMIT"', good[1]])
            assert results is not None
            first, broken, last = results
            assert first == [{"ok": True, "task_id": "task-0", "created": True}]
            assert last == [{"ok": True, "task_id": "task-1", "created": True}]
            assert len(broken) == 1 and not broken[0]["ok"]
            assert "not valid JSON" in json.dumps(broken[0])
            conn = sqlite3.connect(os.path.join(tmp, "state.db"))
            try:
                ids = {row[0] for row in conn.execute("SELECT id FROM tasks")}
            finally:
                conn.close()
            assert ids == {"task-0", "task-1"}
        finally:
            machine.close()
