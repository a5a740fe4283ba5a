"""An observer's own compaction snapshot: pysyncobj puts its `selfNode`,
None on a read-only node, into the cluster it hands the serializer. The
snapshot records the voters only, and loads back as them."""

from __future__ import annotations

from pathlib import Path

from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.node import TCPNode

from cortex.raft.journal import DurableJournal
from cortex.raft.snapshot import SnapshotStore, read_meta
from cortex.state import StateMachine
from cortex.state import entries as e

VOTERS = ["127.0.0.1:7100", "127.0.0.1:7101", "127.0.0.1:7102"]


def test_an_observers_snapshot_records_the_voters(tmp_path: Path) -> None:
    machine = StateMachine(str(tmp_path / "o1" / "state.db"))
    try:
        entry = e.Entry.create(e.TaskSubmit("t1", {"type": "shell", "command": ["true"]}), "n1")
        machine.apply_batch(2, e.encode_batch([entry]))
        store = SnapshotStore(machine, DurableJournal(str(tmp_path / "o1")), inline=True)
        dump = tmp_path / "o1" / "raft.snapshot"
        cluster = {*(TCPNode(address) for address in VOTERS), None}
        store.serialize(f"{dump}.tmp", ((b"", 2, 1), (b"", 1, 1), cluster))
        assert store.check() == SERIALIZER_STATE.SUCCESS
        assert read_meta(str(dump))["cluster"] == VOTERS
        _, _, loaded = store.deserialize(str(dump))
        assert sorted(node.id for node in loaded) == VOTERS
    finally:
        machine.close()
