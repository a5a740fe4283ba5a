"""A node's writer leaves its write-ahead log to `WalCheckpointer` up to the
backstop: apply's commits do not copy the log into the database file below
it, the checkpointer's thread does, the state read back is the same, and
with both at work under a steady stream of commits the log stays bounded."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.wal_checkpoints import BACKSTOP_PAGES, WalCheckpointer

PAGE = 4096


def apply_tasks(machine: StateMachine, batches: int, per_batch: int = 200) -> None:
    for _ in range(batches):
        index = machine.applied_index + 1
        submits = [
            e.Entry.create(e.TaskSubmit(f"t-{index}-{k}", {"type": "noop"}), "n1")
            for k in range(per_batch)
        ]
        machine.apply_batch(index, e.encode_batch(submits))


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_apply_leaves_the_log_to_the_checkpointer_which_copies_it(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    machine = StateMachine(path, autocheckpoint_pages=BACKSTOP_PAGES)
    try:
        empty = os.path.getsize(path)
        # Well past SQLite's own threshold of 1,000 pages, short of the backstop.
        apply_tasks(machine, batches=25)
        wal_pages = os.path.getsize(path + "-wal") // PAGE
        assert 1_000 < wal_pages < BACKSTOP_PAGES
        assert os.path.getsize(path) == empty  # nothing copied by apply
        digest = machine.digest()

        checkpoints = WalCheckpointer(path, interval_s=0.05)
        checkpoints.start()
        try:
            assert wait_for(lambda: os.path.getsize(path) > empty + 1_000_000)
        finally:
            checkpoints.stop()
        assert not checkpoints._thread.is_alive()
        apply_tasks(machine, batches=1)  # the writer goes on after a checkpoint
        assert machine.applied_index == 26
    finally:
        machine.close()
    reopened = StateMachine(path)
    try:
        assert reopened.applied_index == 26
        assert reopened.digest() != digest  # the last batch is there too
    finally:
        reopened.close()


def test_the_backstop_keeps_the_log_bounded_under_steady_commits(tmp_path: Path) -> None:
    """The checkpointer copies all the time; without the writer's backstop
    the log would only grow (about 300 pages a batch here: 18,000 in all)."""
    path = str(tmp_path / "state.db")
    backstop = 256
    machine = StateMachine(path, autocheckpoint_pages=backstop)
    checkpoints = WalCheckpointer(path, interval_s=0.01)
    checkpoints.start()
    try:
        largest = 0
        for _ in range(60):
            apply_tasks(machine, batches=1)
            largest = max(largest, os.path.getsize(path + "-wal"))
        assert largest < 4 * (backstop + 1_000) * PAGE, largest
    finally:
        checkpoints.stop()
        machine.close()


class CountedCheckpointer(WalCheckpointer):
    """Counts its looks at the log, and says what each found."""

    def __init__(self, path: str, interval_s: float) -> None:
        super().__init__(path, interval_s)
        self.looks: list[bool] = []

    def _checkpoint(self, conn: sqlite3.Connection) -> bool:
        whole = super()._checkpoint(conn)
        self.looks.append(whole)
        return whole


def test_an_idle_checkpointer_looks_only_after_apply_wrote(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    machine = StateMachine(path, autocheckpoint_pages=BACKSTOP_PAGES)
    checkpoints = CountedCheckpointer(path, interval_s=0.01)
    machine.add_listener(checkpoints.on_change)
    apply_tasks(machine, batches=2)
    checkpoints.start()
    try:
        assert wait_for(lambda: checkpoints.looks == [True])  # what was there at the start
        time.sleep(0.3)  # thirty intervals with nothing written: no look
        assert checkpoints.looks == [True]
        apply_tasks(machine, batches=1)
        assert wait_for(lambda: checkpoints.looks == [True, True])
    finally:
        checkpoints.stop()
        machine.close()


def test_a_log_a_reader_holds_back_is_looked_at_again_until_copied(tmp_path: Path) -> None:
    """A PASSIVE checkpoint stops at the oldest reader's snapshot: the
    checkpointer looks again each interval, with nothing new written, until
    the whole log is copied."""
    path = str(tmp_path / "state.db")
    machine = StateMachine(path, autocheckpoint_pages=BACKSTOP_PAGES)
    checkpoints = CountedCheckpointer(path, interval_s=0.01)
    machine.add_listener(checkpoints.on_change)
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        apply_tasks(machine, batches=1)
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM tasks").fetchone()  # holds its snapshot
        apply_tasks(machine, batches=1)
        checkpoints.start()
        assert wait_for(lambda: len(checkpoints.looks) >= 5)
        assert not any(checkpoints.looks)
        reader.execute("COMMIT")
        assert wait_for(lambda: checkpoints.looks[-1])
        looked = len(checkpoints.looks)
        time.sleep(0.2)
        assert len(checkpoints.looks) == looked
    finally:
        reader.close()
        checkpoints.stop()
        machine.close()
