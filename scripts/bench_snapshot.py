#!/usr/bin/env python3
"""Times a log-compaction snapshot (a synced copy of the SQLite database) for
a database holding N completed tasks: how long it holds the Raft thread, how
long the build takes on its own thread, and the slowest apply and journal
sync on the same disk while it runs; then the restore a
lagging node does, and the apply times of retention purges, one after
another, of the default batch size (or `--purge-batch`): their median and
slowest. Prints database and snapshot sizes and times."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid

from pysyncobj.config import SERIALIZER_STATE

from cortex.config import NodeConfig
from cortex.raft.journal import DurableJournal
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
    parser.add_argument(
        "--purge-batch", type=int, default=NodeConfig.model_fields["purge_batch_size"].default,
        help="tasks one purge removes at most (default: the node's default)",
    )  # fmt: skip
    parser.add_argument("--purges", type=int, default=5, help="purges timed one after another")
    args = parser.parse_args()
    batch = args.purge_batch
    print(f"{'tasks':>8} {'db MB':>8} {'snapshot MB':>12} {'raft thread ms':>15} {'build ms':>9}"
          f" {'apply max ms':>13} {'sync max ms':>12} {'restore ms':>11}"
          f" {f'purge {batch} ms p50/max':>22}")  # fmt: skip
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
            store = SnapshotStore(machine, DurableJournal(os.path.join(scratch, "journal")))
            started = time.perf_counter()
            # As pysyncobj calls it: with the pending name, from the Raft thread.
            recorded = index
            store.serialize(path + ".tmp", ((b"", index, 1), (b"", index - 1, 1), set()))
            blocked = time.perf_counter() - started
            # The Raft thread keeps applying while the copy is built, and
            # syncing what it appends to its journal on the same disk.
            slowest = slowest_sync = 0.0
            journal_fd = os.open(os.path.join(scratch, "journal.probe"), os.O_WRONLY | os.O_CREAT)
            while store.check() == SERIALIZER_STATE.SERIALIZING:
                index += 1
                entry = e.Entry.create(e.TaskSubmit(f"during-{index}", {"type": "noop"}), "n1")
                applied = time.perf_counter()
                machine.apply_batch(index, e.encode_batch([entry]))
                slowest = max(slowest, time.perf_counter() - applied)
                os.write(journal_fd, e.encode_batch([entry]))
                syncing = time.perf_counter()
                os.fdatasync(journal_fd)
                slowest_sync = max(slowest_sync, time.perf_counter() - syncing)
            os.close(journal_fd)
            built = time.perf_counter() - started
            assert os.path.exists(path), "the snapshot was not written"
            fresh = StateMachine(os.path.join(scratch, "fresh.db"))
            started = time.perf_counter()
            SnapshotStore(
                fresh, DurableJournal(os.path.join(scratch, "fresh-journal"))
            ).deserialize(path)
            restored = time.perf_counter() - started
            # The copy holds at least the recorded state, and maybe entries past it.
            assert recorded <= fresh.applied_index <= machine.applied_index
            now = int(time.time() * 1000)
            purges: list[float] = []
            removed = 0
            for _ in range(args.purges):
                index += 1
                purge = e.Entry.create(e.TasksPurge(now, batch), "n1", ts=now)
                started = time.perf_counter()
                (result,) = machine.apply_batch(index, e.encode_batch([purge])) or [{}]
                purges.append(time.perf_counter() - started)
                assert result.get("tasks") == min(batch, tasks - removed), result
                removed += result["tasks"]
            purged = f"{statistics.median(purges) * 1000:.0f}/{max(purges) * 1000:.0f}"
            print(f"{tasks:>8} {db_bytes / 1e6:>8.1f} {os.path.getsize(path) / 1e6:>12.1f} "
                  f"{blocked * 1000:>15.1f} {built * 1000:>9.0f} {slowest * 1000:>13.1f} "
                  f"{slowest_sync * 1000:>12.1f} {restored * 1000:>11.0f} {purged:>22}")  # fmt: skip
    print("(raft thread ms: how long compaction holds the Raft thread; the copy is built on "
          "another thread while entries keep applying (apply max ms: the slowest of them) and "
          "their journal is synced (sync max ms: the slowest sync, which an election timeout "
          "bounds); "
          "restore runs on the Raft thread of a node catching up)")  # fmt: skip


if __name__ == "__main__":
    main()
