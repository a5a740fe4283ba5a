"""Creation windows as ranges of submission order (migration 19,
`cortex.state.created_spans`): each span of Raft indexes holds the earliest
and latest creation time of the tasks and workflows submitted in it, as
entries of skewed clocks submit standalone tasks and workflows; a window's
listing gives exactly the tasks (or workflows) created in it, whatever the
skew, page by page in either order and with the other filters, while
reading only the spans' range of them; a workflow listing's total comes
from counters by state (`workflow_counts`) but within a window; a database
made before gets both from its rows, its digest unchanged; and a purge drops
the spans before the oldest task left, the listings still exact. Each span
counts its tasks and workflows (migration 20), so a window's total reads
rows only of the spans its edges cross."""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.state import created_spans
from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.paging import CreatedWindow
from cortex.state.queries import TaskPage
from tests.state_reads import (
    UNDO_MIGRATION_19,
    UNDO_MIGRATION_20,
    all_pages,
    set_back,
    statements,
    task_plans,
)
from tests.workflow_sim import NODES, WorkflowLog

DONE = {"exit_code": 0, "stdout": "", "stderr": ""}
WORKFLOW = """
name: spans
tasks:
  a: {spec: {type: noop}}
  b: {spec: {type: noop}, dependsOn: [a]}
"""
# Each proposer's clock is off by this much (ms); entries interleave.
SKEW = {"n1": 0, "n2": 4_000, "n3": -2_500}


def _spans(conn: sqlite3.Connection) -> dict[int, tuple[int, int]]:
    rows = conn.execute("SELECT span, earliest, latest FROM created_spans")
    return {span: (earliest, latest) for span, earliest, latest in rows}


def _spans_of_the_rows(conn: sqlite3.Connection) -> dict[int, tuple[int, int]]:
    rows = conn.execute(
        f"SELECT submit_index >> {created_spans.SPAN_BITS}, MIN(created_at), MAX(created_at)"
        " FROM (SELECT submit_index, created_at FROM tasks"
        " UNION ALL SELECT submit_index, created_at FROM workflows) GROUP BY 1"
    )
    return {span: (earliest, latest) for span, earliest, latest in rows}


def _counts(conn: sqlite3.Connection) -> dict[int, tuple[int, int]]:
    rows = conn.execute("SELECT span, tasks, workflows FROM created_spans")
    return {span: (tasks, workflows) for span, tasks, workflows in rows}


def _counts_of_the_rows(conn: sqlite3.Connection) -> dict[int, tuple[int, int]]:
    """Each span's tasks and workflows as the rows have them (0 where none)."""
    counts = dict.fromkeys(_counts(conn), (0, 0))
    for table, k in (("tasks", 0), ("workflows", 1)):
        rows = conn.execute(
            f"SELECT submit_index >> {created_spans.SPAN_BITS}, COUNT(*) FROM {table} GROUP BY 1"
        )
        for span, n in rows:
            pair = list(counts.get(span, (0, 0)))
            pair[k] = n
            counts[span] = (pair[0], pair[1])
    return counts


def _apply(log: WorkflowLog, step: int, entries: list[e.Entry]) -> list[dict[str, object]]:
    log.index += step
    results = log.machine.apply_batch(log.index, e.encode_batch(entries))
    assert results is not None and all(r["ok"] for r in results), results
    return results


def _history(log: WorkflowLog, check: bool = False) -> None:
    """About 300 tasks over ~90 entries whose Raft indexes jump by 1 to 80
    (so they cross spans), each holding submissions from the three nodes by
    their own clocks, a few workflows, and entries that submit nothing;
    every fifth task is placed and completed. With `check`, the spans are
    compared with the rows after every entry."""
    rng = random.Random(19)
    now = 100_000
    number = 0
    for round_ in range(90):
        now += rng.randrange(0, 400)
        if round_ % 11 == 5:
            log.index += rng.randrange(1, 80) - 1
            log.ts = now + SKEW["n2"]
            workflow_id, _ = log.submit(WORKFLOW)
            if round_ % 3 == 0:
                log.one(e.WorkflowCancel(workflow_id))
        else:
            entries = []
            for _ in range(rng.randrange(0, 7)):
                node = rng.choice(NODES)
                task_id = f"t{number:03d}"
                number += 1
                spec = {"type": "noop", "labels": {"parity": str(number % 2)}}
                ts = now + SKEW[node] + rng.randrange(-50, 50)
                entries.append(e.Entry.create(e.TaskSubmit(task_id, spec, None), node=node, ts=ts))
            if not entries:
                entries = [e.Entry.create(e.ReadBarrier(), node="n1", ts=now)]
            _apply(log, rng.randrange(1, 80), entries)
        if check:
            assert _spans(log.machine._conn) == _spans_of_the_rows(log.machine._conn)
            assert _counts(log.machine._conn) == _counts_of_the_rows(log.machine._conn)
    # Tasks are placed on the nodes and end there in every way: every
    # fifth completes; of every seventh, some stay assigned, some run, fail,
    # are cancelled or dead-lettered.
    chosen = [f"t{k:03d}" for k in range(number) if k % 5 == 0 or k % 7 == 0]
    placed = [{"task_id": t, "node": NODES[k % 3], "attempt": 1} for k, t in enumerate(chosen)]
    _apply(log, 1, [e.Entry.create(e.TaskAssign(placed), node="n1", ts=now)])
    ends: list[tuple[e.Payload, dict[str, object]]] = []
    for k, p in enumerate(placed):
        task_id, node = p["task_id"], p["node"]
        if int(task_id[1:]) % 5 == 0:
            ends.append((e.TaskComplete(task_id, 1, node, DONE), p))
        elif k % 5 == 1:
            ends.append((e.TaskStarted(task_id, 1, node), p))
        elif k % 5 == 2:
            ends.append((e.TaskFailed(task_id, 1, node, "exit code 1", permanent=True), p))
        elif k % 5 == 3:
            ends.append((e.TaskCancel(task_id), p))
        elif k % 5 == 4:
            ends.append((e.TaskDeadLetter(task_id, 1, "given up"), p))
    _apply(log, 1, [e.Entry.create(end, node=str(p["node"]), ts=now) for end, p in ends])


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkflowLog]:
    log = WorkflowLog(Path(tmp_path_factory.mktemp("created-spans")) / "state.db")
    _history(log)
    yield log
    log.close()


def _expected(log: WorkflowLog, window: CreatedWindow, **filters: object) -> list[str]:
    """The ids of the tasks the listing must give, in submission order."""
    rows = log.machine._conn.execute("SELECT * FROM tasks ORDER BY submit_index, id")
    states = filters.get("states")
    return [
        row["id"]
        for row in rows
        if (window.start_ms is None or row["created_at"] >= window.start_ms)
        and (window.end_ms is None or row["created_at"] < window.end_ms)
        and (states is None or row["state"] in states)  # type: ignore[operator]
        and ("node" not in filters or row["assigned_node"] == filters["node"])
    ]


def test_each_span_holds_the_creation_times_of_its_tasks(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    try:
        _history(log, check=True)
        conn = log.machine._conn
        spans = _spans(conn)
        assert len(spans) > 20
        # The skew shows: a later span starts before an earlier one ended.
        ordered = [spans[span] for span in sorted(spans)]
        assert any(b[0] < a[1] for a, b in zip(ordered, ordered[1:], strict=False))
        tasks = conn.execute("SELECT COUNT(*), COUNT(workflow_id) FROM tasks").fetchone()
        assert tasks[0] > 250 and tasks[1] > 0
    finally:
        log.close()


def _windows(log: WorkflowLog) -> list[CreatedWindow]:
    first, last = log.machine._conn.execute(
        "SELECT MIN(created_at), MAX(created_at) FROM tasks"
    ).fetchone()
    rng = random.Random(7)
    windows = [
        CreatedWindow(None, first),  # before every task
        CreatedWindow(last + 1, None),  # after every task
        CreatedWindow(first, last + 1),  # every task
        CreatedWindow(first + 1, first + 1),  # empty
    ]
    for _ in range(24):
        a, b = sorted(rng.randrange(first - 100, last + 100) for _ in range(2))
        windows += [CreatedWindow(a, b), CreatedWindow(a, None), CreatedWindow(None, b)]
    return windows


FILTERS: dict[str, dict[str, object]] = {
    "none": {},
    "queued": {"states": ["queued"]},
    "completed or queued": {"states": ["completed", "queued"]},
    "node": {"node": "n2"},
    "node, completed": {"node": "n2", "states": ["completed"]},
    "node, completed or failed": {"node": "n1", "states": ["completed", "failed"]},
    "node, running": {"node": "n3", "states": ["running"]},
}


@pytest.mark.parametrize("newest_first", [False, True])
@pytest.mark.parametrize("filters", sorted(FILTERS))
def test_a_window_lists_exactly_the_tasks_created_in_it(
    log: WorkflowLog, filters: str, newest_first: bool
) -> None:
    for window in _windows(log):
        expected = _expected(log, window, **FILTERS[filters])
        if newest_first:
            expected.reverse()
        seen, totals = all_pages(
            log.reader, 7, created=window, newest_first=newest_first, **FILTERS[filters]
        )
        assert [t.id for t in seen] == expected, window
        assert totals == {len(expected)}, window


def test_a_window_reads_only_its_spans_range_of_the_tasks(log: WorkflowLog) -> None:
    conn = log.reader._conn()
    first, last = conn.execute("SELECT MIN(created_at), MAX(created_at) FROM tasks").fetchone()
    recent = CreatedWindow(last - (last - first) // 10, None)
    with statements(conn) as sql:
        page = log.reader.list_tasks(limit=5, created=recent, newest_first=True)
    assert page.total == len(_expected(log, recent))
    plans = task_plans(conn, sql)
    assert len(plans) == 2, plans
    for plan in plans:
        assert "submit_index>?" in plan, plan
    # The range holds the window's tasks and not much more than its spans.
    (lowest,) = [p for p in sql if "MIN(span)" in p]
    assert lowest
    low = conn.execute(
        "SELECT MIN(span) FROM created_spans WHERE latest >= ?", (recent.start_ms,)
    ).fetchone()[0]
    outside = conn.execute(
        "SELECT COUNT(*) FROM tasks WHERE submit_index < ? AND created_at >= ?",
        (low << created_spans.SPAN_BITS, recent.start_ms),
    ).fetchone()[0]
    assert outside == 0
    # A window no span reaches reads no task.
    with statements(conn) as sql:
        page = log.reader.list_tasks(limit=5, created=CreatedWindow(last + 1, None))
    assert page.total == 0 and page.tasks == []
    assert task_plans(conn, sql) == []


def test_a_nodes_completed_tasks_in_a_window_are_counted_from_indexes(log: WorkflowLog) -> None:
    """As the node's tasks in the window less those in its other states:
    no row is read for the count, only for the page."""
    conn = log.reader._conn()
    first, last = conn.execute("SELECT MIN(created_at), MAX(created_at) FROM tasks").fetchone()
    window = CreatedWindow(first + (last - first) // 3, None)
    filters = {"node": "n2", "states": ["completed"]}
    with statements(conn) as sql:
        page = log.reader.list_tasks(limit=3, created=window, **filters)  # type: ignore[arg-type]
    expected = _expected(log, window, **filters)
    assert page.total == len(expected) > 3
    assert [t.id for t in page.tasks] == expected[:3]
    count, rows = task_plans(conn, sql)
    searches = re.findall(r"SEARCH tasks USING (?:COVERING )?INDEX \w+", count)
    assert len(searches) == 6, count  # the node's tasks, then its five other states
    assert "COVERING INDEX tasks_by_node_submit" in searches[0], count
    assert all("tasks_by_node_submit" not in search for search in searches[1:]), count
    assert "tasks_by_node_submit" in rows, rows


def test_a_node_holding_a_task_in_another_state_is_counted_row_by_row(tmp_path: Path) -> None:
    """Should a node ever hold a task in a state of none (queued, say), its
    completed tasks in a window are counted by reading their rows."""
    log = WorkflowLog(tmp_path / "state.db")
    try:
        _history(log)
        conn = log.machine._conn
        (stray,) = conn.execute(
            "SELECT id FROM tasks WHERE assigned_node = 'n2' AND state = 'assigned' LIMIT 1"
        ).fetchone()
        conn.execute("UPDATE tasks SET state = 'queued' WHERE id = ?", (stray,))
        first, last = conn.execute("SELECT MIN(created_at), MAX(created_at) FROM tasks").fetchone()
        for window in (
            CreatedWindow(first, None),
            CreatedWindow(first + (last - first) // 2, None),
        ):
            filters = {"node": "n2", "states": ["completed"]}
            page = log.reader.list_tasks(limit=3, created=window, **filters)  # type: ignore[arg-type]
            assert page.total == len(_expected(log, window, **filters)), window
    finally:
        log.close()


def _expected_workflows(
    log: WorkflowLog, window: CreatedWindow, states: list[str] | None
) -> list[str]:
    rows = log.machine._conn.execute("SELECT * FROM workflows ORDER BY submit_index, id")
    return [
        row["id"]
        for row in rows
        if (window.start_ms is None or row["created_at"] >= window.start_ms)
        and (window.end_ms is None or row["created_at"] < window.end_ms)
        and (states is None or row["state"] in states)
    ]


@pytest.mark.parametrize("newest_first", [False, True])
@pytest.mark.parametrize("states", [None, ["running"], ["cancelled", "running"]])
def test_a_window_lists_exactly_the_workflows_created_in_it(
    log: WorkflowLog, states: list[str] | None, newest_first: bool
) -> None:
    for window in [CreatedWindow(), *_windows(log)]:
        expected = _expected_workflows(log, window, states)
        if newest_first:
            expected.reverse()
        seen: list[str] = []
        totals = set()
        after = None
        while True:
            page = log.reader.list_workflows(
                states, limit=2, after=after, newest_first=newest_first, created=window
            )
            seen += [w.id for w in page.workflows]
            totals.add(page.total)
            if page.next_key is None:
                break
            after = page.next_key
        assert seen == expected, window
        assert totals == {len(expected)}, window


def test_a_workflow_listing_counts_only_within_a_window(log: WorkflowLog) -> None:
    """Its total is the counters' (`workflow_counts`) unless a creation
    window is given, and then the spans' counts and the rows of the spans
    its edge crosses."""
    conn = log.reader._conn()
    assert dict(conn.execute("SELECT state, n FROM workflow_counts WHERE n > 0")) == dict(
        conn.execute("SELECT state, COUNT(*) FROM workflows GROUP BY state")
    )
    for states in (None, ["cancelled"]):
        with statements(conn) as sql:
            log.reader.list_workflows(states, limit=2)
        assert not [q for q in sql if "COUNT(*) FROM workflows" in q], sql
    first, last = conn.execute("SELECT MIN(created_at), MAX(created_at) FROM workflows").fetchone()
    with statements(conn) as sql:
        page = log.reader.list_workflows(limit=2, created=CreatedWindow(last, None))
    (count,) = [q for q in sql if "COUNT(*) FROM workflows" in q]
    plan = " / ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {count}"))
    assert "workflows_by_submit (submit_index>? AND submit_index<?)" in plan, plan
    assert page.total == len(_expected_workflows(log, CreatedWindow(last, None), None)) >= 1


def test_a_database_made_before_gets_the_spans_from_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    log = WorkflowLog(path)
    _history(log)
    spans = _spans(log.machine._conn)
    span_counts = _counts(log.machine._conn)
    counts = dict(log.machine._conn.execute("SELECT state, n FROM workflow_counts"))
    assert sum(counts.values()) > 5 and len(counts) == 2
    digest = log.machine.digest()
    log.close()
    set_back(path, UNDO_MIGRATION_19, 18)

    machine = StateMachine(str(path))
    try:
        assert _spans(machine._conn) == spans
        assert _counts(machine._conn) == span_counts
        assert dict(machine._conn.execute("SELECT state, n FROM workflow_counts")) == counts
        assert machine.digest() == digest
    finally:
        machine.close()


def test_a_database_made_before_counts_its_spans_from_its_rows(tmp_path: Path) -> None:
    """Migration 20 on a database migration 19 left: each span's counts
    from its rows, the spans' times and the digest unchanged."""
    path = tmp_path / "state.db"
    log = WorkflowLog(path)
    _history(log)
    spans, counts = _spans(log.machine._conn), _counts(log.machine._conn)
    assert sum(t for t, _ in counts.values()) > 250 and sum(w for _, w in counts.values()) > 5
    digest = log.machine.digest()
    log.close()
    set_back(path, UNDO_MIGRATION_20, 19)
    conn = sqlite3.connect(path)
    assert "tasks" not in [row[1] for row in conn.execute("PRAGMA table_info(created_spans)")]
    conn.close()

    machine = StateMachine(str(path))
    try:
        assert _spans(machine._conn) == spans
        assert _counts(machine._conn) == counts
        assert machine.digest() == digest
    finally:
        machine.close()


def test_a_purge_drops_the_spans_before_the_oldest_task_left(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    try:
        _history(log)
        conn = log.machine._conn
        before = _spans(conn)
        # Completes the oldest queued tasks too, then purges every finished one.
        queued = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM tasks WHERE workflow_id IS NULL AND state = 'queued'"
                " ORDER BY submit_index, id LIMIT 40"
            )
        ]
        ts = 10_000_000
        _apply(log, 1, [e.Entry.create(e.TaskCancel(t), node="n1", ts=ts) for t in queued])
        results = _apply(
            log, 1, [e.Entry.create(e.TasksPurge(ts + 1, 10_000), node="n1", ts=ts + 1)]
        )
        assert results[0]["tasks"] > 40
        after = _spans(conn)
        oldest = conn.execute("SELECT MIN(submit_index) FROM tasks").fetchone()[0]
        assert oldest is not None
        assert min(after) == oldest >> created_spans.SPAN_BITS
        assert len(after) < len(before)
        assert dict(conn.execute("SELECT state, n FROM workflow_counts WHERE n > 0")) == dict(
            conn.execute("SELECT state, COUNT(*) FROM workflows GROUP BY state")
        )
        # The spans kept hold what they held: wider than what is left; their
        # counts, what is left.
        assert all(after[span] == before[span] for span in after)
        assert _counts(conn) == _counts_of_the_rows(conn)
        assert any(tasks == 0 for tasks, _ in _counts(conn).values())
        for window in _windows(log):
            seen, totals = all_pages(log.reader, 9, created=window)
            assert [t.id for t in seen] == _expected(log, window), window
            assert totals == {len(seen)}, window
        # Nothing left: no span either.
        rest = [r[0] for r in conn.execute("SELECT id FROM tasks WHERE state = 'queued'")]
        _apply(log, 1, [e.Entry.create(e.TaskCancel(t), node="n1", ts=ts + 2) for t in rest])
        _apply(log, 1, [e.Entry.create(e.TasksPurge(ts + 3, 10_000), node="n1", ts=ts + 3)])
        if conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 0:
            assert _spans(conn) == {}
    finally:
        log.close()


def test_the_migration_spans_as_many_indexes_as_apply_does() -> None:
    from cortex.state.schema import MIGRATIONS

    assert f"submit_index >> {created_spans.SPAN_BITS}" in MIGRATIONS[18]
    assert f"OLD.submit_index >> {created_spans.SPAN_BITS}" in MIGRATIONS[19]
    assert f"span << {created_spans.SPAN_BITS}" in MIGRATIONS[19]
    assert created_spans.SPAN_INDEXES == 1 << created_spans.SPAN_BITS


def _edges(conn: sqlite3.Connection, window: CreatedWindow) -> set[int]:
    """The spans `window`'s edges cross: times reaching into it, and out."""
    start = -(1 << 62) if window.start_ms is None else window.start_ms
    end = 1 << 62 if window.end_ms is None else window.end_ms
    return {
        span
        for span, (earliest, latest) in _spans(conn).items()
        if latest >= start and earliest < end and not (earliest >= start and latest < end)
    }


def _window_page(log: WorkflowLog, window: CreatedWindow) -> tuple[TaskPage, list[str]]:
    """A page of the tasks created in `window` alone, its total checked,
    and the SQL the listing ran."""
    with statements(log.reader._conn()) as sql:
        page = log.reader.list_tasks(limit=3, created=window)
    assert page.total == len(_expected(log, window)), window
    return page, sql


def test_a_window_alone_reads_rows_only_of_the_spans_its_edges_cross(log: WorkflowLog) -> None:
    """Its total is the counts of the spans wholly inside it and the rows
    of the spans its edges cross, run by run: no row of a span inside."""
    conn = log.reader._conn()
    read_fewer = 0
    for window in _windows(log):
        page, sql = _window_page(log, window)
        ranges = [
            (int(low), int(high))
            for statement in sql
            if "SELECT COUNT(*) FROM tasks" in statement
            for low, high in re.findall(
                r"submit_index >= (\d+) AND submit_index < (\d+)", statement
            )
        ]
        # No count of the window row by row.
        assert not [q for q in sql if "SELECT COUNT(*) FROM tasks WHERE created_at" in q], sql
        counted = {
            span
            for low, high in ranges
            for span in range(low >> created_spans.SPAN_BITS, high >> created_spans.SPAN_BITS)
        }
        assert counted <= _edges(conn, window), window
        read = sum(
            conn.execute(
                "SELECT COUNT(*) FROM tasks WHERE submit_index >= ? AND submit_index < ?", r
            ).fetchone()[0]
            for r in ranges
        )
        read_fewer += read < page.total
    assert read_fewer >= 10


def test_a_window_whose_edges_cross_too_many_spans_is_counted_row_by_row(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(created_spans, "MOST_EDGE_SPANS", 0)
    row_by_row = 0
    for window in _windows(log):
        _, sql = _window_page(log, window)
        row_by_row += any("SELECT COUNT(*) FROM tasks WHERE created_at" in q for q in sql)
        workflows = log.reader.list_workflows(limit=2, created=window)
        assert workflows.total == len(_expected_workflows(log, window, None)), window
    assert row_by_row >= 10
