"""Snapshot files for pysyncobj log compaction: the SQLite database itself
plus the Raft bookkeeping pysyncobj needs, in one zip. No pickle: the file
travels between nodes."""

from __future__ import annotations

import base64
import json
import logging
import os
import tempfile
import zipfile
from typing import Any

from pysyncobj.node import TCPNode

from cortex.state.machine import StateMachine, snapshot_applied_index

log = logging.getLogger(__name__)

_META = "raft.json"
_DB = "state.db"


def _encode_log_entry(entry: tuple[bytes, int, int]) -> list[Any]:
    command, index, term = entry
    return [base64.b64encode(command).decode(), index, term]


def _decode_log_entry(item: list[Any]) -> tuple[bytes, int, int]:
    return base64.b64decode(item[0]), int(item[1]), int(item[2])


class SnapshotStore:
    """The serializer/deserializer pair handed to `SyncObjConf`. Both run on
    the Raft thread, so the database copy matches the applied index exactly."""

    def __init__(self, machine: StateMachine) -> None:
        self._machine = machine

    def serialize(self, path: str, raft_data: tuple[Any, Any, Any]) -> None:
        last_entry, prev_entry, cluster = raft_data
        meta = {
            "last": _encode_log_entry(last_entry),
            "prev": _encode_log_entry(prev_entry),
            "cluster": sorted(node.id for node in cluster),
            "applied_index": self._machine.applied_index,
        }
        directory = os.path.dirname(os.path.abspath(path))
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            db_copy = os.path.join(scratch, _DB)
            self._machine.backup_to(db_copy)
            with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
                archive.writestr(_META, json.dumps(meta))
                archive.write(db_copy, _DB)
        log.info("snapshot written at raft index %d", last_entry[1])

    def deserialize(self, path: str) -> tuple[Any, Any, Any]:
        directory = os.path.dirname(os.path.abspath(path))
        with (
            zipfile.ZipFile(path) as archive,
            tempfile.TemporaryDirectory(dir=directory) as scratch,
        ):
            meta = json.loads(archive.read(_META))
            archive.extract(_DB, scratch)
            db_copy = os.path.join(scratch, _DB)
            snapshot_index = snapshot_applied_index(db_copy)
            # A local database at or past the snapshot is a later state of the
            # same committed log: keep it, the journal replay skips what it has.
            if snapshot_index > self._machine.applied_index:
                self._machine.restore_from(db_copy)
                log.info("state restored from snapshot at applied index %d", snapshot_index)
        cluster = {TCPNode(address) for address in meta["cluster"]}
        return _decode_log_entry(meta["last"]), _decode_log_entry(meta["prev"]), cluster
