"""The SQLite schema and its forward-only migrations, tracked by
`PRAGMA user_version`."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

from cortex.state import digest

log = logging.getLogger(__name__)

MIGRATIONS: list[str] = [
    # 1: the task core.
    """
    CREATE TABLE raft_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        workflow_id TEXT,
        workflow_key TEXT,
        type TEXT NOT NULL,
        state TEXT NOT NULL,
        priority INTEGER NOT NULL,
        spec TEXT NOT NULL,
        constraints TEXT NOT NULL,
        retry_policy TEXT NOT NULL,
        timeout_ms INTEGER,
        labels TEXT NOT NULL,
        idempotency_key TEXT,
        assigned_node TEXT,
        attempt INTEGER NOT NULL DEFAULT 0,
        retries INTEGER NOT NULL DEFAULT 0,
        result TEXT,
        error TEXT,
        output_ref TEXT,
        scheduled_after INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        assigned_at INTEGER,
        started_at INTEGER,
        completed_at INTEGER,
        dead_lettered_at INTEGER,
        updated_at INTEGER NOT NULL,
        submit_index INTEGER NOT NULL
    );
    CREATE INDEX tasks_by_state ON tasks (state, priority DESC, created_at, submit_index);
    CREATE INDEX tasks_by_node ON tasks (assigned_node, state);
    CREATE INDEX tasks_by_workflow ON tasks (workflow_id);
    CREATE TABLE task_events (
        seq INTEGER PRIMARY KEY,
        raft_index INTEGER NOT NULL,
        entry_id TEXT,
        entry_type TEXT,
        task_id TEXT,
        event TEXT NOT NULL,
        from_state TEXT,
        to_state TEXT,
        node TEXT,
        attempt INTEGER,
        detail TEXT,
        ts INTEGER NOT NULL
    );
    CREATE INDEX task_events_by_task ON task_events (task_id, seq);
    CREATE TABLE submissions (
        idempotency_key TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        raft_index INTEGER NOT NULL
    );
    CREATE TABLE nodes (
        id TEXT PRIMARY KEY,
        raft_address TEXT NOT NULL,
        grpc_address TEXT NOT NULL,
        status TEXT NOT NULL,
        labels TEXT NOT NULL,
        executors TEXT NOT NULL,
        resources TEXT NOT NULL,
        joined_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE workflows (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        definition TEXT NOT NULL,
        context TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        completed_at INTEGER
    );
    CREATE TABLE task_dependencies (
        workflow_id TEXT NOT NULL,
        task_key TEXT NOT NULL,
        depends_on_key TEXT NOT NULL,
        condition TEXT,
        PRIMARY KEY (workflow_id, task_key, depends_on_key)
    );
    """,
    # 2: drain deadlines and why a node is in its status.
    """
    ALTER TABLE nodes ADD COLUMN drain_deadline INTEGER;
    ALTER TABLE nodes ADD COLUMN status_reason TEXT NOT NULL DEFAULT '';
    """,
    # 3: workflows: de-duplication, why one failed, log order; DAG lookups.
    """
    ALTER TABLE workflows ADD COLUMN idempotency_key TEXT;
    ALTER TABLE workflows ADD COLUMN error TEXT;
    ALTER TABLE workflows ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE workflows ADD COLUMN submit_index INTEGER NOT NULL DEFAULT 0;
    CREATE UNIQUE INDEX workflows_by_idempotency_key ON workflows (idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX workflows_by_state ON workflows (state, submit_index);
    CREATE INDEX tasks_by_workflow_key ON tasks (workflow_id, workflow_key);
    CREATE INDEX tasks_by_workflow_state ON tasks (workflow_id, state);
    CREATE INDEX task_dependencies_by_dependency
        ON task_dependencies (workflow_id, depends_on_key);
    """,
    # 4: retention: what TASKS_PURGE removes, oldest first. Partial indexes,
    # so live rows cost nothing; queries must repeat their WHERE verbatim.
    """
    CREATE INDEX tasks_purgeable ON tasks (completed_at, id)
        WHERE workflow_id IS NULL AND state IN ('cancelled', 'completed', 'failed', 'skipped');
    CREATE INDEX workflows_finished ON workflows (completed_at, id)
        WHERE state IN ('cancelled', 'completed', 'failed');
    CREATE INDEX task_events_loose ON task_events (ts)
        WHERE (task_id IS NULL OR event = 'rejected');
    """,
    # 5: where other nodes reach a node's peer listener (node-to-node calls).
    """
    ALTER TABLE nodes ADD COLUMN peer_address TEXT NOT NULL DEFAULT '';
    """,
    # 6: workflows submitted in parts; each task keeps its place in the
    # definition and its condition, so nothing reads a workflow's whole
    # definition back (it is no longer stored in one piece).
    """
    ALTER TABLE tasks ADD COLUMN workflow_pos INTEGER;
    ALTER TABLE tasks ADD COLUMN condition TEXT;
    ALTER TABLE workflows ADD COLUMN total_tasks INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE workflows ADD COLUMN parts INTEGER NOT NULL DEFAULT 0;
    UPDATE tasks SET
        workflow_pos = (
            SELECT CAST(j.key AS INTEGER) FROM workflows w, json_each(w.definition, '$.tasks') j
            WHERE w.id = tasks.workflow_id AND json_extract(j.value, '$.key') = tasks.workflow_key),
        condition = (
            SELECT json_extract(j.value, '$.condition')
            FROM workflows w, json_each(w.definition, '$.tasks') j
            WHERE w.id = tasks.workflow_id AND json_extract(j.value, '$.key') = tasks.workflow_key)
        WHERE workflow_id IS NOT NULL;
    UPDATE workflows SET parts = 1,
        total_tasks = (SELECT COUNT(*) FROM tasks WHERE tasks.workflow_id = workflows.id),
        definition = json_object('name', name);
    CREATE INDEX tasks_by_workflow_pos ON tasks (workflow_id, workflow_pos);
    """,
    # 7: observer nodes: replicate the log without a vote and run no tasks.
    """
    ALTER TABLE nodes ADD COLUMN role TEXT NOT NULL DEFAULT 'voter';
    """,
    # 8: listings page in submission order (keyset on submit_index, id) and
    # filter on creation time without reading the rows they skip.
    """
    CREATE INDEX tasks_by_submit ON tasks (submit_index, id, created_at);
    CREATE INDEX tasks_by_state_submit ON tasks (state, submit_index, id, created_at);
    CREATE INDEX tasks_by_workflow_submit ON tasks (workflow_id, submit_index, id, created_at);
    CREATE INDEX tasks_by_node_submit ON tasks (assigned_node, submit_index, id, created_at);
    CREATE INDEX workflows_by_submit ON workflows (submit_index, id, created_at);
    """,
    # 9: `task list --type` pages and counts without a scan (a task's type
    # never changes, so only inserts maintain it).
    """
    CREATE INDEX tasks_by_type_submit ON tasks (type, submit_index, id, created_at);
    """,
    # 10: trace context (W3C traceparent) of each task and workflow, and of
    # each workflow's run (the context its tasks hang off). NULL for rows
    # written before: the digest then covers the same NULLs on every node.
    """
    ALTER TABLE tasks ADD COLUMN traceparent TEXT;
    ALTER TABLE workflows ADD COLUMN traceparent TEXT;
    ALTER TABLE workflows ADD COLUMN run_traceparent TEXT;
    """,
    # 11: limits per concurrency key (with their token buckets), weights of
    # fairness keys, and schedules with their recent firings. Tasks keep
    # their keys in columns, so the scheduler reads the queue per fairness
    # key and counts a concurrency key's active tasks from an index. The
    # queue's index by state and priority gives way to the one by state,
    # fairness key and priority (every state change moves a task in both).
    """
    ALTER TABLE tasks ADD COLUMN concurrency_key TEXT;
    ALTER TABLE tasks ADD COLUMN fairness_key TEXT NOT NULL DEFAULT 'default';
    CREATE INDEX tasks_by_fairness_key
        ON tasks (state, fairness_key, priority DESC, created_at, submit_index);
    DROP INDEX tasks_by_state;
    CREATE INDEX tasks_by_concurrency_key ON tasks (concurrency_key, state)
        WHERE concurrency_key IS NOT NULL;
    CREATE TABLE key_limits (
        key TEXT PRIMARY KEY,
        max_running INTEGER NOT NULL,
        rate_per_min INTEGER NOT NULL,
        burst INTEGER NOT NULL,
        bucket_units INTEGER,
        bucket_at INTEGER,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE fairness_weights (
        key TEXT PRIMARY KEY,
        weight INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE schedules (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        timing TEXT NOT NULL,
        target_kind TEXT NOT NULL,
        target TEXT NOT NULL,
        overlap TEXT NOT NULL,
        catchup_window_ms INTEGER NOT NULL,
        paused INTEGER NOT NULL,
        anchor_ms INTEGER NOT NULL,
        last_slot_ms INTEGER NOT NULL,
        buffered_slot_ms INTEGER,
        last_fired_at INTEGER,
        last_fired_slot_ms INTEGER,
        fired INTEGER NOT NULL DEFAULT 0,
        missed INTEGER NOT NULL DEFAULT 0,
        skipped INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        submit_index INTEGER NOT NULL
    );
    CREATE TABLE schedule_firings (
        seq INTEGER PRIMARY KEY,
        schedule_id TEXT NOT NULL,
        slot_ms INTEGER NOT NULL,
        first_slot_ms INTEGER NOT NULL,
        slot_count INTEGER NOT NULL,
        action TEXT NOT NULL,
        reason TEXT NOT NULL,
        run_kind TEXT,
        run_id TEXT,
        raft_index INTEGER NOT NULL,
        ts INTEGER NOT NULL
    );
    CREATE INDEX schedule_firings_by_schedule ON schedule_firings (schedule_id, seq);
    CREATE INDEX schedule_firings_by_run ON schedule_firings (run_id) WHERE run_id IS NOT NULL;
    """,
    # 12: how many tasks there are of each state, type and node, kept by
    # triggers in the transaction that changes them, so a listing's total and
    # the counts by state are a sum over a few rows, not a count over every
    # task. Derived from `tasks` alone, so outside the digest. A node of ''
    # stands for none.
    """
    CREATE TABLE task_counts (
        state TEXT NOT NULL,
        type TEXT NOT NULL,
        node TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (state, type, node)
    ) WITHOUT ROWID;
    INSERT INTO task_counts (state, type, node, n)
        SELECT state, type, COALESCE(assigned_node, ''), COUNT(*) FROM tasks
        GROUP BY state, type, COALESCE(assigned_node, '');
    CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
        INSERT INTO task_counts (state, type, node, n)
            VALUES (NEW.state, NEW.type, COALESCE(NEW.assigned_node, ''), 1)
            ON CONFLICT (state, type, node) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
        UPDATE task_counts SET n = n - 1 WHERE state = OLD.state AND type = OLD.type
            AND node = COALESCE(OLD.assigned_node, '');
    END;
    CREATE TRIGGER task_counts_update AFTER UPDATE OF state, type, assigned_node ON tasks
        WHEN OLD.state IS NOT NEW.state OR OLD.type IS NOT NEW.type
            OR OLD.assigned_node IS NOT NEW.assigned_node
    BEGIN
        UPDATE task_counts SET n = n - 1 WHERE state = OLD.state AND type = OLD.type
            AND node = COALESCE(OLD.assigned_node, '');
        INSERT INTO task_counts (state, type, node, n)
            VALUES (NEW.state, NEW.type, COALESCE(NEW.assigned_node, ''), 1)
            ON CONFLICT (state, type, node) DO UPDATE SET n = n + 1;
    END;
    """,
    # 13: the indexes led by a task's workflow hold workflow tasks only. A
    # standalone task's entries in them (under a NULL workflow) were written
    # at every submission, and in the one by state at every state change,
    # for no query: each names a workflow, which SQLite takes to imply the
    # indexes' condition (the query plans are unchanged).
    """
    DROP INDEX tasks_by_workflow;
    CREATE INDEX tasks_by_workflow ON tasks (workflow_id) WHERE workflow_id IS NOT NULL;
    DROP INDEX tasks_by_workflow_key;
    DROP INDEX tasks_by_workflow_state;
    DROP INDEX tasks_by_workflow_pos;
    DROP INDEX tasks_by_workflow_submit;
    CREATE INDEX tasks_by_workflow_key ON tasks (workflow_id, workflow_key)
        WHERE workflow_id IS NOT NULL;
    CREATE INDEX tasks_by_workflow_state ON tasks (workflow_id, state)
        WHERE workflow_id IS NOT NULL;
    CREATE INDEX tasks_by_workflow_pos ON tasks (workflow_id, workflow_pos)
        WHERE workflow_id IS NOT NULL;
    CREATE INDEX tasks_by_workflow_submit ON tasks (workflow_id, submit_index, id, created_at)
        WHERE workflow_id IS NOT NULL;
    """,
    # 14: the retention indexes' conditions spell their states out as
    # comparisons joined by OR. SQLite evaluates a partial index's condition
    # on the old and the new row of every UPDATE that sets a column it names,
    # and an `IN (...)` list there builds a lookup table each time: with the
    # one on tasks, every state change cost about 4 us more than the rest of
    # its index work (a noop task's apply 217k more CPU instructions in 2.7M,
    # under valgrind).
    """
    DROP INDEX tasks_purgeable;
    CREATE INDEX tasks_purgeable ON tasks (completed_at, id)
        WHERE workflow_id IS NULL AND (state = 'cancelled' OR state = 'completed'
            OR state = 'failed' OR state = 'skipped');
    DROP INDEX workflows_finished;
    CREATE INDEX workflows_finished ON workflows (completed_at, id)
        WHERE (state = 'cancelled' OR state = 'completed' OR state = 'failed');
    """,
    # 15: queued tasks backing off, by when they may run, so the scheduler
    # finds the next one without reading every queued task (it asks before
    # each wait). Partial: a task outside a back-off costs it nothing.
    """
    CREATE INDEX tasks_backing_off ON tasks (scheduled_after)
        WHERE state = 'queued' AND scheduled_after > 0;
    """,
    # 16: the memory promised through minMemoryMb to each node's assigned and
    # running tasks, kept by triggers in the transaction that moves them, as
    # `task_counts` is. Placement on nodes that declare their memory reads it
    # for every decision; summing it read every active task and parsed its
    # constraints (2 ms a placement with 2,000 active). A task's constraints
    # are parsed only as it enters or leaves a node's active tasks. Derived
    # from `tasks` alone, so outside the digest.
    """
    CREATE TABLE node_memory (
        node TEXT PRIMARY KEY,
        mb INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO node_memory (node, mb)
        SELECT assigned_node, SUM(json_extract(constraints, '$.min_memory_mb')) FROM tasks
        WHERE (state = 'assigned' OR state = 'running') AND assigned_node IS NOT NULL
            AND json_extract(constraints, '$.min_memory_mb') > 0
        GROUP BY assigned_node;
    CREATE TRIGGER node_memory_insert AFTER INSERT ON tasks
        WHEN (NEW.state = 'assigned' OR NEW.state = 'running') AND NEW.assigned_node IS NOT NULL
            AND json_extract(NEW.constraints, '$.min_memory_mb') > 0
    BEGIN
        INSERT INTO node_memory (node, mb)
            VALUES (NEW.assigned_node, json_extract(NEW.constraints, '$.min_memory_mb'))
            ON CONFLICT (node) DO UPDATE SET mb = mb + excluded.mb;
    END;
    CREATE TRIGGER node_memory_delete AFTER DELETE ON tasks
        WHEN (OLD.state = 'assigned' OR OLD.state = 'running') AND OLD.assigned_node IS NOT NULL
            AND json_extract(OLD.constraints, '$.min_memory_mb') > 0
    BEGIN
        UPDATE node_memory SET mb = mb - json_extract(OLD.constraints, '$.min_memory_mb')
            WHERE node = OLD.assigned_node;
    END;
    CREATE TRIGGER node_memory_leave AFTER UPDATE OF state, assigned_node ON tasks
        WHEN (OLD.state = 'assigned' OR OLD.state = 'running') AND OLD.assigned_node IS NOT NULL
            AND NOT ((NEW.state = 'assigned' OR NEW.state = 'running')
                AND NEW.assigned_node IS OLD.assigned_node)
            AND json_extract(OLD.constraints, '$.min_memory_mb') > 0
    BEGIN
        UPDATE node_memory SET mb = mb - json_extract(OLD.constraints, '$.min_memory_mb')
            WHERE node = OLD.assigned_node;
    END;
    CREATE TRIGGER node_memory_enter AFTER UPDATE OF state, assigned_node ON tasks
        WHEN (NEW.state = 'assigned' OR NEW.state = 'running') AND NEW.assigned_node IS NOT NULL
            AND NOT ((OLD.state = 'assigned' OR OLD.state = 'running')
                AND OLD.assigned_node IS NEW.assigned_node)
            AND json_extract(NEW.constraints, '$.min_memory_mb') > 0
    BEGIN
        INSERT INTO node_memory (node, mb)
            VALUES (NEW.assigned_node, json_extract(NEW.constraints, '$.min_memory_mb'))
            ON CONFLICT (node) DO UPDATE SET mb = mb + excluded.mb;
    END;
    """,
    # 17: the indexes that only the live part of the task table is looked
    # up in hold only that part. A finished task (nearly every row of a
    # long history) used to keep its entries in the queue's index and in the
    # one of each node's tasks by state, and every task entered the one by
    # node and submission order with no node: each move rewrote them (a noop
    # task made 21 index changes, now 13) and each commit wrote their pages
    # (a batch of 40 noop tasks' three commits wrote 158 pages, now 139:
    # `scripts/bench_apply.py --pages`). The conditions are comparisons
    # joined by OR (see 14), and queries spell them as written: SQLite uses
    # a partial index only for a query whose WHERE has its condition as a
    # term (`ACTIVE_ON_NODE`, `state = 'queued'`), or implies a NOT NULL one.
    # The queue's index carries `state` as well: this SQLite reads the row
    # for a column of the condition that the index lacks, so without it
    # counting the queue read every queued row.
    """
    DROP INDEX tasks_by_fairness_key;
    CREATE INDEX tasks_queue
        ON tasks (fairness_key, priority DESC, created_at, submit_index, state)
        WHERE state = 'queued';
    DROP INDEX tasks_by_node;
    CREATE INDEX tasks_by_node ON tasks (assigned_node, state)
        WHERE (state = 'assigned' OR state = 'running');
    DROP INDEX tasks_by_node_submit;
    CREATE INDEX tasks_by_node_submit ON tasks (assigned_node, submit_index, id, created_at)
        WHERE assigned_node IS NOT NULL;
    """,
    # 18: the tasks that ended other than completed (failed, cancelled,
    # dead-lettered) by node and state, in submission order. Listing a
    # node's failed tasks walked its whole history in `tasks_by_node_submit`,
    # reading each row for its state: on a million tasks, a page of a node's
    # failed ones took 108 ms, now 2 (`scripts/bench_list.py`). A task enters
    # it once, when it ends so; a completed task never does, so the write
    # path of a task that succeeds is unchanged. Queries spell the condition
    # as written (`STATES_BY_NODE`; see 17).
    """
    CREATE INDEX tasks_by_node_ended ON tasks (assigned_node, state, submit_index, id, created_at)
        WHERE (state = 'failed' OR state = 'cancelled' OR state = 'dead_letter');
    """,
    # 19: the earliest and latest creation time of the tasks and workflows
    # submitted in each span of 128 Raft indexes (`cortex.state.created_spans`),
    # so a creation window becomes a range of submission order. Counting a
    # window read every task's creation time: on a million tasks a page of the
    # newest tenth took 37 ms newest first and 80 oldest first, now 5 to 6
    # (`scripts/bench_list.py`). Widened once per Raft index, not by a trigger
    # per row. Derived from the submissions, so outside the digest, as the
    # counters are (a span may hold times of rows since purged: it bounds, it
    # need not be exact).
    #
    # And how many workflows there are in each state, kept by triggers as
    # `task_counts` is: a workflow listing's total was a count over every
    # workflow.
    """
    CREATE TABLE created_spans (
        span INTEGER PRIMARY KEY,
        earliest INTEGER NOT NULL,
        latest INTEGER NOT NULL
    );
    INSERT INTO created_spans (span, earliest, latest)
        SELECT span, MIN(earliest), MAX(latest) FROM (
            SELECT submit_index >> 7 AS span, MIN(created_at) AS earliest,
                MAX(created_at) AS latest FROM tasks GROUP BY 1
            UNION ALL
            SELECT submit_index >> 7, MIN(created_at), MAX(created_at) FROM workflows GROUP BY 1
        ) WHERE true GROUP BY span;
    CREATE TABLE workflow_counts (
        state TEXT PRIMARY KEY,
        n INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO workflow_counts (state, n) SELECT state, COUNT(*) FROM workflows GROUP BY state;
    CREATE TRIGGER workflow_counts_insert AFTER INSERT ON workflows BEGIN
        INSERT INTO workflow_counts (state, n) VALUES (NEW.state, 1)
            ON CONFLICT (state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER workflow_counts_delete AFTER DELETE ON workflows BEGIN
        UPDATE workflow_counts SET n = n - 1 WHERE state = OLD.state;
    END;
    CREATE TRIGGER workflow_counts_update AFTER UPDATE OF state ON workflows
        WHEN OLD.state IS NOT NEW.state
    BEGIN
        UPDATE workflow_counts SET n = n - 1 WHERE state = OLD.state;
        INSERT INTO workflow_counts (state, n) VALUES (NEW.state, 1)
            ON CONFLICT (state) DO UPDATE SET n = n + 1;
    END;
    """,
    # 20: how many tasks and workflows each span of 19 still holds, so a
    # creation window is counted from the spans wholly inside it and the rows
    # of the few its edges cross (`created_spans.count`): counting the newest
    # tenth of a million tasks read a hundred thousand index entries. Apply
    # adds a Raft index's submissions where it widens the span; a trigger
    # takes away each row deleted (a purge). Outside the digest, as 19.
    """
    ALTER TABLE created_spans ADD COLUMN tasks INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE created_spans ADD COLUMN workflows INTEGER NOT NULL DEFAULT 0;
    UPDATE created_spans SET
        tasks = (SELECT COUNT(*) FROM tasks
            WHERE submit_index >= span << 7 AND submit_index < (span + 1) << 7),
        workflows = (SELECT COUNT(*) FROM workflows
            WHERE submit_index >= span << 7 AND submit_index < (span + 1) << 7);
    CREATE TRIGGER created_spans_task_delete AFTER DELETE ON tasks BEGIN
        UPDATE created_spans SET tasks = tasks - 1 WHERE span = OLD.submit_index >> 7;
    END;
    CREATE TRIGGER created_spans_workflow_delete AFTER DELETE ON workflows BEGIN
        UPDATE created_spans SET workflows = workflows - 1 WHERE span = OLD.submit_index >> 7;
    END;
    """,
]

# The condition of `tasks_by_node` (migration 17): a query of a node's tasks
# has it as a term of its WHERE, as written, to be answered from that index.
ACTIVE_ON_NODE = "(state = 'assigned' OR state = 'running')"
# The condition of `tasks_by_node_ended` (migration 18), likewise.
ENDED_ON_NODE = "(state = 'failed' OR state = 'cancelled' OR state = 'dead_letter')"
# The states each of those two indexes holds, by node.
STATES_BY_NODE: dict[str, str] = {
    **dict.fromkeys(("assigned", "running"), ACTIVE_ON_NODE),
    **dict.fromkeys(("failed", "cancelled", "dead_letter"), ENDED_ON_NODE),
}

# Tables whose content is replicated state; the digest covers exactly these.
REPLICATED_TABLES: dict[str, str] = {
    "tasks": "id",
    "task_events": "seq",
    "submissions": "idempotency_key",
    "nodes": "id",
    "workflows": "id",
    "task_dependencies": "workflow_id, task_key, depends_on_key",
    "key_limits": "key",
    "fairness_weights": "key",
    "schedules": "id",
    "schedule_firings": "seq",
}


def migrate(conn: sqlite3.Connection) -> int:
    """Brings the database up to the newest schema; returns its version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    upgrading = 0 < version < len(MIGRATIONS)
    if upgrading:
        # A migration that (re)builds an index reads every task: slow on a
        # large history, so say what is happening.
        log.info("upgrading the database from schema %d to %d ...", version, len(MIGRATIONS))
    started = time.monotonic()
    for number, script in enumerate(MIGRATIONS, start=1):
        if number <= version:
            continue
        # One transaction per migration, the digest change of any rows it
        # writes included.
        try:
            conn.executescript(f"BEGIN;\n{script}")
            digest.flush(conn)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            digest.discard(conn)
            raise
        version = number
    if upgrading:
        log.info("database upgraded to schema %d in %.1fs", version, time.monotonic() - started)
    digest.install(conn, list(REPLICATED_TABLES))
    return version


def connect(path: str, readonly: bool = False) -> sqlite3.Connection:
    """Opens the node database in WAL mode so readers never block the applier."""
    conn = sqlite3.connect(
        path,
        check_same_thread=False,
        isolation_level=None,
        timeout=30,
        factory=digest.DigestConnection,
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    digest.register_functions(conn)
    if readonly:
        conn.execute("PRAGMA query_only=1")
    else:
        # A write that fires a trigger (the digest's) opens a statement
        # journal: in memory it costs a few microseconds, in a temporary file
        # about fifteen per row. Readers keep their large sorts on disk.
        conn.execute("PRAGMA temp_store=MEMORY")
    conn.row_factory = sqlite3.Row
    return conn


class ReadConnections:
    """One read-only connection per thread to a node's database (SQLite
    connections must not be shared between threads mid-query)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, readonly=True)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Closes this thread's connection (a later read opens another)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
