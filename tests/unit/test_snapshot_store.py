"""The compaction snapshot as pysyncobj drives it: `serialize` on the Raft
thread starts a build, `check` reports it once, and the file it leaves
restores to a state from which replaying the log reaches the same digest,
even though entries kept applying while it was built."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.node import TCPNode

from cortex.raft import snapshot
from cortex.raft.journal import Disk, DurableJournal
from cortex.raft.snapshot import META_TABLE, SnapshotStore, read_meta, snapshot_state_index
from cortex.state import StateMachine
from cortex.state import entries as e
from cortex.state.machine import copy_database

SHELL = {"type": "shell", "command": ["true"]}


def _batch(number: int) -> bytes:
    return e.encode_batch(
        [e.Entry.create(e.TaskSubmit(f"t{number}-{i}", SHELL), "n1", ts=number) for i in range(20)]
    )


def _until_done(store: SnapshotStore) -> list[int]:
    states = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states.append(store.check())
        if states[-1] != SERIALIZER_STATE.SERIALIZING:
            return states
        time.sleep(0.001)
    pytest.fail("the snapshot build did not finish")


@contextlib.contextmanager
def _loaded(directory: Path, dump: Path) -> Iterator[tuple[StateMachine, tuple[Any, Any, Any]]]:
    """A node's state machine in `directory`, having loaded the snapshot
    `dump` as pysyncobj does (what `deserialize` returned beside it)."""
    loaded = StateMachine(str(directory / "state.db"))
    try:
        yield loaded, SnapshotStore(loaded, DurableJournal(str(directory))).deserialize(str(dump))
    finally:
        loaded.close()


@pytest.fixture
def machine(tmp_path: Path):
    m = StateMachine(str(tmp_path / "node" / "state.db"))
    yield m
    m.close()


def test_a_build_is_reported_once_and_leaves_the_dump_in_place(tmp_path: Path, machine) -> None:
    for number in range(1, 51):
        machine.apply_batch(number, _batch(number))
    dump = tmp_path / "node" / "raft.snapshot"
    pending = Path(f"{dump}.tmp")
    pending.write_bytes(b"stale leftovers pysyncobj would move over the dump")
    crashed_build = tmp_path / "node" / "snapshot-build"
    crashed_build.mkdir()
    (crashed_build / "state.db").write_bytes(b"half a copy from a build cut short")
    store = SnapshotStore(machine, DurableJournal(str(tmp_path / "node")))
    assert store.check() == SERIALIZER_STATE.NOT_SERIALIZING
    cluster = {TCPNode("127.0.0.1:7101"), TCPNode("127.0.0.1:7102")}
    store.serialize(str(pending), ((b"last", 50, 3), (b"prev", 49, 3), cluster))
    assert not pending.exists()
    states = _until_done(store)
    assert states[-1] == SERIALIZER_STATE.SUCCESS
    assert store.check() == SERIALIZER_STATE.NOT_SERIALIZING
    assert not crashed_build.exists()
    meta = read_meta(str(dump))
    assert meta["cluster"] == ["127.0.0.1:7101", "127.0.0.1:7102"]
    assert meta["applied_index"] == 50

    with _loaded(tmp_path / "fresh", dump) as (fresh, (last, prev, members)):
        assert (last, prev) == ((b"last", 50, 3), (b"prev", 49, 3))
        assert {m.id for m in members} == {n.id for n in cluster}
        assert fresh.digest() == machine.digest()


def test_entries_applied_during_the_build_replay_to_the_same_digest(
    tmp_path: Path, machine
) -> None:
    batches = {number: _batch(number) for number in range(1, 401)}
    for number in range(1, 201):
        machine.apply_batch(number, batches[number])
    store = SnapshotStore(machine, DurableJournal(str(tmp_path / "node")))
    dump = tmp_path / "node" / "raft.snapshot"
    store.serialize(f"{dump}.tmp", ((b"", 200, 1), (b"", 199, 1), set()))
    # The Raft thread carries on while the copy is taken.
    applier = threading.Thread(
        target=lambda: [machine.apply_batch(n, batches[n]) for n in range(201, 401)]
    )
    applier.start()
    assert _until_done(store)[-1] == SERIALIZER_STATE.SUCCESS
    applier.join(60)

    with _loaded(tmp_path / "fresh", dump) as (fresh, _):
        assert 200 <= fresh.applied_index <= 400
        # pysyncobj replays from the recorded index; apply skips what the copy has.
        for number in range(201, 401):
            fresh.apply_batch(number, batches[number])
        assert fresh.applied_index == 400
        assert fresh.digest() == machine.digest()


def test_a_failed_build_is_reported_once_and_keeps_the_old_dump(tmp_path: Path, machine) -> None:
    machine.apply_batch(1, _batch(1))
    store = SnapshotStore(machine, DurableJournal(str(tmp_path / "node")))
    missing = tmp_path / "no-such-dir" / "raft.snapshot"
    store.serialize(f"{missing}.tmp", ((b"", 1, 1), (b"", 0, 1), set()))
    assert _until_done(store)[-1] == SERIALIZER_STATE.FAILED
    assert store.check() == SERIALIZER_STATE.NOT_SERIALIZING
    assert not os.path.exists(missing)


def test_a_node_at_or_past_its_snapshot_restarts_without_copying_the_database_out(
    tmp_path: Path, machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot's meta says the index its state is at: a node whose own
    database is there already (a restart on its own snapshot) keeps it and
    never copies the snapshot's in; a node behind it restores it."""
    for number in range(1, 31):
        machine.apply_batch(number, _batch(number))
    store = SnapshotStore(machine, DurableJournal(str(tmp_path / "node")))
    dump = tmp_path / "node" / "raft.snapshot"
    store.serialize(f"{dump}.tmp", ((b"", 30, 1), (b"", 29, 1), set()))
    assert _until_done(store)[-1] == SERIALIZER_STATE.SUCCESS
    machine.apply_batch(31, _batch(31))
    restored: list[str] = []
    real_restore = StateMachine.restore_from

    def restore_from(self: StateMachine, path: str, *args: object, **kwargs: object) -> None:
        restored.append(self.path)
        real_restore(self, path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(StateMachine, "restore_from", restore_from)
    digest = machine.digest()
    store.deserialize(str(dump))
    assert restored == [] and machine.applied_index == 31 and machine.digest() == digest
    behind = StateMachine(str(tmp_path / "behind" / "state.db"))
    try:
        behind.apply_batch(1, _batch(1))
        SnapshotStore(behind, DurableJournal(str(tmp_path / "behind"))).deserialize(str(dump))
        assert restored == [behind.path] and behind.applied_index == 30
        # The bookkeeping stays in the snapshot, not in the state it restores.
        tables = {
            name
            for (name,) in behind._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        }
        assert META_TABLE not in tables and "tasks" in tables
    finally:
        behind.close()


def _zipped_snapshot(machine: StateMachine, dump: Path, last: int, cluster: list[str]) -> None:
    """A snapshot as nodes wrote them before the bookkeeping table: a zip of
    raft.json and the database."""
    copy = dump.parent / "old-copy.db"
    copy_database(machine.path, str(copy))
    meta = {
        "last": [base64.b64encode(b"old").decode(), last, 2],
        "prev": [base64.b64encode(b"").decode(), last - 1, 2],
        "cluster": cluster,
        "applied_index": machine.applied_index,
    }
    with zipfile.ZipFile(dump, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("raft.json", json.dumps(meta))
        archive.write(copy, "state.db")
    copy.unlink()


def test_a_zipped_snapshot_from_before_the_bookkeeping_table_still_loads(
    tmp_path: Path, machine
) -> None:
    for number in range(1, 21):
        machine.apply_batch(number, _batch(number))
    dump = tmp_path / "node" / "raft.snapshot"
    _zipped_snapshot(machine, dump, 20, ["127.0.0.1:7101"])
    assert snapshot_state_index(str(dump)) == 20
    with _loaded(tmp_path / "fresh", dump) as (fresh, (last, prev, members)):
        assert (last, prev) == ((b"old", 20, 2), (b"", 19, 2))
        assert [m.id for m in members] == ["127.0.0.1:7101"]
        assert fresh.applied_index == 20 and fresh.digest() == machine.digest()


class _SizesAtSync(Disk):
    """Records the size of the file each data sync found."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def fdatasync(self, fd: int) -> None:
        self.sizes.append(os.fstat(fd).st_size)
        super().fdatasync(fd)


def test_a_file_growing_is_synced_each_time_it_grows_by_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync of gigabytes at the end would hold every sync of the Raft
    journal on the same disk behind it for seconds."""
    step = 64 * 1024
    monkeypatch.setattr(snapshot, "_SYNC_EVERY_BYTES", step)
    disk = _SizesAtSync()
    path = tmp_path / "growing"
    with snapshot._synced_as_it_grows(str(path), disk), path.open("wb") as file:
        for grown in range(1, 5):
            file.write(b"x" * step)
            file.flush()
            deadline = time.monotonic() + 10
            while len(disk.sizes) < grown:
                assert time.monotonic() < deadline, (grown, disk.sizes)
                time.sleep(0.005)
        file.write(b"x" * (step // 2))
    assert disk.sizes == [step * n for n in range(1, 5)]


def test_a_snapshot_is_copied_under_the_sync_bound_and_synced_whole(
    tmp_path: Path, machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(1, 21):
        machine.apply_batch(number, _batch(number))
    bounded: list[str] = []
    real = snapshot._synced_as_it_grows

    def synced_as_it_grows(path: str, disk: Disk):  # type: ignore[no-untyped-def]
        bounded.append(path)
        return real(path, disk)

    monkeypatch.setattr(snapshot, "_synced_as_it_grows", synced_as_it_grows)
    synced: list[str] = []

    class Recording(Disk):
        def fsync_file(self, path: str) -> None:
            synced.append(path)
            super().fsync_file(path)

    journal = DurableJournal(str(tmp_path / "node"))
    journal.disk = Recording()
    store = SnapshotStore(machine, journal)
    dump = tmp_path / "node" / "raft.snapshot"
    store.serialize(f"{dump}.tmp", ((b"", 20, 1), (b"", 19, 1), set()))
    assert _until_done(store)[-1] == SERIALIZER_STATE.SUCCESS
    # The copy is built where the final sync finds it, then moved into place.
    assert len(bounded) == 1 and synced == bounded
    assert not os.path.exists(bounded[0]) and read_meta(str(dump))["applied_index"] == 20


def test_a_database_left_holding_the_bookkeeping_table_still_snapshots(
    tmp_path: Path, machine
) -> None:
    """A node stopped between restoring a snapshot and dropping its table
    keeps the table; its next snapshot replaces it."""
    for number in range(1, 6):
        machine.apply_batch(number, _batch(number))
    machine._conn.execute(f"CREATE TABLE {META_TABLE} (meta TEXT NOT NULL)")
    machine._conn.execute(f"INSERT INTO {META_TABLE} (meta) VALUES ('stale')")
    store = SnapshotStore(machine, DurableJournal(str(tmp_path / "node")))
    dump = tmp_path / "node" / "raft.snapshot"
    store.serialize(f"{dump}.tmp", ((b"", 5, 1), (b"", 4, 1), set()))
    assert _until_done(store)[-1] == SERIALIZER_STATE.SUCCESS
    assert read_meta(str(dump))["applied_index"] == 5
