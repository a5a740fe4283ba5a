"""The compaction snapshot as pysyncobj drives it: `serialize` on the Raft
thread starts a build, `check` reports it once, and the file it leaves
restores to a state from which replaying the log reaches the same digest,
even though entries kept applying while it was built."""

from __future__ import annotations

import json
import os
import threading
import time
import zipfile
from pathlib import Path

import pytest
from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.node import TCPNode

from cortex.raft.journal import DurableJournal
from cortex.raft.snapshot import SnapshotStore
from cortex.state import StateMachine
from cortex.state import entries as e

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
    with zipfile.ZipFile(dump) as archive:
        meta = json.loads(archive.read("raft.json"))
    assert meta["cluster"] == ["127.0.0.1:7101", "127.0.0.1:7102"]
    assert meta["applied_index"] == 50

    fresh = StateMachine(str(tmp_path / "fresh" / "state.db"))
    try:
        last, prev, members = SnapshotStore(
            fresh, DurableJournal(str(tmp_path / "fresh"))
        ).deserialize(str(dump))
        assert (last, prev) == ((b"last", 50, 3), (b"prev", 49, 3))
        assert {m.id for m in members} == {n.id for n in cluster}
        assert fresh.digest() == machine.digest()
    finally:
        fresh.close()


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

    fresh = StateMachine(str(tmp_path / "fresh" / "state.db"))
    try:
        SnapshotStore(fresh, DurableJournal(str(tmp_path / "fresh"))).deserialize(str(dump))
        assert 200 <= fresh.applied_index <= 400
        # pysyncobj replays from the recorded index; apply skips what the copy has.
        for number in range(201, 401):
            fresh.apply_batch(number, batches[number])
        assert fresh.applied_index == 400
        assert fresh.digest() == machine.digest()
    finally:
        fresh.close()


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
    never extracts the snapshot's copy; a node behind it restores it."""
    for number in range(1, 31):
        machine.apply_batch(number, _batch(number))
    store = SnapshotStore(machine, DurableJournal(str(tmp_path / "node")))
    dump = tmp_path / "node" / "raft.snapshot"
    store.serialize(f"{dump}.tmp", ((b"", 30, 1), (b"", 29, 1), set()))
    assert _until_done(store)[-1] == SERIALIZER_STATE.SUCCESS
    machine.apply_batch(31, _batch(31))
    extracted: list[str] = []
    real_extract = zipfile.ZipFile.extract

    def extract(archive: zipfile.ZipFile, member: str, *args: object) -> str:
        extracted.append(member)
        return real_extract(archive, member, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile.ZipFile, "extract", extract)
    digest = machine.digest()
    store.deserialize(str(dump))
    assert extracted == [] and machine.applied_index == 31 and machine.digest() == digest
    behind = StateMachine(str(tmp_path / "behind" / "state.db"))
    try:
        behind.apply_batch(1, _batch(1))
        SnapshotStore(behind, DurableJournal(str(tmp_path / "behind"))).deserialize(str(dump))
        assert extracted == ["state.db"] and behind.applied_index == 30
    finally:
        behind.close()
