"""Scale benchmark: a local 3-node cluster of real `cortex node start`
processes grown, through SubmitTasks and the real Raft path, to N finished
`noop` tasks of history; then reports what that history costs: `task list`
page latency (default page, by state, by node, by node and state for a
node's few failed tasks, by workflow, of the tasks created in the newest
tenth of the growth in either order; client calls and the real CLI; the
first call to each node timed apart, as it may read its rows from the disk),
GetTask latency, the leader's gaps between rounds of appends while growing
(`cortex_raft_append_gap_seconds`), how long a follower takes to restart (SIGTERM
and kill -9) and catch up, snapshot size and build / restore time on a copy
of a node's database, peak RSS per node (overall, and polled per phase:
growing, reading, restarting, snapshotting) and database size per node.

    python scripts/bench_scale.py --tasks 50000
    python scripts/bench_scale.py --tasks 5000 --json

Exits non-zero when a task did not finish or the nodes' digests differ;
missing an aim is reported, not failed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil
from _cluster import (
    add_cluster_arguments,
    free_base_port,
    leader_index,
    node_command,
    relaunch_node,
    run_main,
    wait_all_active,
    wait_exit,
)
from bench_core import TERMINAL_STATES, _samples, _scrape, _wait_converged, percentile
from google.protobuf import struct_pb2
from pysyncobj.config import SERIALIZER_STATE

from cortex.api.client import CortexClient
from cortex.cli.dev import DevNode, start_cluster, stop_cluster, wait_ready
from cortex.errors import CortexError, ResourceExhausted, Unavailable
from cortex.raft.journal import DurableJournal
from cortex.raft.snapshot import SnapshotStore
from cortex.state import StateMachine
from cortex.state.machine import copy_database
from cortex.v1 import cortex_pb2 as pb

NODE_COUNT = 3
BATCH_SIZE = 1000
AIM_LIST_P99_MS = 20.0
AIM_RESTART_S = 10.0
AIM_RSS_MB = 200.0
WORKFLOWS = 4
WORKFLOW_WIDTH = 20
# Ids kept for the GetTask sample (a reservoir over the whole history).
SAMPLE_IDS = 5000
SUBMIT_DEADLINE_S = 300.0
PROGRESS_EVERY_S = 10.0
NEWEST_FIRST = pb.LIST_ORDER_NEWEST_FIRST
# One task of the history in this many fails for good (its noop ends with
# exit code 1, and it has no retry): a node's failed tasks are then a few
# among its many completed, as on a long history.
FAILING = 1000
NOOP_SPEC = pb.TaskSpec(type="noop")
FAILING_SPEC = pb.TaskSpec(
    type="noop",
    options=struct_pb2.Struct(fields={"exit_code": struct_pb2.Value(number_value=1)}),
    retry_policy=pb.RetryPolicy(retryable=False),
)
MB = 1024 * 1024


def _say(text: str, quiet: bool = False) -> None:
    """Progress and figures: on stdout, or stderr when stdout carries JSON."""
    print(text, file=sys.stderr if quiet else sys.stdout, flush=True)


# -- memory -------------------------------------------------------------------


def _vm_hwm_bytes(pid: int) -> int:
    """The process's peak resident set (VmHWM), 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssWatch:
    """Polls every node's resident set size on a thread of its own and keeps
    each node's peak, across restarts (a node's pid changes when it does),
    and the peak the polls saw in each phase of the run (`enter`)."""

    def __init__(self, nodes: Sequence[DevNode], interval_s: float = 0.5) -> None:
        self._pids = {n.node_id: n.pid for n in nodes}
        self.peak = dict.fromkeys(self._pids, 0)
        self.by_phase: dict[str, dict[str, int]] = {}
        self._phase: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._poll, args=(interval_s,), name="rss", daemon=True
        )
        self._thread.start()

    def _poll(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            with self._lock:
                pids = dict(self._pids)
            for node_id, pid in pids.items():
                try:
                    self._fold(node_id, psutil.Process(pid).memory_info().rss)
                except psutil.Error:
                    pass

    def _fold(self, node_id: str, rss: int, polled: bool = True) -> None:
        with self._lock:
            self.peak[node_id] = max(self.peak[node_id], rss)
            if polled and self._phase is not None:
                phase = self.by_phase[self._phase]
                phase[node_id] = max(phase.get(node_id, 0), rss)

    def enter(self, phase: str) -> None:
        """What the polls see from now on counts towards `phase`."""
        with self._lock:
            self._phase = phase
            self.by_phase.setdefault(phase, {})

    def settle(self, node: DevNode) -> None:
        """Folds in the kernel's high-water mark of `node`'s process, which
        catches peaks between polls; call before the process ends. (Not
        counted to a phase: it may have been reached in an earlier one.)"""
        self._fold(node.node_id, _vm_hwm_bytes(node.pid), polled=False)

    def follow(self, node: DevNode) -> None:
        """`node` runs as a new process from now on."""
        with self._lock:
            self._pids[node.node_id] = node.pid

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# -- growing the history ------------------------------------------------------


def _terminal_count(client: CortexClient) -> int:
    # One state per call: a page over several states sorts every matching
    # row (see tasks_by_state_submit), which at a million tasks takes seconds.
    return sum(
        client.list_tasks(states=[state], page_size=1).total_size for state in TERMINAL_STATES
    )


@dataclass
class Growth:
    """What growing the history did."""

    accepted: int = 0
    elapsed_s: float = 0.0
    finished: int = 0
    refusals: list[str] = field(default_factory=list)
    sample_ids: list[str] = field(default_factory=list)


class _Grower:
    """Submits `tasks` noop tasks in batches of BATCH_SIZE from several
    threads, batch b to node b % nodes, keeping at most `max_unfinished`
    accepted tasks unfinished; retries a busy or unreachable node with the
    same idempotency keys."""

    def __init__(
        self,
        clients: Sequence[CortexClient],
        tasks: int,
        max_unfinished: int,
        baseline: int,
        extra: int,
        stop: threading.Event,
    ) -> None:
        self._clients = clients
        # Tasks submitted otherwise (the workflows') that also count as finished.
        self._extra = extra
        self._tasks = tasks
        self._max_unfinished = max_unfinished
        self._baseline = baseline
        self._stop = stop
        self._run_id = f"scale-{time.time_ns()}"
        self._batches = itertools.count()
        self._lock = threading.Lock()
        self._seen = 0
        self.growth = Growth()

    def finished(self) -> int:
        with self._lock:
            return self.growth.finished

    def poll_finished(self) -> None:
        try:
            count = _terminal_count(self._clients[0]) - self._baseline
        except CortexError:
            return
        with self._lock:
            self.growth.finished = max(self.growth.finished, count)

    def _wait_for_room(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                unfinished = self.growth.accepted + self._extra - self.growth.finished
            if unfinished + BATCH_SIZE <= self._max_unfinished:
                return
            time.sleep(0.1)

    def _keep_samples(self, ids: Sequence[str]) -> None:
        """Reservoir sampling: every accepted id is equally likely kept."""
        sample = self.growth.sample_ids
        for task_id in ids:
            self._seen += 1
            if len(sample) < SAMPLE_IDS:
                sample.append(task_id)
            elif (slot := random.randrange(self._seen)) < SAMPLE_IDS:
                sample[slot] = task_id

    def _submit(self, batch: int) -> None:
        first = batch * BATCH_SIZE
        count = min(BATCH_SIZE, self._tasks - first)
        client = self._clients[batch % len(self._clients)]
        keys = [f"{self._run_id}-{k}" for k in range(first, first + count)]
        specs = [
            FAILING_SPEC if k % FAILING == FAILING - 1 else NOOP_SPEC
            for k in range(first, first + count)
        ]
        deadline = time.monotonic() + SUBMIT_DEADLINE_S
        for attempt in itertools.count():
            try:
                reply = client.submit_tasks(specs, keys)
                break
            except (Unavailable, ResourceExhausted) as err:
                if time.monotonic() > deadline or self._stop.is_set():
                    with self._lock:
                        self.growth.refusals.append(f"batch {batch}: {err}")
                    return
                time.sleep(min(0.2 * 2**attempt, 5.0))
            except CortexError as err:
                with self._lock:
                    self.growth.refusals.append(f"batch {batch}: {err}")
                return
        ids = [r.task.id for r in reply.results if not r.error]
        with self._lock:
            self.growth.accepted += len(ids)
            self.growth.refusals += [
                f"task {r.task.id}: {r.error}" for r in reply.results if r.error
            ]
            self._keep_samples(ids)

    def _worker(self) -> None:
        batches = (self._tasks + BATCH_SIZE - 1) // BATCH_SIZE
        while not self._stop.is_set():
            with self._lock:
                batch = next(self._batches)
            if batch >= batches:
                return
            self._wait_for_room()
            self._submit(batch)

    def run(self, threads: int, timeout_s: float, quiet: bool) -> Growth:
        started = time.monotonic()
        pool = [
            threading.Thread(target=self._worker, name=f"grow-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in pool:
            thread.start()
        last_report, last_done = started, 0
        deadline = None
        while not self._stop.is_set():
            time.sleep(1.0)
            self.poll_finished()
            done = self.finished()
            now = time.monotonic()
            if now - last_report >= PROGRESS_EVERY_S:
                rate = (done - last_done) / (now - last_report)
                with self._lock:
                    accepted = self.growth.accepted + self._extra
                _say(
                    f"  {now - started:6.0f}s  {done}/{self._tasks + self._extra} done, "
                    f"{rate:.0f} tasks/s, {accepted - done} unfinished",
                    quiet,
                )
                last_report, last_done = now, done
            submitting = any(t.is_alive() for t in pool)
            with self._lock:
                accepted = self.growth.accepted + self._extra
            if not submitting and done >= accepted:
                break
            if not submitting:
                deadline = deadline or now + timeout_s
                if now > deadline:
                    break
        self.growth.elapsed_s = time.monotonic() - started
        return self.growth


def _workflow_definition(n: int) -> str:
    fan = {f"t{i:03d}": {"type": "noop", "dependsOn": ["root"]} for i in range(WORKFLOW_WIDTH - 1)}
    return json.dumps({"name": f"scale-{n}", "tasks": {"root": {"type": "noop"}, **fan}})


def submit_workflows(client: CortexClient, count: int) -> list[str]:
    """`count` small fan-out workflows of noop tasks, so the workflow filter
    has something to find among the history."""
    return [
        client.submit_workflow(_workflow_definition(n), pb.DEFINITION_FORMAT_JSON).workflow_id
        for n in range(count)
    ]


# -- reads --------------------------------------------------------------------


def _timed_ms(call: Callable[[int], object], calls: range) -> list[float]:
    timings = []
    for i in calls:
        started = time.perf_counter()
        call(i)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


@dataclass
class Reads:
    """Latencies (ms) of each read: `timed` the calls measured; `first` the
    first call to each node before them, apart. A first call may read its
    rows from the disk rather than the page cache: a node's few failed tasks
    lie scattered over its database, so the first page of them read ~100
    pages the growth's writes had pushed out (17-50 ms here after dropping
    the caches, against ~2 ms once cached)."""

    timed: dict[str, list[float]]
    first: dict[str, list[float]]


def measure_reads(
    clients: Sequence[CortexClient],
    node_ids: Sequence[str],
    workflow_ids: Sequence[str],
    sample_ids: Sequence[str],
    samples: int,
    recent: pb.TimeRange,
) -> Reads:
    """Latencies (ms) of the task listings and of GetTask, round-robin over
    every node, after a first call to each node timed apart; each listing
    asks for the default page, newest first. `recent`: a creation window
    (the newest tenth of the growth)."""

    def client(i: int) -> CortexClient:
        return clients[i % len(clients)]

    ids = list(sample_ids)
    random.shuffle(ids)
    completed = [pb.TASK_STATE_COMPLETED]
    failed = [pb.TASK_STATE_FAILED]
    calls: dict[str, tuple[Callable[[int], object], int]] = {
        "list": (lambda i: client(i).list_tasks(order=NEWEST_FIRST), samples),
        "list_state": (
            lambda i: client(i).list_tasks(states=completed, order=NEWEST_FIRST),
            samples,
        ),
        "list_node": (
            lambda i: client(i).list_tasks(node_id=node_ids[i % len(node_ids)], order=NEWEST_FIRST),
            samples,
        ),
        "list_node_failed": (
            lambda i: client(i).list_tasks(
                node_id=node_ids[i % len(node_ids)], states=failed, order=NEWEST_FIRST
            ),
            samples,
        ),
        "list_workflow": (
            lambda i: client(i).list_tasks(
                workflow_id=workflow_ids[i % len(workflow_ids)], order=NEWEST_FIRST
            ),
            samples,
        ),
        "list_recent": (
            lambda i: client(i).list_tasks(order=NEWEST_FIRST, create_time_range=recent),
            samples,
        ),
        "list_recent_oldest": (lambda i: client(i).list_tasks(create_time_range=recent), samples),
        "get_task": (lambda i: client(i).get_task(ids[i % len(ids)]), 5 * samples),
    }
    reads = Reads({}, {})
    nodes = len(clients)
    for name, (call, count) in calls.items():
        reads.first[name] = _timed_ms(call, range(nodes))
        reads.timed[name] = _timed_ms(call, range(nodes, nodes + count))
    return reads


def newest_tenth(client: CortexClient) -> pb.TimeRange:
    """The creation window of the newest tenth of the time the tasks were
    created over (`task list --since`)."""
    (oldest,) = client.list_tasks(page_size=1, order=pb.LIST_ORDER_OLDEST_FIRST).tasks
    (newest,) = client.list_tasks(page_size=1, order=NEWEST_FIRST).tasks
    first, last = oldest.create_time.ToMilliseconds(), newest.create_time.ToMilliseconds()
    recent = pb.TimeRange()
    recent.start_time.FromMilliseconds(last - (last - first) // 10)
    return recent


def time_cli(node: DevNode, runs: int) -> list[float]:
    """Wall seconds of `cortex task list --node ...` as a user runs it."""
    argv = [sys.executable, "-P", "-m", "cortex.cli.main", "task", "list", "--node", node.grpc]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_TLS_")}
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, stdin=subprocess.DEVNULL)
        timings.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise CortexError(f"`{' '.join(argv[2:])}` failed: {done.stderr.decode()[-500:]}")
    return timings


# -- restarts -----------------------------------------------------------------


@dataclass
class Restart:
    node_id: str
    how: str
    stop_s: float
    start_s: float

    @property
    def total_s(self) -> float:
        return self.stop_s + self.start_s


def _wait_caught_up(node: DevNode, leader: CortexClient, timeout_s: float) -> None:
    """Until `node` answers GetClusterStatus having applied everything the
    leader knew committed just before."""
    deadline = time.monotonic() + timeout_s
    with CortexClient(node.grpc, timeout_s=2, tls=False) as client:
        while time.monotonic() < deadline:
            try:
                committed = leader.get_cluster_status().commit_index
                if client.get_cluster_status().applied_index >= committed:
                    return
            except CortexError:
                pass
            time.sleep(0.05)
    raise Unavailable(f"{node.node_id} did not catch up within {timeout_s:.0f}s after a restart")


def restart_node(
    data_dir: Path,
    node: DevNode,
    leader: CortexClient,
    how: signal.Signals,
    rss: RssWatch,
    timeout_s: float,
) -> tuple[DevNode, Restart]:
    """Stops `node` with `how`, waits for its process to end, starts it again
    with the same command line and environment, and waits until it serves
    caught up; returns the new node and the timings."""
    argv, env = node_command(node.pid)
    rss.settle(node)
    started = time.perf_counter()
    os.kill(node.pid, how)
    if not wait_exit(node.pid, timeout_s):
        raise CortexError(f"{node.node_id} (pid {node.pid}) did not exit after {how.name}")
    stopped = time.perf_counter()
    restarted = relaunch_node(data_dir, node, argv, env)
    rss.follow(restarted)
    _wait_caught_up(restarted, leader, timeout_s)
    done = time.perf_counter()
    return restarted, Restart(node.node_id, how.name, stopped - started, done - stopped)


# -- snapshot -----------------------------------------------------------------


@dataclass
class SnapshotTiming:
    bytes: int
    build_s: float
    restore_s: float


def time_snapshot(db_path: str, scratch: Path) -> SnapshotTiming:
    """Builds a Raft snapshot of a copy of a node's database as a node does
    on log compaction (journal syncing on, as by default), then restores it
    into an empty database as a node catching up does."""
    copy = str(scratch / "state.db")
    copy_database(db_path, copy)
    machine = StateMachine(copy)
    index = machine.applied_index
    target = str(scratch / "raft.snapshot")
    store = SnapshotStore(machine, DurableJournal(str(scratch / "journal")))
    started = time.perf_counter()
    # As pysyncobj calls it: the pending name and (last, prev, cluster).
    store.serialize(target + ".tmp", ((b"", index, 1), (b"", index - 1, 1), set()))
    while (outcome := store.check()) == SERIALIZER_STATE.SERIALIZING:
        time.sleep(0.005)
    built = time.perf_counter() - started
    machine.close()
    if outcome != SERIALIZER_STATE.SUCCESS:
        raise CortexError(f"building the snapshot of {copy} failed")
    fresh = StateMachine(str(scratch / "fresh.db"))
    started = time.perf_counter()
    SnapshotStore(fresh, DurableJournal(str(scratch / "fresh-journal"))).deserialize(target)
    restored = time.perf_counter() - started
    if fresh.applied_index != index:
        raise CortexError(f"restored applied index {fresh.applied_index}, expected {index}")
    fresh.close()
    return SnapshotTiming(os.path.getsize(target), built, restored)


# -- report -------------------------------------------------------------------


def _db_bytes(node: DevNode) -> int:
    """The node's SQLite database on disk, WAL included."""
    return sum(
        path.stat().st_size
        for path in Path(node.data_dir).iterdir()
        if path.name.startswith("state.db")
    )


def _dir_bytes(directory: str) -> int:
    return sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file())


@dataclass
class ScaleRun:
    """Everything measured in one run."""

    tasks: int
    growth: Growth
    workflow_tasks: int
    reads: Reads
    list_totals: dict[str, int]
    cli_s: list[float]
    restarts: list[Restart]
    snapshot: SnapshotTiming
    node_snapshot_bytes: dict[str, int]
    # Compaction snapshots each node wrote during the run (from its log).
    snapshots_written: dict[str, list[SnapshotWritten]]
    journal_bytes: dict[str, int]
    peak_rss: dict[str, int]
    # Per phase of the run (grow, reads, restarts, snapshot): the polled peaks.
    peak_rss_by_phase: dict[str, dict[str, int]]
    db_bytes: dict[str, int]
    dir_bytes: dict[str, int]
    statuses: dict[str, pb.GetClusterStatusResponse]
    # The Raft term when the cluster was ready and once the history had
    # grown: more than one election during growth is a leader lost under
    # load (a compaction's snapshot writes held a node's Raft thread up).
    terms: tuple[int, int]
    # Measured once the history had grown: a gap near the shortest election
    # timeout (0.4 s) is a leadership nearly lost.
    append_gaps: AppendGaps

    @property
    def digests_equal(self) -> bool:
        return len({s.state_digest for s in self.statuses.values()}) == 1

    def figures(self) -> dict[str, object]:
        """The figures as one flat JSON object."""
        figures: dict[str, object] = {
            "tasks": self.tasks,
            "tasks_finished": self.growth.finished,
            "workflow_tasks": self.workflow_tasks,
            "grow_s": round(self.growth.elapsed_s, 2),
            "grow_tasks_per_s": round(self.growth.finished / self.growth.elapsed_s, 1)
            if self.growth.elapsed_s
            else 0.0,
            "term_ready": self.terms[0],
            "term_grown": self.terms[1],
            "append_gap_rounds": self.append_gaps.rounds,
        }
        for bound, longer in self.append_gaps.longer.items():
            figures[f"append_gaps_over_{bound:g}_s".replace(".", "_")] = longer
        for name, timings in self.reads.timed.items():
            figures[f"{name}_p50_ms"] = round(percentile(timings, 50), 2)
            figures[f"{name}_p99_ms"] = round(percentile(timings, 99), 2)
            figures[f"{name}_first_calls_ms"] = [round(t, 2) for t in self.reads.first[name]]
        figures["cli_list_s"] = [round(s, 3) for s in self.cli_s]
        by_how = {r.how: r for r in self.restarts}
        for key, how in (("restart", "SIGTERM"), ("kill_restart", "SIGKILL")):
            if how in by_how:
                figures[f"{key}_s"] = round(by_how[how].total_s, 2)
                figures[f"{key}_stop_s"] = round(by_how[how].stop_s, 2)
                figures[f"{key}_start_s"] = round(by_how[how].start_s, 2)
        figures.update(
            snapshot_bytes=self.snapshot.bytes,
            snapshot_build_s=round(self.snapshot.build_s, 3),
            snapshot_restore_s=round(self.snapshot.restore_s, 3),
            node_snapshot_bytes=self.node_snapshot_bytes,
            snapshots_written={k: len(v) for k, v in self.snapshots_written.items()},
            snapshot_indexes={
                k: [w.raft_index for w in v] for k, v in self.snapshots_written.items()
            },
            snapshot_builds_overlapping=overlapping_builds(self.snapshots_written),
            journal_bytes=self.journal_bytes,
            peak_rss_mb={k: round(v / MB, 1) for k, v in self.peak_rss.items()},
            peak_rss_mb_by_phase={
                phase: {k: round(v / MB, 1) for k, v in peaks.items()}
                for phase, peaks in self.peak_rss_by_phase.items()
            },
            db_bytes=self.db_bytes,
            data_dir_bytes=self.dir_bytes,
            applied_index={k: s.applied_index for k, s in self.statuses.items()},
            digests_equal=self.digests_equal,
        )
        return figures


def _aim(value: float, aim: float, unit: str) -> str:
    return f"(aim <= {aim:g} {unit}: {'met' if value <= aim else 'MISSED'})"


def _line(label: str, text: str) -> None:
    print(f"  {label:<36} {text}")


def print_report(run: ScaleRun) -> None:
    growth = run.growth
    rate = growth.finished / growth.elapsed_s if growth.elapsed_s else 0.0
    print()
    print(f"results: {run.tasks} noop tasks of history, {NODE_COUNT} nodes, {os.cpu_count()} CPUs")
    _line("grown", f"{growth.finished} finished in {growth.elapsed_s:.1f} s ({rate:.0f} tasks/s)")
    elections = run.terms[1] - run.terms[0]
    _line("Raft term while growing", f"{run.terms[0]} -> {run.terms[1]} ({elections} elections)")
    _line("leader's append gaps while growing", run.append_gaps.describe())
    labels = {
        "list": "task list, default page",
        "list_state": "  --state completed",
        "list_node": "  --on-node",
        "list_node_failed": "  --on-node --state failed",
        "list_workflow": "  --workflow",
        "list_recent": "  --since (a tenth)",
        "list_recent_oldest": "  --since, oldest first",
        "get_task": "GetTask",
    }
    for name, label in labels.items():
        timings = run.reads.timed[name]
        p99 = percentile(timings, 99)
        aim = _aim(p99, AIM_LIST_P99_MS, "ms") if name.startswith("list") else ""
        total = f", total_size {run.list_totals[name]}" if name in run.list_totals else ""
        first = " ".join(f"{t:.1f}" for t in run.reads.first[name])
        _line(
            f"{label} p50 / p99",
            f"{percentile(timings, 50):.1f} / {p99:.1f} ms {aim} [{len(timings)} calls{total};"
            f" first call to each node before them {first} ms]",
        )
    _line(
        "`cortex task list` (CLI) wall",
        " ".join(f"{s:.2f}" for s in run.cli_s) + " s (interpreter start included)",
    )
    for restart in run.restarts:
        _line(
            f"restart {restart.node_id} ({restart.how})",
            f"{restart.total_s:.1f} s: exit {restart.stop_s:.1f} s + serving caught up "
            f"{restart.start_s:.1f} s {_aim(restart.total_s, AIM_RESTART_S, 's')}",
        )
    snap = run.snapshot
    _line(
        "snapshot of a node's DB (copy)",
        f"{snap.bytes / MB:.1f} MB, build {snap.build_s:.2f} s, restore {snap.restore_s:.2f} s",
    )
    for node_id, rss in run.peak_rss.items():
        on_disk = run.node_snapshot_bytes[node_id]
        _line(
            f"{node_id}",
            f"peak RSS {rss / MB:.0f} MB {_aim(rss / MB, AIM_RSS_MB, 'MB')}, "
            f"DB {run.db_bytes[node_id] / MB:.1f} MB, data dir {run.dir_bytes[node_id] / MB:.1f} MB"
            f" (raft.snapshot {on_disk / MB:.1f} MB, raft.log"
            f" {run.journal_bytes[node_id] / MB:.1f} MB; {len(run.snapshots_written[node_id])}"
            " snapshots written)",
        )
    written = run.snapshots_written
    _line(
        "compaction snapshots (raft index)",
        "; ".join(
            f"{n} {' '.join(str(w.raft_index) for w in v) or '-'}" for n, v in written.items()
        )
        + f"; {overlapping_builds(written)} builds overlapped another node's",
    )
    for phase, peaks in run.peak_rss_by_phase.items():
        if not peaks:
            continue  # over before the first poll
        _line(
            f"  peak RSS while {phase}",
            ", ".join(f"{node_id} {rss / MB:.0f} MB" for node_id, rss in peaks.items())
            + " (polled every 0.5 s)",
        )
    print()
    print("convergence")
    for node_id, status in run.statuses.items():
        print(f"  {node_id} applied {status.applied_index:<8} digest {status.state_digest}")
    print(f"  {'all nodes agree' if run.digests_equal else 'NODES DISAGREE'}")


def problems(run: ScaleRun) -> list[str]:
    found = []
    if run.growth.refusals:
        found.append(f"{len(run.growth.refusals)} refusals, e.g. {run.growth.refusals[0]}")
    if run.growth.finished < run.tasks + run.workflow_tasks:
        found.append(
            f"only {run.growth.finished} of {run.tasks + run.workflow_tasks} tasks finished"
        )
    if not run.digests_equal:
        found.append("state digests differ between nodes")
    return found


_GAP_HISTOGRAM = "cortex_raft_append_gap_seconds"
# Gaps between a leader's rounds of appends worth counting: past the
# heartbeat period's double, near and past the shortest election timeout.
GAP_BOUNDS_S = (0.25, 0.4, 1.0)


@dataclass
class AppendGaps:
    """The intervals between the leader's rounds of appends (entries or a
    heartbeat) while the history grew, over every node that led: how many,
    and how many were longer than each of `GAP_BOUNDS_S`."""

    rounds: int
    longer: dict[float, int]

    def describe(self) -> str:
        if not self.rounds:
            return "no append gaps served (cortex_raft_append_gap_seconds)"
        over = ", ".join(f"{self.longer[b]} over {b:g} s" for b in GAP_BOUNDS_S)
        return f"{self.rounds} rounds of appends by the leader, {over}"


def append_gaps(nodes: Sequence[DevNode]) -> AppendGaps:
    """Sums `cortex_raft_append_gap_seconds` over the nodes' /metrics."""
    buckets: dict[float, float] = {}
    for node in nodes:
        for sample in _samples(_scrape(node), _GAP_HISTOGRAM, f"{_GAP_HISTOGRAM}_bucket"):
            bound = float(sample.labels["le"])
            buckets[bound] = buckets.get(bound, 0.0) + sample.value
    rounds = int(buckets.get(float("inf"), 0))
    return AppendGaps(rounds, {b: rounds - int(buckets.get(b, rounds)) for b in GAP_BOUNDS_S})


# -- main ---------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    quiet = args.json
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="cortex-scale-")).resolve()
    base_port = free_base_port(NODE_COUNT)
    _say(
        f"starting {NODE_COUNT} nodes on 127.0.0.1 (raft {base_port}+, grpc {base_port + 100}+), "
        f"data in {data_dir}",
        quiet,
    )
    nodes = start_cluster(NODE_COUNT, base_port, data_dir)
    rss = RssWatch(nodes)
    clients: list[CortexClient] = []
    stop = threading.Event()
    found = ["interrupted before the end of the run"]
    try:
        wait_ready(nodes, timeout_s=args.ready_timeout)
        wait_all_active(nodes, timeout_s=args.ready_timeout)
        clients = [CortexClient(n.grpc, timeout_s=60, tls=False) for n in nodes]
        scale = measure(args, data_dir, nodes, clients, rss, stop)
        found = problems(scale)
        if args.json:
            print(json.dumps(scale.figures(), indent=2))
        else:
            print_report(scale)
    finally:
        stop.set()
        for client in clients:
            client.close()
        stop_cluster(data_dir)
        rss.stop()
        # Node logs explain a failure, so a failed run keeps them.
        if args.data_dir or args.keep_data or found:
            _say(f"cluster stopped; data and node logs kept in {data_dir}", quiet)
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
            _say("cluster stopped", quiet)
    for problem in found:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if found else 0


def measure(
    args: argparse.Namespace,
    data_dir: Path,
    nodes: list[DevNode],
    clients: Sequence[CortexClient],
    rss: RssWatch,
    stop: threading.Event,
) -> ScaleRun:
    """Grows the history, then measures reads, restarts and a snapshot."""
    quiet = args.json
    leader = leader_index(clients)
    term_ready = clients[leader].get_cluster_status().term
    _say(f"cluster ready; leader {nodes[leader].node_id}, term {term_ready}", quiet)
    baseline = _terminal_count(clients[leader])
    workflow_ids = submit_workflows(clients[leader], WORKFLOWS)
    workflow_tasks = WORKFLOWS * WORKFLOW_WIDTH
    _say(
        f"growing the history to {args.tasks} noop tasks (+{workflow_tasks} in {WORKFLOWS} "
        f"workflows) in batches of {BATCH_SIZE} from {args.threads} threads, at most "
        f"{args.max_unfinished} unfinished ...",
        quiet,
    )
    rss.enter("growing")
    grower = _Grower(clients, args.tasks, args.max_unfinished, baseline, workflow_tasks, stop)
    growth = grower.run(args.threads, args.timeout, quiet)
    recent = newest_tenth(clients[leader_index(clients)])
    term_grown = clients[leader_index(clients)].get_cluster_status().term
    gaps = append_gaps(nodes)
    _say(
        f"grown in {growth.elapsed_s:.1f} s ({growth.finished / max(growth.elapsed_s, 1e-9):.0f}"
        f" tasks/s); term {term_grown}; {gaps.describe()}",
        quiet,
    )

    _say(f"measuring reads ({args.samples} calls per listing) ...", quiet)
    rss.enter("reading")
    # Fresh clients: the growing ones' sessions would make reads wait for
    # the newest index they saw.
    readers = [CortexClient(n.grpc, timeout_s=60, tls=False) for n in nodes]
    try:
        node_ids = [n.node_id for n in nodes]
        reads = measure_reads(
            readers, node_ids, workflow_ids, growth.sample_ids, args.samples, recent
        )
        totals = {
            "list": readers[0].list_tasks().total_size,
            "list_state": readers[0].list_tasks(states=[pb.TASK_STATE_COMPLETED]).total_size,
            "list_node": readers[0].list_tasks(node_id=node_ids[0]).total_size,
            "list_node_failed": readers[0]
            .list_tasks(node_id=node_ids[0], states=[pb.TASK_STATE_FAILED])
            .total_size,
            "list_workflow": readers[0].list_tasks(workflow_id=workflow_ids[0]).total_size,
            "list_recent": readers[0].list_tasks(create_time_range=recent).total_size,
        }
    finally:
        for reader in readers:
            reader.close()
    cli_s = time_cli(nodes[(leader + 1) % len(nodes)], args.cli_runs)

    restarts = []
    rss.enter("restarting")
    # The leader may have changed while the history grew.
    leader = leader_index(clients)
    followers = [i for i in range(len(nodes)) if i != leader]
    for i, how in zip(itertools.cycle(followers), (signal.SIGTERM, signal.SIGKILL)):
        _say(f"restarting {nodes[i].node_id} ({how.name}) ...", quiet)
        nodes[i], timing = restart_node(
            data_dir, nodes[i], clients[leader], how, rss, args.restart_timeout
        )
        restarts.append(timing)

    _say("building and restoring a snapshot of a copy of a follower's database ...", quiet)
    rss.enter("snapshotting")
    with tempfile.TemporaryDirectory(dir=data_dir) as scratch:
        snapshot = time_snapshot(
            str(Path(nodes[followers[0]].data_dir) / "state.db"), Path(scratch)
        )
    statuses = _wait_converged(clients, timeout_s=60)
    for node in nodes:
        rss.settle(node)
    return ScaleRun(
        tasks=args.tasks,
        growth=growth,
        workflow_tasks=workflow_tasks,
        reads=reads,
        list_totals=totals,
        cli_s=cli_s,
        restarts=restarts,
        snapshot=snapshot,
        node_snapshot_bytes={
            n.node_id: _file_bytes(Path(n.data_dir) / "raft.snapshot") for n in nodes
        },
        snapshots_written={n.node_id: _snapshots_written(n) for n in nodes},
        journal_bytes={n.node_id: _file_bytes(Path(n.data_dir) / "raft.log") for n in nodes},
        peak_rss=dict(rss.peak),
        peak_rss_by_phase={phase: dict(peaks) for phase, peaks in rss.by_phase.items()},
        db_bytes={n.node_id: _db_bytes(n) for n in nodes},
        dir_bytes={n.node_id: _dir_bytes(n.data_dir) for n in nodes},
        statuses={n.node_id: s for n, s in zip(nodes, statuses, strict=True)},
        terms=(term_ready, term_grown),
        append_gaps=gaps,
    )


_SNAPSHOT_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*snapshot written at raft index (\d+)"
    r".*? in ([\d.]+) s"
)


@dataclass(frozen=True)
class SnapshotWritten:
    """A compaction snapshot a node logged writing: its Raft index and when
    its build began and ended (seconds since the epoch, this machine's)."""

    raft_index: int
    began: float
    ended: float


def _snapshots_written(node: DevNode) -> list[SnapshotWritten]:
    """The compaction snapshots the node logged writing (every start of it)."""
    log_path = Path(node.data_dir) / "node.log"
    if not log_path.exists():
        return []
    found = []
    with log_path.open(errors="replace") as lines:
        for line in lines:
            match = _SNAPSHOT_LINE.match(line)
            if match:
                stamp, index, took = match.groups()
                ended = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
                found.append(SnapshotWritten(int(index), ended - float(took), ended))
    return found


def overlapping_builds(written: dict[str, list[SnapshotWritten]]) -> int:
    """How many snapshot builds ran, at least for a moment, while another
    node built one."""
    return sum(
        any(
            mine.began < theirs.ended and theirs.began < mine.ended
            for other, their_builds in written.items()
            if other != node_id
            for theirs in their_builds
        )
        for node_id, builds in written.items()
        for mine in builds
    )


def _file_bytes(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", type=int, default=1_000_000, help="noop tasks of history (default 1000000)"
    )
    parser.add_argument("--threads", type=int, default=3, help="submitting threads (default 3)")
    parser.add_argument(
        "--max-unfinished",
        type=int,
        default=20_000,
        help="accepted tasks allowed unfinished before submitting waits (default 20000)",
    )
    parser.add_argument(
        "--samples", type=int, default=200, help="calls per listing measured (default 200)"
    )
    parser.add_argument(
        "--cli-runs", type=int, default=5, help="runs of `cortex task list` (default 5)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds to wait, after the last submit, for every task to finish (default 600)",
    )
    parser.add_argument(
        "--restart-timeout",
        type=float,
        default=300.0,
        help="seconds a restarted node may take to serve caught up (default 300)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object of figures")
    add_cluster_arguments(parser)
    args = parser.parse_args(argv)
    if min(args.tasks, args.threads, args.samples, args.cli_runs) < 1:
        parser.error("--tasks, --threads, --samples and --cli-runs must be at least 1")
    if args.max_unfinished < BATCH_SIZE:
        parser.error(f"--max-unfinished must be at least {BATCH_SIZE}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
