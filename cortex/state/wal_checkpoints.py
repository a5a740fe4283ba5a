"""Checkpoints of the node database's write-ahead log, made by a thread of
their own instead of by apply.

By default SQLite checkpoints a WAL database in the commit that takes the
log past 1,000 pages: that commit copies the log's pages into the database
file and syncs both, on the Raft thread. On a node running tasks one at a
time that is one entry in about eighty (an entry writes about a dozen
pages), and that entry then took 6 to 12 ms instead of half of one: every
task whose path crossed such an entry paid for it, which made most of the
tail of the submit-to-running latency.

A node's writer therefore checkpoints only past `BACKSTOP_PAGES`, and a
`WalCheckpointer` copies the log every `DEFAULT_INTERVAL_S`, PASSIVE: it
never waits for or blocks the writer or a reader, and with nothing new in
the log a look writes nothing. The writer's own checkpoint stays as the
backstop because SQLite starts the log over only from a writer that finds
every page of it copied: under a steady stream of commits a checkpoint from
another connection seldom ends exactly at the log's end, and with no
backstop the log grew without bound (312 MB after 20,000 tasks in
`scripts/bench_apply.py`). The backstop's checkpoint finds most pages
copied already. Nothing of the state depends on when pages are copied.

The checkpointer looks only after apply committed something (`on_change`,
a state listener) and at most once an interval: an idle node's thread
sleeps instead of waking twice a second to find nothing new."""

from __future__ import annotations

import logging
import sqlite3
import threading

from cortex.state.schema import connect

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.5
# Where the writer checkpoints itself: 32 MiB of log, in pages of 4 KiB.
BACKSTOP_PAGES = 8192


class WalCheckpointer:
    def __init__(self, path: str, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self._path = path
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoints", daemon=True)
        self._failing: str | None = None
        # Set when apply committed since the last look; set from the start,
        # for what an earlier process left in the log.
        self._written = threading.Event()
        self._written.set()

    def on_change(self, index: int, changes: object) -> None:
        """State listener (Raft thread): apply committed at `index`. Setting
        a set event still takes its lock and notifies (as `steps.Signal`
        notes), after every batch: only the first since a look does."""
        if not self._written.is_set():
            self._written.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._written.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        conn = connect(self._path)
        try:
            while not self._stop.wait(self._interval_s):
                self._written.wait()
                if self._stop.is_set():
                    return
                self._written.clear()
                if not self._checkpoint(conn):
                    self._written.set()  # the next interval looks again
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> bool:
        """One PASSIVE checkpoint; whether it copied the whole log. A failure
        (a full disk, say) is logged once until one succeeds again, and the
        next interval tries again: the log keeps every page meanwhile, and
        the writer's own failures stop the node."""
        try:
            _, logged, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as err:
            if self._failing != str(err):
                log.warning("checkpoint of %s failed: %s; retrying", self._path, err)
            self._failing = str(err)
            return False
        if self._failing is not None:
            log.info("checkpoint of %s succeeded again", self._path)
            self._failing = None
        return bool(copied >= logged)
