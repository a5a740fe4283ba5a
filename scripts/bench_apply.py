#!/usr/bin/env python3
"""What applying a noop task's three entries (submit, assign, complete)
costs one node: a StateMachine on a temporary SQLite file, no Raft, no
network. The entries are shaped as a node writes them: the submission
carries the spec in the canonical form the API proposes, an idempotency key
and a trace context; the completion carries the attempt's start (a short
attempt reports both at once) and the whole result. Task ids are made as
the API makes them (`cortex.ids`), one a millisecond (a thousand tasks a
second), from a fixed seed. Entries are applied `--batch` to a Raft entry,
phase by phase, as a busy leader batches them. The writer checkpoints its
write-ahead log only past a node's backstop, as a node's does (a node's
checkpointer thread copies the log back before then), so commits cost what
they cost a node.

Prints microseconds of CPU per task (the applying thread's, so other work
on a shared machine barely moves it) for each phase and in total. With
`--without-digest`, the same with the state digest's triggers dropped, to
show what keeping the digest costs. With `--row-costs`, also what one task
row's state update and one event row's insert cost in SQLite, with the
digest's triggers and without (the best of seven runs over every task row),
the digest's share being the difference. With `--statements`, per phase,
the CPU each kind of SQL statement takes (its triggers included) and what
apply spends outside SQL. With `--anatomy`, what the digest (its hashing and
its triggers), the task table's secondary indexes and the task-count
triggers each cost, by taking each away in turn, and what is left without
them all. With `--pages`, per phase, how many pages each commit writes to
the write-ahead log and whose they are (each table and index), read from
the log's frame headers. `--without PART ...` measures once with those
parts taken away (run under `valgrind --tool=callgrind` against a run
without it, it shows their instructions, which this machine's noise does
not move): the digest's triggers or only its hashing, the task indexes,
the task-count or node-memory triggers, apply's spec check, and the JSON
texts apply stores (written as `{}`). Apply without them is not apply: only a measure.

    python scripts/bench_apply.py --tasks 5000 --batch 100
    python scripts/bench_apply.py --row-costs --json
    python scripts/bench_apply.py --tasks 3000 --batch 25 --anatomy
    python scripts/bench_apply.py --tasks 2000 --batch 40 --pages
    valgrind --tool=callgrind python scripts/bench_apply.py --tasks 1000 --batch 25 --without digest

Every node applies every entry, so a 3-node cluster spends about three times
the total per task on apply alone."""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import random
import sqlite3
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from cortex.executors.base import ExecutionResult
from cortex.ids import time_local
from cortex.state import digest, transitions
from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.spec_rules import check_task_spec
from cortex.state.wal_checkpoints import BACKSTOP_PAGES

NODES = ("n1", "n2", "n3")
PHASES = ("submit", "assign", "complete")
# What the API proposes for {"type": "noop"}: every default filled in.
SPEC = check_task_spec({"type": "noop"})
RESULT = ExecutionResult(exit_code=0).to_dict()
TRACEPARENT = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
STARTED_AT = 1_700_000_000_000


def _joins() -> list[e.Entry]:
    return [
        e.Entry.create(e.NodeJoin(node, f"127.0.0.1:{7100 + i}", f"127.0.0.1:{7200 + i}"), node)
        for i, node in enumerate(NODES)
    ]


def _phase_entries(phase: str, chunk: list[tuple[str, str]]) -> list[e.Entry]:
    if phase == "submit":
        return [
            e.Entry.create(
                e.TaskSubmit(task_id, SPEC, f"key-{task_id}", traceparent=TRACEPARENT), "n1"
            )
            for task_id, _ in chunk
        ]
    if phase == "assign":
        placements = [{"task_id": t, "node": node, "attempt": 1} for t, node in chunk]
        return [e.Entry.create(e.TaskAssign(placements), "n1")]
    return [
        e.Entry.create(e.TaskComplete(t, 1, node, RESULT, STARTED_AT), node) for t, node in chunk
    ]


def _machine(tmp: str) -> StateMachine:
    """A state machine writing as a node's does: its commits checkpoint the
    write-ahead log only past the backstop, a node's checkpointer thread
    doing it before then (so its cost is not apply's)."""
    return StateMachine(str(Path(tmp) / "state.db"), autocheckpoint_pages=BACKSTOP_PAGES)


def _drop_digest_triggers(conn: sqlite3.Connection) -> None:
    names = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'digest_%'"
    ).fetchall()
    for (name,) in names:
        conn.execute(f"DROP TRIGGER {name}")


def _drop_task_indexes(conn: sqlite3.Connection) -> None:
    """The task table's secondary indexes (its primary key's stays)."""
    names = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks'"
        " AND sql IS NOT NULL"
    ).fetchall()
    for (name,) in names:
        conn.execute(f"DROP INDEX {name}")


def _drop_count_triggers(conn: sqlite3.Connection) -> None:
    for change in ("insert", "update", "delete"):
        conn.execute(f"DROP TRIGGER task_counts_{change}")


def _unhashed(conn: sqlite3.Connection) -> None:
    """The digest's triggers still fire, but the functions they call do nothing."""
    for name in digest.ROW_FUNCTIONS:
        conn.create_function(name, -1, lambda *_: None)


# What `--anatomy` takes away, one at a time, to see what each costs.
_WITHOUT: dict[str, Callable[[sqlite3.Connection], None]] = {
    "digest_hashing": _unhashed,
    "digest": _drop_digest_triggers,
    "task_indexes": _drop_task_indexes,
    "task_counts": _drop_count_triggers,
}
_ANATOMY_RUNS = 5


def _drop_node_memory_triggers(conn: sqlite3.Connection) -> None:
    for change in ("insert", "delete", "leave", "enter"):
        conn.execute(f"DROP TRIGGER node_memory_{change}")


# What `--without` may take away: the schema's parts (`_WITHOUT`, the node
# memory triggers) and, for the run only, two steps of apply's own.
_SCHEMA_PARTS = {**_WITHOUT, "node_memory": _drop_node_memory_triggers}
_APPLY_STEPS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "spec_check": lambda: mock.patch.object(
        transitions, "check_task_spec", lambda spec, plain_json=False: spec
    ),
    "stored_text": lambda: mock.patch.object(transitions, "_dump", lambda value: "{}"),
}


def anatomy(tasks: int, batch: int) -> dict[str, float]:
    """CPU microseconds per task of apply as it is, and what each part
    costs: the difference made by taking it away (the best of five runs
    each), and what is left with all of them gone: the handlers' Python,
    decoding, and writing the rows with their primary keys."""

    def best(*drops: Callable[[sqlite3.Connection], None]) -> float:
        return min(measure(tasks, batch, drops)["total_us"] for _ in range(_ANATOMY_RUNS))

    whole = best()
    figures = {"apply_us": whole}
    for name, drop in _WITHOUT.items():
        figures[f"{name}_us"] = whole - best(drop)
    figures["digest_triggers_us"] = figures["digest_us"] - figures["digest_hashing_us"]
    figures["rest_us"] = best(_drop_digest_triggers, _drop_task_indexes, _drop_count_triggers)
    return {name: round(value, 1) for name, value in figures.items()}


def _phases(machine: StateMachine, tasks: int, batch: int) -> Iterator[tuple[str, int]]:
    """Applies the nodes' joins, then each phase of `tasks` noop tasks,
    `batch` entries to a Raft entry; yields each phase with the applying
    thread's CPU nanoseconds it took."""
    index = 1
    machine.apply_batch(index, e.encode_batch(_joins()))
    rng = random.Random(tasks)
    placed = [
        (str(time_local(STARTED_AT / 1000 + k / 1000, rng.getrandbits(128))), NODES[k % len(NODES)])
        for k in range(tasks)
    ]
    for phase in PHASES:
        spent = 0
        for start in range(0, tasks, batch):
            data = e.encode_batch(_phase_entries(phase, placed[start : start + batch]))
            index += 1
            began = time.thread_time_ns()
            results = machine.apply_batch(index, data)
            spent += time.thread_time_ns() - began
            refused = [r for r in results or [] if not r.get("ok")]
            if refused:
                raise SystemExit(f"{phase} refused: {refused[0]}")
        yield phase, spent


def measure(
    tasks: int,
    batch: int,
    drops: Sequence[Callable[[sqlite3.Connection], None]] = (),
    steps: Sequence[str] = (),
) -> dict[str, float]:
    """CPU microseconds per task of each phase, and their total; `drops`
    take parts of the schema away first, `steps` (`_APPLY_STEPS`) parts of
    apply for the run."""
    with (
        tempfile.TemporaryDirectory(prefix="cortex-apply-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        for step in steps:
            stack.enter_context(_APPLY_STEPS[step]())
        machine = _machine(tmp)
        try:
            for drop in drops:
                drop(machine._conn)  # the bench's own machine
            spent = dict(_phases(machine, tasks, batch))
        finally:
            machine.close()
    figures = {f"{phase}_us": spent[phase] / tasks / 1e3 for phase in PHASES}
    figures["total_us"] = sum(figures.values())
    return {name: round(value, 1) for name, value in figures.items()}


_ROW_RUNS = 7
_EVENT_INSERT = (
    "INSERT INTO task_events (raft_index, entry_id, entry_type, task_id, event, from_state,"
    " to_state, node, attempt, detail, ts) SELECT 9, id, 'X', id, 'e', 'a', 'b', 'n1', 1, NULL, 5"
    " FROM tasks"
)


def row_costs(tasks: int) -> dict[str, float]:
    """CPU microseconds per row of a task state update and of an event
    insert, with the digest's triggers and without: each statement runs
    over every task row in a transaction rolled back after, best of seven."""
    with tempfile.TemporaryDirectory(prefix="cortex-apply-") as tmp:
        machine = _machine(tmp)
        try:
            submits = [
                e.Entry.create(e.TaskSubmit(f"task-{k:07d}", {"type": "noop"}, None), "n1")
                for k in range(tasks)
            ]
            machine.apply_batch(1, e.encode_batch(submits))
            conn = machine._conn  # the bench's own machine; nothing else writes

            def best(sql: str) -> float:
                spent = []
                for _ in range(_ROW_RUNS):
                    conn.execute("BEGIN")
                    began = time.thread_time()
                    conn.execute(sql)
                    spent.append(time.thread_time() - began)
                    conn.execute("ROLLBACK")
                return min(spent) * 1e6 / tasks

            update_sql = "UPDATE tasks SET state = 'running', updated_at = updated_at + 1"
            figures = {"task_update_us": best(update_sql), "event_insert_us": best(_EVENT_INSERT)}
            _drop_digest_triggers(conn)
            figures["task_update_digest_us"] = figures["task_update_us"] - best(update_sql)
            figures["event_insert_digest_us"] = figures["event_insert_us"] - best(_EVENT_INSERT)
        finally:
            machine.close()
    return {name: round(value, 2) for name, value in figures.items()}


class _TimedCursor(sqlite3.Cursor):
    """Adds each statement's CPU time (its triggers included) to `spent`,
    keyed by the statement's first words."""

    spent: collections.Counter[str] = collections.Counter()

    def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:  # type: ignore[override]
        began = time.thread_time_ns()
        try:
            return super().execute(sql, parameters)
        finally:
            _TimedCursor._add(sql, began)

    def executemany(self, sql: str, seq_of_parameters: Any) -> sqlite3.Cursor:  # type: ignore[override]
        began = time.thread_time_ns()
        try:
            return super().executemany(sql, seq_of_parameters)
        finally:
            _TimedCursor._add(sql, began)

    @staticmethod
    def _add(sql: str, began: int) -> None:
        _TimedCursor.spent[" ".join(sql.split("(")[0].split()[:4])] += time.thread_time_ns() - began


def statement_costs(tasks: int, batch: int) -> dict[str, dict[str, float]]:
    """Per phase: CPU microseconds per task spent executing each kind of SQL
    statement (triggers, so the digest, included), and the rest of apply
    (decoding, the handlers' Python), as `apply_batch` runs them."""
    with tempfile.TemporaryDirectory(prefix="cortex-apply-") as tmp:
        machine = _machine(tmp)
        conn = machine._conn  # the bench's own machine; nothing else writes
        cursor = type(conn).cursor
        conn.cursor = lambda *_: cursor(conn, _TimedCursor)  # type: ignore[method-assign,assignment]
        try:
            figures = {}
            _TimedCursor.spent.clear()
            for phase, spent in _phases(machine, tasks, batch):
                statements = {sql: ns / tasks / 1e3 for sql, ns in _TimedCursor.spent.items()}
                statements["(not in SQL)"] = spent / tasks / 1e3 - sum(statements.values())
                figures[phase] = {sql: round(us, 1) for sql, us in statements.items()}
                _TimedCursor.spent.clear()
        finally:
            machine.close()
    return figures


# A write-ahead log's header, and each frame's before its page (SQLite's
# file format): the frame's page number and, on a commit's last frame, the
# database's size in pages (0 on the others).
_WAL_HEADER_BYTES = 32
_FRAME_HEADER = struct.Struct(">II16x")


def page_counts(tasks: int, batch: int) -> dict[str, dict[str, Any]]:
    """Per phase: the pages each commit writes to the write-ahead log, in all
    and by the table or index they belong to. The log is never checkpointed
    here, so it keeps every frame; a page belongs to the same b-tree
    throughout (nothing is deleted), so the database's `dbstat` at the end
    names the owner of every page written. The first phase's commits
    include the one of the nodes' joins."""
    with tempfile.TemporaryDirectory(prefix="cortex-apply-") as tmp:
        machine = StateMachine(str(Path(tmp) / "state.db"), autocheckpoint_pages=1 << 30)
        log_path = Path(tmp) / "state.db-wal"
        try:
            # What the schema's creation wrote is not counted.
            start = max(log_path.stat().st_size, _WAL_HEADER_BYTES)
            ends = {phase: log_path.stat().st_size for phase, _ in _phases(machine, tasks, batch)}
            owners = dict(machine._conn.execute("SELECT pageno, name FROM dbstat"))
            # Read before closing: the last connection's close empties the log.
            data = log_path.read_bytes()
        finally:
            machine.close()
    page_size = int.from_bytes(data[8:12], "big")
    figures: dict[str, dict[str, Any]] = {}
    offset = start
    for phase, end in ends.items():
        pages: collections.Counter[str] = collections.Counter()
        commits = 0
        while offset + _FRAME_HEADER.size + page_size <= end:
            page, size_after = _FRAME_HEADER.unpack_from(data, offset)
            pages[owners.get(page, "?")] += 1
            commits += 1 if size_after else 0
            offset += _FRAME_HEADER.size + page_size
        figures[phase] = {
            "commits": commits,
            "pages_per_commit": round(sum(pages.values()) / max(commits, 1), 1),
            "by_owner": {
                name: round(count / max(commits, 1), 2) for name, count in pages.most_common()
            },
        }
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=5000, help="noop tasks (default 5000)")
    parser.add_argument(
        "--batch", type=int, default=100, help="entries per Raft entry (default 100)"
    )
    parser.add_argument(
        "--without-digest",
        action="store_true",
        help="also measure with the digest triggers dropped",
    )
    parser.add_argument(
        "--row-costs",
        action="store_true",
        help="also measure a task row's update and an event row's insert, and the digest's share",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="also show, per phase, the CPU each kind of SQL statement takes (triggers"
        " included) and what apply spends outside SQL",
    )
    parser.add_argument(
        "--anatomy",
        action="store_true",
        help="also show what the digest (hashing and triggers), the task table's secondary"
        " indexes and the task-count triggers each cost, and what is left without them",
    )
    parser.add_argument(
        "--pages",
        action="store_true",
        help="also show, per phase, the pages each commit writes to the write-ahead log and"
        " whose they are",
    )
    parser.add_argument(
        "--without",
        nargs="+",
        metavar="PART",
        choices=sorted([*_SCHEMA_PARTS, *_APPLY_STEPS]),
        help="measure once with these parts taken away instead (choices: %(choices)s)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.batch < 1:
        parser.error("--tasks and --batch must be at least 1")
    if args.without:
        drops = [_SCHEMA_PARTS[part] for part in args.without if part in _SCHEMA_PARTS]
        steps = [part for part in args.without if part in _APPLY_STEPS]
        runs = {"without": measure(args.tasks, args.batch, drops, steps)}
        if args.json:
            print(json.dumps({"tasks": args.tasks, "batch": args.batch,
                              "taken_away": args.without, **runs}))  # fmt: skip
        else:
            figures = runs["without"]
            print(f"apply cost per noop task on one node without {', '.join(args.without)}:"
                  f" {figures['total_us']:.0f} us/task")  # fmt: skip
        return 0
    runs = {"with_digest": measure(args.tasks, args.batch)}
    if args.without_digest:
        runs["without_digest"] = measure(args.tasks, args.batch, [_drop_digest_triggers])
    rows = row_costs(args.tasks) if args.row_costs else None
    statements = statement_costs(args.tasks, args.batch) if args.statements else None
    parts = anatomy(args.tasks, args.batch) if args.anatomy else None
    pages = page_counts(args.tasks, args.batch) if args.pages else None
    if args.json:
        print(json.dumps({"tasks": args.tasks, "batch": args.batch, **runs,
                          **({"row_costs": rows} if rows else {}),
                          **({"statements": statements} if statements else {}),
                          **({"anatomy": parts} if parts else {}),
                          **({"pages": pages} if pages else {})}))  # fmt: skip
        return 0
    print(f"apply cost per noop task on one node: {args.tasks} tasks, {args.batch} per entry")
    for name, figures in runs.items():
        phases = ", ".join(f"{phase} {figures[f'{phase}_us']:.0f}" for phase in PHASES)
        print(f"  {name.replace('_', ' '):<15} {figures['total_us']:6.0f} us/task ({phases})")
    if rows:
        print(
            f"  a task row's state update {rows['task_update_us']:.1f} us (digest"
            f" {rows['task_update_digest_us']:.1f}), an event row's insert"
            f" {rows['event_insert_us']:.1f} us (digest {rows['event_insert_digest_us']:.1f})"
        )
    if parts:
        print(f"  anatomy (best of {_ANATOMY_RUNS} runs each), us/task of {parts['apply_us']:.0f}:")
        for name, label in (
            ("digest_hashing_us", "the digest's hashing (Python, called by its triggers)"),
            ("digest_triggers_us", "the digest's triggers (calling it, passing the rows)"),
            ("task_indexes_us", "the task table's secondary indexes"),
            ("task_counts_us", "the task-count triggers"),
            ("rest_us", "the rest: decoding, handlers, rows with their primary keys"),
        ):
            print(f"    {parts[name]:6.1f}  {label}")
    for phase, costs in (statements or {}).items():
        print(f"  {phase}, us/task by statement (triggers included):")
        for sql, us in sorted(costs.items(), key=lambda item: -item[1]):
            if us >= 0.5:
                print(f"    {us:6.1f}  {sql}")
    for phase, written in (pages or {}).items():
        print(
            f"  {phase}, pages written to the log per commit: {written['pages_per_commit']:.1f}"
            f" ({written['commits']} commits)"
        )
        for name, count in written["by_owner"].items():
            if count >= 0.5:
                print(f"    {count:6.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
