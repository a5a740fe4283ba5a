"""Snapshot files for pysyncobj log compaction: the SQLite database itself
plus the Raft bookkeeping pysyncobj needs, in one zip. No pickle: the file
travels between nodes.

The database is copied off the Raft thread, so heartbeats and appends carry
on however large it is. The copy may include entries past the index the
snapshot is recorded at; that is safe because apply skips every entry at or
below the applied index the copy carries."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import zipfile
from typing import Any

from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.node import TCPNode

from cortex.failstop import stop_node
from cortex.raft.journal import DurableJournal
from cortex.state.machine import StateMachine, copy_database, snapshot_applied_index

log = logging.getLogger(__name__)

_META = "raft.json"
_DB = "state.db"
_PENDING_SUFFIX = ".tmp"
_BUILD_DIR = "snapshot-build"


def _encode_log_entry(entry: tuple[bytes, int, int]) -> list[Any]:
    command, index, term = entry
    return [base64.b64encode(command).decode(), index, term]


def _decode_log_entry(item: list[Any]) -> tuple[bytes, int, int]:
    return base64.b64decode(item[0]), int(item[1]), int(item[2])


class SnapshotStore:
    """The serializer, serialize checker and deserializer handed to
    `SyncObjConf`. `serialize` runs on the Raft thread but only records the
    Raft bookkeeping and starts the build; `check` tells pysyncobj when the
    build is done, and only then does it drop the compacted log entries."""

    def __init__(
        self, machine: StateMachine, journal: DurableJournal, inline: bool = False
    ) -> None:
        self._machine = machine
        self._journal = journal
        # Build on the calling thread (a deterministic simulation has no others).
        self._inline = inline
        self._built_inline = False
        self._lock = threading.Lock()
        self._build: threading.Thread | None = None
        self._outcome = SERIALIZER_STATE.FAILED

    def serialize(self, path: str, raft_data: tuple[Any, Any, Any]) -> None:
        # pysyncobj passes `<dump>.tmp` and moves it over the dump once this
        # returns. The build replaces the dump itself when it is complete, so
        # nothing may sit at `<dump>.tmp` for that move to find.
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        target = path[: -len(_PENDING_SUFFIX)] if path.endswith(_PENDING_SUFFIX) else path
        last_entry, prev_entry, cluster = raft_data
        meta = {
            "last": _encode_log_entry(last_entry),
            "prev": _encode_log_entry(prev_entry),
            # The voters; an observer's own place in the set is None.
            "cluster": sorted(node.id for node in cluster if node is not None),
        }
        if self._inline:
            self._write(target, meta, last_entry[1])
            self._built_inline = True
            return
        with self._lock:
            if self._build is not None:
                return
            self._build = threading.Thread(
                target=self._write, args=(target, meta, last_entry[1]), name="snapshot", daemon=True
            )
            self._build.start()

    def check(self) -> int:
        """pysyncobj's `serializeChecker`: a `SERIALIZER_STATE`."""
        with self._lock:
            if self._built_inline:
                self._built_inline = False
                return self._outcome
            if self._build is None:
                return SERIALIZER_STATE.NOT_SERIALIZING
            if self._build.is_alive():
                return SERIALIZER_STATE.SERIALIZING
            self._build = None
            return self._outcome

    def _write(self, target: str, meta: dict[str, Any], raft_index: int) -> None:
        outcome = SERIALIZER_STATE.FAILED
        try:
            # One fixed place, cleared first: a build cut short by a crash
            # leaves nothing behind past the next one.
            scratch = os.path.join(os.path.dirname(os.path.abspath(target)), _BUILD_DIR)
            shutil.rmtree(scratch, ignore_errors=True)
            os.mkdir(scratch)
            try:
                db_copy = os.path.join(scratch, _DB)
                copy_database(self._machine.path, db_copy)
                meta["applied_index"] = snapshot_applied_index(db_copy)
                building = os.path.join(scratch, "snapshot.zip")
                with zipfile.ZipFile(building, "w", zipfile.ZIP_STORED) as archive:
                    archive.writestr(_META, json.dumps(meta))
                    archive.write(db_copy, _DB)
                # pysyncobj drops the compacted journal entries once this
                # reports success: the snapshot must be durable first.
                if self._journal.sync_enabled:
                    self._journal.disk.fsync_file(building)
                os.replace(building, target)
                if self._journal.sync_enabled:
                    self._journal.disk.fsync_directory(os.path.dirname(os.path.abspath(target)))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            outcome = SERIALIZER_STATE.SUCCESS
            log.info("snapshot written at raft index %d (state at applied index %d)",
                     raft_index, meta["applied_index"])  # fmt: skip
        except Exception:
            log.exception("snapshot at raft index %d failed", raft_index)
        finally:
            with self._lock:
                self._outcome = outcome

    def deserialize(self, path: str) -> tuple[Any, Any, Any]:
        """Loads the snapshot at `path`: on start, the node's own; after a
        transfer, the leader's. pysyncobj swallows what this raises and carries
        on with a half-loaded state, so any failure stops the node."""
        try:
            return self._load(path)
        except Exception as err:
            stop_node(
                f"loading the Raft snapshot {path} failed",
                err,
                "Fix the cause (disk space, permissions) and start the node again; if the"
                " snapshot itself is damaged, move the data dir aside and start the node with"
                " an empty one and --join to copy the state from the cluster.",
            )

    def _load(self, path: str) -> tuple[Any, Any, Any]:
        directory = os.path.dirname(os.path.abspath(path))
        if self._journal.sync_enabled:
            # pysyncobj renames a received snapshot into place without syncing
            # it; it must be durable before the journal is cleared for it.
            self._journal.disk.fsync_file(path)
            self._journal.disk.fsync_directory(directory)
        with zipfile.ZipFile(path) as archive:
            meta = json.loads(archive.read(_META))
            # A local database at or past the snapshot is a later state of the
            # same committed log: keep it, the journal replay skips what it
            # has. The index the snapshot's state is at is in its meta (older
            # snapshots: in the database), so a node restarting on its own
            # snapshot does not copy the whole database out to find it.
            recorded = _recorded_index(meta)
            if recorded is None or recorded > self._machine.applied_index:
                self._restore(archive, directory)
        last, prev = _decode_log_entry(meta["last"]), _decode_log_entry(meta["prev"])
        # A crash between writing a snapshot and compacting the journal leaves a
        # journal that starts earlier; pysyncobj would then clear all of it,
        # entries past the snapshot included. Compact it to the snapshot instead.
        self._journal.drop_before(prev[1], prev[2])
        cluster = {TCPNode(address) for address in meta["cluster"]}
        return last, prev, cluster

    def _restore(self, archive: zipfile.ZipFile, directory: str) -> None:
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            archive.extract(_DB, scratch)
            db_copy = os.path.join(scratch, _DB)
            snapshot_index = snapshot_applied_index(db_copy)
            if snapshot_index > self._machine.applied_index:
                self._machine.restore_from(db_copy)
                log.info("state restored from snapshot at applied index %d", snapshot_index)


def snapshot_state_index(path: str) -> int:
    """The applied index of the state a snapshot file holds (0 when there is
    no readable snapshot)."""
    try:
        with zipfile.ZipFile(path) as archive:
            meta = json.loads(archive.read(_META))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return 0
    recorded = _recorded_index(meta)
    return recorded if recorded is not None else int(_decode_log_entry(meta["last"])[1])


def _recorded_index(meta: dict[str, Any]) -> int | None:
    """The applied index of the state, as the snapshot's meta records it
    (None in snapshots from before it did)."""
    recorded = meta.get("applied_index")
    return recorded if isinstance(recorded, int) else None
