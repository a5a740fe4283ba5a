"""Checkpoints of the node database's write-ahead log, made by a thread of
their own instead of by apply.

SQLite checkpoints a WAL database automatically in the commit that takes the
log past 1,000 pages: that commit then copies the log's pages into the
database file and syncs it, on the Raft thread, which measured about an
eighth of apply's time (`scripts/bench_apply.py`, 20,000 tasks). A node's
writer turns that off (`StateMachine(..., autocheckpoint=False)`) and a
`WalCheckpointer` checkpoints every half second instead, PASSIVE: it never
waits for or blocks the writer or a reader, and copies the pages no reader
still needs. Nothing of the state depends on when pages are copied."""

from __future__ import annotations

import logging
import sqlite3
import threading

from cortex.state.schema import connect

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.5


class WalCheckpointer:
    def __init__(self, path: str, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self._path = path
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoints", daemon=True)
        self._failing: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        conn = connect(self._path)
        try:
            while not self._stop.wait(self._interval_s):
                self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """One PASSIVE checkpoint; a failure (a full disk, say) is logged once
        until one succeeds again, and the next interval tries again: the log
        keeps every page meanwhile, and the writer's own failures stop the
        node."""
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as err:
            if self._failing != str(err):
                log.warning("checkpoint of %s failed: %s; retrying", self._path, err)
            self._failing = str(err)
            return
        if self._failing is not None:
            log.info("checkpoint of %s succeeded again", self._path)
            self._failing = None
