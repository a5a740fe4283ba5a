"""A node's writer leaves its write-ahead log to `WalCheckpointer`: apply's
commits no longer copy the log into the database file, the checkpointer's
thread does, and the state read back is the same."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.wal_checkpoints import WalCheckpointer


def _apply_tasks(machine: StateMachine, batches: int, per_batch: int = 200) -> None:
    for _ in range(batches):
        index = machine.applied_index + 1
        submits = [
            e.Entry.create(e.TaskSubmit(f"t-{index}-{k}", {"type": "noop"}), "n1")
            for k in range(per_batch)
        ]
        machine.apply_batch(index, e.encode_batch(submits))


def _wait_for(condition, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def test_apply_leaves_the_log_to_the_checkpointer_which_copies_it(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    machine = StateMachine(path, autocheckpoint=False)
    try:
        empty = os.path.getsize(path)
        # Well past SQLite's automatic checkpoint at 1,000 pages of log.
        _apply_tasks(machine, batches=25)
        wal_pages = os.path.getsize(path + "-wal") // 4096
        assert wal_pages > 1_000
        assert os.path.getsize(path) == empty  # nothing copied by apply
        digest = machine.digest()

        checkpoints = WalCheckpointer(path, interval_s=0.05)
        checkpoints.start()
        try:
            assert _wait_for(lambda: os.path.getsize(path) > empty + 1_000_000)
        finally:
            checkpoints.stop()
        assert not checkpoints._thread.is_alive()
        _apply_tasks(machine, batches=1)  # the writer goes on after a checkpoint
        assert machine.applied_index == 26
    finally:
        machine.close()
    reopened = StateMachine(path)
    try:
        assert reopened.applied_index == 26
        assert reopened.digest() != digest  # the last batch is there too
    finally:
        reopened.close()


def test_a_writer_with_autocheckpoint_copies_the_log_itself(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    machine = StateMachine(path)
    try:
        empty = os.path.getsize(path)
        _apply_tasks(machine, batches=25)
        assert os.path.getsize(path) > empty + 1_000_000
    finally:
        machine.close()
