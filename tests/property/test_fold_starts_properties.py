"""A start folded into its attempt's outcome (`entries.fold_starts`: what
the proposer does when a TASK_STARTED and the outcome of the same attempt
leave in one batch) applies as the two entries applied in order: the same
task rows, the same events at the same times, and the same result for every
other entry. The differences allowed: a folded start that would have been
refused on its own leaves no `rejected` event of its own, and a start's
event comes after the events of other tasks' entries it moved past.

Generated batches mix reports of several attempts from two nodes (some
stale, some repeated), successes and failures (retried, dead-lettered or
permanent), and entries that stop a fold when they touch the same task (a
cancel, an assignment) or any task (a failure may end a workflow)."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex.state import entries as e
from cortex.state.machine import StateMachine

TASKS = ("t1", "t2", "t3")
NODES = ("n1", "n2")
# t1 retries once, t2 never, t3 three times.
RETRIES = {"t1": 1, "t2": 0, "t3": 3}

reports = st.lists(
    st.tuples(
        st.sampled_from(
            ["started", "started", "complete", "failed", "permanent", "cancel", "assign"]
        ),
        # Mostly t1, so its start, outcome and what stands between meet often.
        st.sampled_from(["t1", "t1", "t1", "t2", "t3"]),
        st.sampled_from([1, 1, 1, 2]),
        st.sampled_from(["n1", "n1", "n2"]),
    ),
    min_size=1,
    max_size=14,
)


def _entry(number: int, payload: e.Payload, node: str) -> e.Entry:
    return e.Entry(
        type=payload.TYPE,
        id=f"entry-{number}",
        ts=5_000 + 10 * number,
        node=node,
        payload=e.as_dict(payload),
    )


def _setup() -> list[e.Entry]:
    """Two nodes, three tasks, t1 and t3 on n1 and t2 on n2 (attempt 1)."""
    joins = [
        _entry(i, e.NodeJoin(node, f"127.0.0.1:{7100 + i}", f"127.0.0.1:{7200 + i}"), node)
        for i, node in enumerate(NODES)
    ]
    submits = [
        _entry(
            10 + i,
            e.TaskSubmit(
                task, {"type": "noop", "retryPolicy": {"maxRetries": RETRIES[task]}}, None
            ),
            "n1",
        )
        for i, task in enumerate(TASKS)
    ]
    placements = [
        {"task_id": task, "node": "n2" if task == "t2" else "n1", "attempt": 1} for task in TASKS
    ]
    return [*joins, *submits, _entry(20, e.TaskAssign(placements), "n1")]


def _batch(items: list[tuple[str, str, int, str]]) -> list[e.Entry]:
    out = []
    for number, (kind, task, attempt, node) in enumerate(items, start=100):
        payload: e.Payload
        if kind == "started":
            payload = e.TaskStarted(task, attempt, node)
        elif kind == "complete":
            payload = e.TaskComplete(task, attempt, node, {"exit_code": 0})
        elif kind in ("failed", "permanent"):
            payload = e.TaskFailed(
                task, attempt, node, "exit code 3", {"exit_code": 3}, kind == "permanent"
            )
        elif kind == "cancel":
            payload = e.TaskCancel(task)
        else:
            payload = e.TaskAssign([{"task_id": task, "node": node, "attempt": attempt}])
        out.append(_entry(number, payload, node))
    return out


def _state(path: Path, skip_rejections_of: set[str]) -> tuple[list[Any], list[Any]]:
    conn = sqlite3.connect(path)
    try:
        tasks = conn.execute("SELECT * FROM tasks ORDER BY id").fetchall()
        events = [
            row[:-1]
            for row in conn.execute(
                "SELECT task_id, event, from_state, to_state, node, attempt, detail, ts, entry_id"
                " FROM task_events WHERE entry_id LIKE 'entry-1__' ORDER BY seq"
            )
            if not (row[1] == "rejected" and row[-1] in skip_rejections_of)
        ]
        # Each task's events in their order; a folded start's event comes
        # after those of other tasks' entries it moved past.
        return tasks, sorted(events, key=lambda event: str(event[0]))
    finally:
        conn.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reports)
def test_a_folded_start_applies_as_the_start_and_its_outcome_in_order(
    items: list[tuple[str, str, int, str]],
) -> None:
    batch = _batch(items)
    folded, carriers = e.fold_starts(batch)
    assert len(carriers) == len(batch)
    gone = {entry.id for entry in batch} - {entry.id for entry in folded}
    # Only starts are folded away, each into the outcome of its attempt.
    for position, entry in enumerate(batch):
        carrier = folded[carriers[position]]
        if entry.id in gone:
            assert entry.type == e.TaskStarted.TYPE
            assert carrier.type in (e.TaskComplete.TYPE, e.TaskFailed.TYPE)
            assert carrier.payload["started_at"] == entry.ts
            assert (carrier.payload["task_id"], carrier.payload["attempt"], carrier.node) == (
                entry.payload["task_id"],
                entry.payload["attempt"],
                entry.node,
            )
        else:
            assert carrier.id == entry.id
    with tempfile.TemporaryDirectory() as tmp:
        apart_path, folded_path = Path(tmp, "apart.db"), Path(tmp, "folded.db")
        apart, together = StateMachine(str(apart_path)), StateMachine(str(folded_path))
        try:
            for machine in (apart, together):
                machine.apply_batch(1, e.encode_batch(_setup()))
            apart_results = apart.apply_batch(2, e.encode_batch(batch))
            folded_results = together.apply_batch(2, e.encode_batch(folded))
        finally:
            apart.close()
            together.close()
        assert apart_results is not None and folded_results is not None
        for position, entry in enumerate(batch):
            if entry.id not in gone:
                assert folded_results[carriers[position]] == apart_results[position], entry
        assert _state(folded_path, set()) == _state(apart_path, gone)


def test_a_quick_attempt_folds_and_shows_its_start() -> None:
    """The common case, checked by name: start then success of one attempt,
    with another task's reports in between."""
    batch = _batch(
        [("started", "t1", 1, "n1"), ("started", "t3", 1, "n1"), ("complete", "t1", 1, "n1")]
    )
    folded, carriers = e.fold_starts(batch)
    assert [entry.id for entry in folded] == ["entry-101", "entry-102"]
    assert carriers == [1, 0, 1]
    with tempfile.TemporaryDirectory() as tmp:
        machine = StateMachine(str(Path(tmp, "state.db")))
        try:
            machine.apply_batch(1, e.encode_batch(_setup()))
            machine.apply_batch(2, e.encode_batch(folded))
        finally:
            machine.close()
        tasks, events = _state(Path(tmp, "state.db"), set())
    assert [event[:4] + (event[7],) for event in events if event[0] == "t1"] == [
        ("t1", "started", "assigned", "running", 5_000 + 10 * 100),
        ("t1", "completed", "running", "completed", 5_000 + 10 * 102),
    ]


def test_starts_stay_apart_when_something_between_touches_their_task() -> None:
    for between in (
        ("cancel", "t1", 1, "n1"),
        ("assign", "t1", 2, "n2"),
        ("failed", "t3", 1, "n1"),
    ):
        batch = _batch([("started", "t1", 1, "n1"), between, ("complete", "t1", 1, "n1")])
        folded, carriers = e.fold_starts(batch)
        assert folded == batch and carriers == [0, 1, 2], between


def test_a_start_from_another_node_or_attempt_is_not_folded() -> None:
    for started in (("started", "t1", 2, "n1"), ("started", "t1", 1, "n2")):
        batch = _batch([started, ("complete", "t1", 1, "n1")])
        assert e.fold_starts(batch) == (batch, [0, 1]), started
    # An outcome before its start: nothing to fold into.
    batch = _batch([("complete", "t1", 1, "n1"), ("started", "t1", 1, "n1")])
    assert e.fold_starts(batch) == (batch, [0, 1])
