"""A local fault while applying (here: SQLite's own "database or disk is
full") is handed to the fault handler before the applied index moves, is
never recorded, and the same entry applies once there is room again, to the
same state as on a node that never ran short."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NoReturn

import pytest

from cortex.state import entries as e
from cortex.state.machine import StateMachine


class Stopped(Exception):
    def __init__(self, index: int, applied: int, err: BaseException) -> None:
        super().__init__(f"index {index}: {err}")
        self.index, self.applied, self.err = index, applied, err


def _stop(index: int, applied: int, err: BaseException) -> NoReturn:
    raise Stopped(index, applied, err)


def _batch(number: int) -> bytes:
    spec = {"command": ["true"], "env": {"PAD": "x" * 20_000}}
    return e.encode_batch(
        [e.Entry.create(e.TaskSubmit(f"t{number}-{i}", spec), "n1", ts=number) for i in range(5)]
    )


def test_a_full_database_stops_before_the_index_moves(tmp_path: Path) -> None:
    machine = StateMachine(str(tmp_path / "short" / "state.db"), on_fault=_stop)
    reference = StateMachine(str(tmp_path / "roomy" / "state.db"))
    batches = [_batch(n) for n in range(1, 61)]
    page_size = machine._conn.execute("PRAGMA page_size").fetchone()[0]
    pages = machine._conn.execute("PRAGMA page_count").fetchone()[0]
    machine._conn.execute(f"PRAGMA max_page_count = {pages + 1_000_000 // page_size}")

    index = 0
    with pytest.raises(Stopped) as stopped:
        for index, data in enumerate(batches, 1):
            machine.apply_batch(index, data)
            reference.apply_batch(index, data)
    assert isinstance(stopped.value.err, sqlite3.OperationalError)
    assert "full" in str(stopped.value.err)
    assert stopped.value.index == index and stopped.value.applied == index - 1
    assert machine.applied_index == index - 1
    failed = [f"t{index}-{i}" for i in range(5)]
    rows = machine._conn.execute(
        "SELECT COUNT(*) FROM tasks WHERE id IN (?,?,?,?,?)", failed
    ).fetchone()[0]
    events = machine._conn.execute(
        "SELECT COUNT(*) FROM task_events WHERE raft_index = ?", (index,)
    ).fetchone()[0]
    assert (rows, events) == (0, 0)
    assert reference.applied_index == index - 1
    assert machine.digest() == reference.digest()

    # Room again: the same entry applies, and so does the rest.
    machine._conn.execute("PRAGMA max_page_count = 1073741823")
    for number in range(index, len(batches) + 1):
        machine.apply_batch(number, batches[number - 1])
        reference.apply_batch(number, batches[number - 1])
    assert machine.applied_index == reference.applied_index == len(batches)
    assert machine.digest() == reference.digest()
    machine.close()
    reference.close()


def test_an_unexpected_error_in_a_handler_is_a_fault_not_a_rejection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortex.state import handlers

    machine = StateMachine(str(tmp_path / "state.db"), on_fault=_stop)

    def broken(ctx: object, payload: object) -> dict[str, object]:
        raise KeyError("a bug")

    monkeypatch.setitem(handlers.HANDLERS, e.TaskCancel, broken)
    machine.apply_batch(1, _batch(1))
    cancel = e.encode_batch([e.Entry.create(e.TaskCancel("t1-0"), "n1", ts=2)])
    with pytest.raises(Stopped) as stopped:
        machine.apply_batch(2, cancel)
    assert isinstance(stopped.value.err, KeyError)
    assert machine.applied_index == 1
    rejected = machine._conn.execute(
        "SELECT COUNT(*) FROM task_events WHERE event = 'rejected'"
    ).fetchone()[0]
    assert rejected == 0
