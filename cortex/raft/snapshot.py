"""Snapshot files for pysyncobj log compaction: a copy of the SQLite
database, holding the Raft bookkeeping pysyncobj needs in a table of its
own. No pickle: the file travels between nodes. Snapshots from before the
table (a zip of the database and that bookkeeping) still load.

The database is copied off the Raft thread, so heartbeats and appends carry
on however large it is. The copy may include entries past the index the
snapshot is recorded at; that is safe because apply skips every entry at or
below the applied index the copy carries.

The copy is written once, straight into the file that becomes the snapshot,
and synced as it grows (`_SYNC_EVERY_BYTES`): the disk never holds gigabytes
of it unwritten for one sync at the end, which every sync of the Raft
journal on the same disk would queue behind for seconds, longer than an
election timeout."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from typing import Any

from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.node import TCPNode

from cortex.failstop import stop_node
from cortex.raft.journal import Disk, DurableJournal
from cortex.state.machine import (
    StateMachine,
    connect_read_only,
    copy_database,
    snapshot_applied_index,
)

log = logging.getLogger(__name__)

# The table of the Raft bookkeeping in a snapshot (dropped on restore).
META_TABLE = "raft_snapshot"
_SQLITE_MAGIC = b"SQLite format 3\x00"
# Snapshots written before the table: a zip of these two.
_ZIP_META = "raft.json"
_ZIP_DB = "state.db"
_PENDING_SUFFIX = ".tmp"
_BUILD_DIR = "snapshot-build"
# How much of a snapshot being written may wait unsynced.
_SYNC_EVERY_BYTES = 32 * 1024 * 1024
_SYNC_POLL_S = 0.02


def _encode_log_entry(entry: tuple[bytes, int, int]) -> list[Any]:
    command, index, term = entry
    return [base64.b64encode(command).decode(), index, term]


def _decode_log_entry(item: list[Any]) -> tuple[bytes, int, int]:
    return base64.b64decode(item[0]), int(item[1]), int(item[2])


@contextlib.contextmanager
def _synced_as_it_grows(path: str, disk: Disk) -> Iterator[None]:
    """Syncs the file at `path`, which another writer is growing (SQLite's
    backup, GIL released), each time it has grown by `_SYNC_EVERY_BYTES`."""
    done = threading.Event()

    def sync() -> None:
        fd = None
        synced = 0
        try:
            while not done.wait(_SYNC_POLL_S):
                if fd is None:
                    try:
                        fd = os.open(path, os.O_RDONLY)
                    except FileNotFoundError:
                        continue
                size = os.fstat(fd).st_size
                if size - synced >= _SYNC_EVERY_BYTES:
                    disk.fdatasync(fd)
                    synced = size
        except OSError:
            # The final sync of the whole file reports what is wrong.
            log.debug("syncing the snapshot %s as it grows failed", path, exc_info=True)
        finally:
            if fd is not None:
                os.close(fd)

    syncer = threading.Thread(target=sync, name="snapshot-sync", daemon=True)
    syncer.start()
    try:
        yield
    finally:
        done.set()
        syncer.join()


def _seal(path: str, meta: dict[str, Any]) -> int:
    """Writes `meta`, with the applied index of the copied state, into the
    copy at `path`; returns that index."""
    meta["applied_index"] = snapshot_applied_index(path)
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        # (A node that stopped between restoring a snapshot and dropping
        # the table copies it too.)
        conn.execute(f"DROP TABLE IF EXISTS {META_TABLE}")
        conn.execute(f"CREATE TABLE {META_TABLE} (meta TEXT NOT NULL)")
        conn.execute(f"INSERT INTO {META_TABLE} (meta) VALUES (?)", (json.dumps(meta),))
        conn.commit()
    finally:
        conn.close()
    return meta["applied_index"]


def _is_database(path: str) -> bool:
    with open(path, "rb") as file:
        return file.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC


def read_meta(path: str) -> dict[str, Any]:
    """The Raft bookkeeping a snapshot file holds, in either format."""
    if not _is_database(path):
        with zipfile.ZipFile(path) as archive:
            meta: dict[str, Any] = json.loads(archive.read(_ZIP_META))
            return meta
    conn = connect_read_only(path)
    try:
        row = conn.execute(f"SELECT meta FROM {META_TABLE}").fetchone()
    finally:
        conn.close()
    if row is None:
        raise ValueError(f"the snapshot {path} holds no Raft bookkeeping")
    loaded: dict[str, Any] = json.loads(row[0])
    return loaded


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
        started = time.monotonic()
        disk = self._journal.disk
        synced = self._journal.sync_enabled
        try:
            # One fixed place, cleared first: a build cut short by a crash
            # leaves nothing behind past the next one.
            scratch = os.path.join(os.path.dirname(os.path.abspath(target)), _BUILD_DIR)
            shutil.rmtree(scratch, ignore_errors=True)
            os.mkdir(scratch)
            try:
                building = os.path.join(scratch, "snapshot.db")
                # The simulation builds inline and runs no other threads.
                bounded = synced and not self._inline
                with _synced_as_it_grows(building, disk) if bounded else contextlib.nullcontext():
                    copy_database(self._machine.path, building)
                applied_index = _seal(building, meta)
                # pysyncobj drops the compacted journal entries once this
                # reports success: the snapshot must be durable first.
                if synced:
                    disk.fsync_file(building)
                os.replace(building, target)
                if synced:
                    disk.fsync_directory(os.path.dirname(os.path.abspath(target)))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            outcome = SERIALIZER_STATE.SUCCESS
            log.info("snapshot written at raft index %d (state at applied index %d) in %.1f s",
                     raft_index, applied_index, time.monotonic() - started)  # fmt: skip
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
        meta = read_meta(path)
        # A local database at or past the snapshot is a later state of the
        # same committed log: keep it, the journal replay skips what it has.
        # The index the snapshot's state is at is in its meta (older
        # snapshots: in the database), so a node restarting on its own
        # snapshot does not copy the whole database out to find it.
        recorded = _recorded_index(meta)
        if recorded is None or recorded > self._machine.applied_index:
            if _is_database(path):
                self._machine.restore_from(path, drop_tables=(META_TABLE,))
                log.info("state restored from snapshot at applied index %d",
                         self._machine.applied_index)  # fmt: skip
            else:
                with zipfile.ZipFile(path) as archive:
                    self._restore_zipped(archive, directory)
        last, prev = _decode_log_entry(meta["last"]), _decode_log_entry(meta["prev"])
        # A crash between writing a snapshot and compacting the journal leaves a
        # journal that starts earlier; pysyncobj would then clear all of it,
        # entries past the snapshot included. Compact it to the snapshot instead.
        self._journal.drop_before(prev[1], prev[2])
        cluster = {TCPNode(address) for address in meta["cluster"]}
        return last, prev, cluster

    def _restore_zipped(self, archive: zipfile.ZipFile, directory: str) -> None:
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            archive.extract(_ZIP_DB, scratch)
            db_copy = os.path.join(scratch, _ZIP_DB)
            if snapshot_applied_index(db_copy) > self._machine.applied_index:
                self._machine.restore_from(db_copy)
                log.info("state restored from snapshot at applied index %d",
                         self._machine.applied_index)  # fmt: skip


def snapshot_state_index(path: str) -> int:
    """The applied index of the state a snapshot file holds (0 when there is
    no readable snapshot)."""
    try:
        meta = read_meta(path)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, sqlite3.Error):
        return 0
    recorded = _recorded_index(meta)
    return recorded if recorded is not None else int(_decode_log_entry(meta["last"])[1])


def _recorded_index(meta: dict[str, Any]) -> int | None:
    """The applied index of the state, as the snapshot's meta records it
    (None in snapshots from before it did)."""
    recorded = meta.get("applied_index")
    return recorded if isinstance(recorded, int) else None
