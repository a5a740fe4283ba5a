"""Runs (`cortex.state.runs`): a batch whose task entries apply together, in
runs, ends exactly as the same batch applied entry by entry, each under a
savepoint of its own. Generated batches are drawn from the tasks the
database holds: submissions of new and existing tasks (keys new, reused with
the same spec and with another), assignment rounds, starts and outcomes of
the right attempt and of stale ones, tasks with a limited concurrency key
(which a run leaves out), cancellations between them, an entry naming a task
twice, and assignments of tasks submitted earlier in the same batch (as a
leader placing tasks with their submission appends them). Properties: the same result for every entry, the same task changes
handed to listeners, the same digest and the same rows in every table."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cortex.state import runs
from cortex.state.entries import Entry, LimitSet, NodeJoin, encode_batch
from cortex.state.machine import StateMachine
from cortex.state.transitions import TaskChange

NODES = ("n1", "n2", "n3")
SPECS = (
    {"type": "noop"},
    {"type": "noop", "priority": 7},
    {"type": "noop", "concurrency_key": "gpu"},
)
KEYS = (None, None, "k1", "k2", "k3")


class EntryByEntry(StateMachine):
    """Every entry under its own savepoint, never in a run: the reference."""

    def _apply_entries(self, cur, index, items, changes, guarded, plain_json):  # type: ignore[no-untyped-def]
        return super()._apply_entries(cur, index, items, changes, True, plain_json)


def _entry(number: int, payload: dict[str, Any], entry_type: str, node: str = "n1") -> Entry:
    return Entry(type=entry_type, id=f"e-{number}", ts=10_000 + number, node=node, payload=payload)


@st.composite
def _batch(
    draw: st.DrawFn, tasks: dict[str, tuple[str, int, str | None]], start: int
) -> list[Entry]:
    """Entries drawn against the tasks as they are before the batch
    (id -> state, attempt, node)."""
    entries: list[Entry] = []
    number = start
    fresh = 0
    submitted: list[str] = []  # new in this batch
    for _ in range(draw(st.integers(1, 14))):
        number += 1
        kind = draw(st.sampled_from(["submit", "submit", "assign", "report", "report", "cancel"]))
        known = sorted(tasks)
        queued = [task_id for task_id in known if tasks[task_id][0] == "queued"]
        if kind == "submit" or len(known) < 3:
            fresh += 1
            task_id = draw(st.sampled_from([f"t{start}-{fresh}", *known[:3]]))
            if task_id not in tasks:
                submitted.append(task_id)
            payload = {
                "task_id": task_id,
                "spec": draw(st.sampled_from(SPECS)),
                "idempotency_key": draw(st.sampled_from(KEYS)),
            }
            entries.append(_entry(number, payload, "TASK_SUBMIT"))
        elif kind == "assign":
            # Mostly distinct tasks (a run's kind); now and then one twice.
            pool = queued if queued and draw(st.integers(0, 3)) else known
            if submitted and draw(st.booleans()):
                pool = submitted
            chosen = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6, unique=True))
            if draw(st.integers(0, 9)) == 0:
                chosen.append(chosen[0])
            placements = [
                {
                    "task_id": task_id,
                    "node": draw(st.sampled_from([*NODES, "ghost"])),
                    "attempt": tasks.get(task_id, ("", 0, None))[1]
                    + draw(st.sampled_from([1, 1, 1, 0])),
                }
                for task_id in chosen
            ]
            entries.append(_entry(number, {"assignments": placements}, "TASK_ASSIGN"))
        elif kind == "report":
            task_id = draw(st.sampled_from(known))
            _, attempt, node = tasks[task_id]
            report = {
                "task_id": task_id,
                "attempt": attempt + draw(st.sampled_from([0, 0, 0, 1])),
                "node": node or "n1",
            }
            if draw(st.booleans()):
                entries.append(_entry(number, report, "TASK_STARTED", report["node"]))
            else:
                started = draw(st.sampled_from([None, 9_000]))
                complete = {**report, "result": {"exit_code": 0}, "started_at": started}
                entries.append(_entry(number, complete, "TASK_COMPLETE", report["node"]))
        else:
            entries.append(_entry(number, {"task_id": draw(st.sampled_from(known))}, "TASK_CANCEL"))
    return entries


def _tasks(conn: sqlite3.Connection) -> dict[str, tuple[str, int, str | None]]:
    return {
        row[0]: (row[1], row[2], row[3])
        for row in conn.execute("SELECT id, state, attempt, assigned_node FROM tasks")
    }


def first_batch() -> bytes:
    """The nodes join and the gpu key is limited to one running task (a run
    that took in its tasks would place a second one). Entry ids and times
    are made here, once for every machine it is fed to."""
    joins = [
        Entry.create(NodeJoin(node, f"127.0.0.1:{7100 + i}", f"127.0.0.1:{7200 + i}"), node)
        for i, node in enumerate(NODES)
    ]
    return encode_batch([*joins, Entry.create(LimitSet("gpu", max_running=1), "n1")])


@dataclass
class SideBySide:
    """Two state machines fed the same entries, what their listeners were
    handed, and a connection to each one's database."""

    one: StateMachine
    other: StateMachine
    seen: dict[str, list[tuple[int, list[TaskChange]]]]
    peek_one: sqlite3.Connection
    peek_other: sqlite3.Connection


@contextmanager
def side_by_side(
    tmp: str, one: type[StateMachine], other: type[StateMachine]
) -> Iterator[SideBySide]:
    machines = [one(os.path.join(tmp, "one.db")), other(os.path.join(tmp, "other.db"))]
    seen: dict[str, list[tuple[int, list[TaskChange]]]] = {"one": [], "other": []}
    for name, machine in zip(seen, machines, strict=True):
        machine.add_listener(lambda index, changes, n=name: seen[n].append((index, list(changes))))
    peeks = [sqlite3.connect(machine.path) for machine in machines]
    try:
        yield SideBySide(machines[0], machines[1], seen, peeks[0], peeks[1])
    finally:
        for closable in [*peeks, *machines]:
            closable.close()


def _dump(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, with their row ids where a table has them."""
    tables = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        try:
            tables[name] = list(conn.execute(f"SELECT rowid, * FROM {name} ORDER BY rowid"))
        except sqlite3.OperationalError:  # a table WITHOUT ROWID
            tables[name] = sorted(conn.execute(f"SELECT * FROM {name}"), key=repr)
    return tables


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_batch_applied_in_runs_ends_as_applied_entry_by_entry(data: st.DataObject) -> None:
    formed: list[int] = []
    original_split = runs.split

    def counting_split(cur: sqlite3.Cursor, items: list[Any]) -> Any:
        for part in original_split(cur, items):
            if part.run is not None:
                formed.append(len(part.items))
            yield part

    with (
        tempfile.TemporaryDirectory() as tmp,
        side_by_side(tmp, StateMachine, EntryByEntry) as both,
    ):
        runs.split = counting_split  # type: ignore[assignment]
        try:
            first = first_batch()
            assert both.one.apply_batch(1, first) == both.other.apply_batch(1, first)
            number = 0
            for index in range(2, 2 + data.draw(st.integers(1, 8), label="batches")):
                entries = data.draw(_batch(_tasks(both.peek_one), number), label=f"batch {index}")
                number += len(entries)
                raw = encode_batch(entries)
                before = len(formed)
                results = both.one.apply_batch(index, raw)
                assert results == both.other.apply_batch(index, raw)
                assert both.one.digest() == both.other.digest()
                if len(formed) > before and results and all(r["ok"] for r in results):
                    event("a batch was applied in runs")
            assert both.seen["one"] == both.seen["other"]
            assert _dump(both.peek_one) == _dump(both.peek_other)
        finally:
            runs.split = original_split  # type: ignore[assignment]
    if formed:
        event(f"a run of {min(max(formed), 5)}+ entries was formed")
