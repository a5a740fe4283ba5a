"""A batch of submissions (what one SubmitTasks call proposes: many
TASK_SUBMIT entries in one Raft entry) applies exactly as the same entries
applied one Raft entry each: the same result for every entry, and the same
rows in every replicated table once the Raft index each row records is set
aside. Generated batches mix valid and invalid specs, repeated task ids and
idempotency keys reused with the same or a different spec."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex.state.entries import Entry, TaskSubmit, encode_batch
from cortex.state.machine import StateMachine
from cortex.state.schema import REPLICATED_TABLES

# Columns that record the Raft index a row was written at: one shared index
# in the batch, one each apart. Nothing else may differ.
INDEX_COLUMNS = frozenset({"submit_index", "raft_index"})

specs = st.one_of(
    st.just({"type": "noop"}),
    st.just({"type": "noop", "priority": 9}),
    st.just({"command": ["true"], "labels": {"team": "a"}}),
    st.just({"command": ""}),  # invalid: refused in apply
    st.just({"command": ["x"], "priority": 11}),  # invalid
)
submissions = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t2", "t3", "t4", "t5"]),
        specs,
        st.sampled_from([None, "k1", "k2", "k3"]),
    ),
    min_size=1,
    max_size=12,
)


def _entries(items: list[tuple[str, dict[str, Any], str | None]]) -> list[Entry]:
    return [
        Entry(
            type=TaskSubmit.TYPE,
            id=f"entry-{number}",
            ts=1_000 + number,
            node="n1",
            payload={"task_id": task_id, "spec": spec, "idempotency_key": key},
        )
        for number, (task_id, spec, key) in enumerate(items)
    ]


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        tables = {}
        for table, key in REPLICATED_TABLES.items():
            cursor = conn.execute(f"SELECT * FROM {table} ORDER BY {key}")
            names = [column[0] for column in cursor.description]
            keep = [i for i, name in enumerate(names) if name not in INDEX_COLUMNS]
            tables[table] = [tuple(row[i] for i in keep) for row in cursor.fetchall()]
        return tables
    finally:
        conn.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(submissions)
def test_a_batch_of_submissions_applies_as_its_entries_one_by_one(
    items: list[tuple[str, dict[str, Any], str | None]],
) -> None:
    entries = _entries(items)
    with tempfile.TemporaryDirectory() as tmp:
        batched_path, apart_path = Path(tmp, "batched.db"), Path(tmp, "apart.db")
        batched, apart = StateMachine(str(batched_path)), StateMachine(str(apart_path))
        try:
            together = batched.apply_batch(1, encode_batch(entries))
            one_by_one = [
                apart.apply_batch(index, encode_batch([entry]))
                for index, entry in enumerate(entries, start=1)
            ]
        finally:
            batched.close()
            apart.close()
        assert together is not None
        assert together == [results[0] for results in one_by_one if results is not None]
        assert _rows(batched_path) == _rows(apart_path)
