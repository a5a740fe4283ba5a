#!/usr/bin/env python3
"""Times a log-compaction snapshot (SQLite backup + zip), which pysyncobj
takes on the Raft thread, for a database holding N completed tasks, and the
restore a lagging node does. Prints database and snapshot sizes and times,
and the apply time of one retention purge of the default batch size (also on
the Raft thread)."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid

from cortex.config import NodeConfig
from cortex.raft.snapshot import SnapshotStore
from cortex.state import StateMachine
from cortex.state import entries as e


def fill(machine: StateMachine, tasks: int) -> int:
    index = 1
    join = e.Entry.create(e.NodeJoin("n1", "127.0.0.1:1", "127.0.0.1:2"), "n1")
    machine.apply_batch(index, e.encode_batch([join]))
    for start in range(0, tasks, 500):
        batch = []
        for i in range(start, min(start + 500, tasks)):
            task_id = str(uuid.uuid4())
            batch += [
                e.Entry.create(e.TaskSubmit(task_id, {"command": ["echo", str(i)]}), "n1"),
                e.Entry.create(
                    e.TaskAssign([{"task_id": task_id, "node": "n1", "attempt": 1}]), "n1"
                ),
                e.Entry.create(
                    e.TaskComplete(task_id, 1, "n1", {"exit_code": 0, "stdout": "x" * 64}), "n1"
                ),
            ]
        index += 1
        machine.apply_batch(index, e.encode_batch(batch))
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    args = parser.parse_args()
    batch = NodeConfig.model_fields["purge_batch_size"].default
    print(f"{'tasks':>8} {'db MB':>8} {'snapshot MB':>12} {'snapshot ms':>12} {'restore ms':>11}"
          f" {f'purge {batch} ms':>15}")  # fmt: skip
    for tasks in args.tasks:
        with tempfile.TemporaryDirectory() as scratch:
            machine = StateMachine(os.path.join(scratch, "state.db"))
            index = fill(machine, tasks)
            db_bytes = sum(
                os.path.getsize(os.path.join(scratch, name))
                for name in os.listdir(scratch)
                if name.startswith("state.db")
            )
            path = os.path.join(scratch, "raft.snapshot")
            started = time.perf_counter()
            SnapshotStore(machine).serialize(path, ((b"", index, 1), (b"", index - 1, 1), set()))
            taken = time.perf_counter() - started
            fresh = StateMachine(os.path.join(scratch, "fresh.db"))
            started = time.perf_counter()
            SnapshotStore(fresh).deserialize(path)
            restored = time.perf_counter() - started
            assert fresh.digest() == machine.digest()
            now = int(time.time() * 1000)
            purge = e.Entry.create(e.TasksPurge(now, batch), "n1", ts=now)
            started = time.perf_counter()
            (result,) = machine.apply_batch(index + 1, e.encode_batch([purge])) or [{}]
            purged = time.perf_counter() - started
            assert result.get("tasks") == min(batch, tasks), result
            print(f"{tasks:>8} {db_bytes / 1e6:>8.1f} {os.path.getsize(path) / 1e6:>12.1f} "
                  f"{taken * 1000:>12.0f} {restored * 1000:>11.0f} {purged * 1000:>15.0f}")  # fmt: skip
    print("(the snapshot is taken on the Raft thread: heartbeats wait that long; "
          "election timeouts are 400-1400 ms)")  # fmt: skip


if __name__ == "__main__":
    main()
