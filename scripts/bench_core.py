"""Core benchmark: a local 3-node cluster of real `cortex node start`
processes, N `noop` tasks submitted concurrently round-robin to every node;
reports end-to-end throughput, submit -> running latency, submit RPC latency,
replicated entries per second and the batching factor, how many of the
nodes' slots tasks kept busy on average (`tasks_in_hand`), then checks that
every node converged to the same state digest.

    python scripts/bench_core.py --tasks 2000 --concurrency 32
    python scripts/bench_core.py --tasks 20000 --mode batch --json
    python scripts/bench_core.py --tasks 600 --concurrency 1 --stages
    python scripts/bench_core.py --tasks 600 --concurrency 1 --path
    python scripts/bench_core.py --tasks 400 --rate 20

`--rate` submits open loop: task k at k/rate seconds from the start,
whether or not earlier calls have returned (from `--concurrency` threads,
8 by default), so the latency figures are those of a cluster that load
keeps as busy as the rate makes it. One client submitting a task as soon as
its last call returned (`--concurrency 1`) keeps the cluster as busy as it
can go one task at a time: on two CPUs most of them.

`--stages` also prints, per node, the thread CPU of named stages of its work
(apply and its parts, Raft messages, the journal, placement, submission's
parts, the agent's starts) per call and per entry (`scripts/_node_timing`).
`--path` instead prints where the wall-clock time from a task's proposal to
its attempt's start goes: to the leader's log, to the commit, to the apply
on the node that runs it, that apply, and on to the start, from times every
node notes (`scripts/_node_timing`, `scripts/_path_segments.py`).

Exits non-zero when a task did not complete or the nodes' digests differ;
missing the throughput or latency aim is reported, not failed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any, TypeVar

import psutil
from _cluster import (
    add_cluster_arguments,
    free_base_port,
    leader_index,
    progress_to_stderr,
    run_main,
    stop_and_clean,
    wait_all_active,
)
from _path_segments import STRETCHES, TOTAL, TaskPath, path_of_tasks
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from cortex.api.client import CortexClient
from cortex.cli.dev import DevNode, start_cluster, wait_ready
from cortex.config import NodeConfig
from cortex.errors import CortexError, Unavailable
from cortex.proto_enums import enum_name
from cortex.raft.merging import MAX_HOLD_S
from cortex.requests import MAX_SUBMIT_BATCH
from cortex.v1 import cortex_pb2 as pb

AIM_SINGLE_TASKS_PER_S = 1000.0
AIM_BATCH_TASKS_PER_S = 2000.0
AIM_CPU_MS_PER_TASK = 1.0
AIM_P50_MS = 5.0
# `--stages` and `--path`: the hooks the nodes load (from PYTHONPATH), and
# the variables naming where each writes.
NODE_TIMING_PATH = Path(__file__).resolve().parent / "_node_timing"
STAGE_DIR_VARIABLE = "CORTEX_STAGE_TIMING_DIR"
PATH_DIR_VARIABLE = "CORTEX_PATH_TIMING_DIR"
TIMING_WAIT_S = 10.0
NODE_COUNT = 3
TERMINAL_STATES = [
    pb.TASK_STATE_COMPLETED,
    pb.TASK_STATE_FAILED,
    pb.TASK_STATE_CANCELLED,
    pb.TASK_STATE_SKIPPED,
    pb.TASK_STATE_DEAD_LETTER,
]
SUBMIT_ATTEMPTS = 5

T = TypeVar("T")


@dataclass
class SubmitRecord:
    index: int
    node: int
    task_id: str = ""
    rpc_ms: float = 0.0
    error: str = ""


@dataclass
class TaskTimeline:
    task_id: str
    state: str
    events: dict[str, int] = field(default_factory=dict)

    def span_ms(self, start: str, end: str) -> float | None:
        if start in self.events and end in self.events:
            return float(self.events[end] - self.events[start])
        return None


# -- cluster ------------------------------------------------------------------


def _cpu_seconds(nodes: Sequence[DevNode]) -> dict[str, float]:
    """User + system CPU time of every node process and of this client."""
    seconds: dict[str, float] = {}
    for node in nodes:
        try:
            times = psutil.Process(node.pid).cpu_times()
            seconds[node.node_id] = times.user + times.system
        except psutil.Error:
            seconds[node.node_id] = 0.0
    own = psutil.Process().cpu_times()
    seconds["client"] = own.user + own.system
    return seconds


# -- workload -----------------------------------------------------------------


def _run_workers(worker: Callable[[], None], concurrency: int) -> None:
    """Runs `worker` on `concurrency` threads until every one returns."""
    threads = [
        threading.Thread(target=worker, name=f"submit-{i}", daemon=True) for i in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)


def _submit_all(
    clients: Sequence[CortexClient],
    tasks: int,
    concurrency: int,
    run_id: str,
    stop: threading.Event,
    rate: float | None = None,
) -> list[SubmitRecord]:
    """Submits `tasks` noop tasks from `concurrency` threads; task k goes to
    node k % len(clients), and with a `rate` not before k / rate seconds
    from the start. Retries Unavailable with the same idempotency key."""
    records = [SubmitRecord(index=k, node=k % len(clients)) for k in range(tasks)]
    counter = itertools.count()
    counter_lock = threading.Lock()
    spec = pb.TaskSpec(type="noop")
    start = time.perf_counter()

    def worker() -> None:
        while not stop.is_set():
            with counter_lock:
                k = next(counter)
            if k >= tasks:
                return
            if rate is not None:
                # The load's own pace (open loop), not a wait for the cluster.
                stop.wait(max(start + k / rate - time.perf_counter(), 0.0))
            record = records[k]
            client = clients[record.node]
            for attempt in range(SUBMIT_ATTEMPTS):
                started = time.perf_counter()
                try:
                    reply = client.submit_task(spec, idempotency_key=f"bench-{run_id}-{k}")
                except Unavailable as err:
                    record.error = str(err)
                    time.sleep(0.05 * (attempt + 1))
                    continue
                except CortexError as err:
                    record.error = str(err)
                    break
                record.rpc_ms = (time.perf_counter() - started) * 1000
                record.task_id = reply.task.id
                record.error = ""
                break

    _run_workers(worker, concurrency)
    return records


def _submit_batches(
    clients: Sequence[CortexClient],
    tasks: int,
    concurrency: int,
    batch_size: int,
    run_id: str,
    stop: threading.Event,
) -> list[SubmitRecord]:
    """`_submit_all` through SubmitTasks: `concurrency` threads each send
    batches of `batch_size` tasks, batch b to node b % len(clients)."""
    records = [SubmitRecord(index=k, node=(k // batch_size) % len(clients)) for k in range(tasks)]
    batches = [records[k : k + batch_size] for k in range(0, tasks, batch_size)]
    counter = itertools.count()
    counter_lock = threading.Lock()
    spec = pb.TaskSpec(type="noop")

    def worker() -> None:
        while not stop.is_set():
            with counter_lock:
                b = next(counter)
            if b >= len(batches):
                return
            batch = batches[b]
            client = clients[batch[0].node]
            keys = [f"bench-{run_id}-{r.index}" for r in batch]
            for attempt in range(SUBMIT_ATTEMPTS):
                started = time.perf_counter()
                try:
                    reply = client.submit_tasks([spec] * len(batch), keys)
                except Unavailable as err:
                    for record in batch:
                        record.error = str(err)
                    time.sleep(0.05 * (attempt + 1))
                    continue
                except CortexError as err:
                    for record in batch:
                        record.error = str(err)
                    break
                rpc_ms = (time.perf_counter() - started) * 1000
                for record, result in zip(batch, reply.results, strict=True):
                    record.rpc_ms = rpc_ms
                    record.task_id = result.task.id
                    record.error = result.error
                break

    _run_workers(worker, concurrency)
    return records


def _terminal_count(client: CortexClient) -> int:
    return int(client.list_tasks(states=TERMINAL_STATES, page_size=1).total_size)


def _wait_terminal(
    client: CortexClient, expected: int, timeout_s: float, poll_s: float = 0.02
) -> int:
    deadline = time.monotonic() + timeout_s
    count = 0
    while time.monotonic() < deadline:
        try:
            count = _terminal_count(client)
        except CortexError:
            pass
        if count >= expected:
            break
        time.sleep(poll_s)
    return count


def _parallel_map(func: Callable[[int], T], count: int, threads: int) -> list[T]:
    results: list[T | None] = [None] * count
    counter = itertools.count()
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(counter)
            if i >= count:
                return
            results[i] = func(i)

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        while thread.is_alive():
            thread.join(0.2)
    return [r for r in results if r is not None]


def _timelines(
    clients: Sequence[CortexClient], task_ids: list[str], threads: int
) -> list[TaskTimeline]:
    def fetch(i: int) -> TaskTimeline:
        try:
            got = clients[i % len(clients)].get_task(task_ids[i], include_events=True)
        except CortexError as err:
            return TaskTimeline(task_ids[i], f"unreadable ({type(err).__name__})")
        events: dict[str, int] = {}
        for event in got.events:
            events.setdefault(enum_name(pb.EventType, event.type), event.time.ToMilliseconds())
        return TaskTimeline(got.task.id, enum_name(pb.TaskState, got.task.state), events)

    return _parallel_map(fetch, len(task_ids), threads)


def _wait_converged(
    clients: Sequence[CortexClient], timeout_s: float
) -> list[pb.GetClusterStatusResponse]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            statuses = [c.get_cluster_status() for c in clients]
        except CortexError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
            continue
        same = len({(s.state_digest, s.applied_index) for s in statuses}) == 1
        settled = all(s.commit_index <= s.applied_index for s in statuses)
        if (same and settled) or time.monotonic() > deadline:
            return statuses
        time.sleep(0.3)


# -- report -------------------------------------------------------------------


@dataclass
class BenchRun:
    """Everything measured in one run, before any arithmetic."""

    tasks: int
    mode: str
    concurrency: int
    batch_size: int
    raft_sync: bool
    # Whether the nodes ran their threads under SCHED_BATCH.
    sched_batch: bool
    # The nodes' task limit when the run set one (None: the node default).
    max_tasks: int | None
    # The tasks each node takes to wait for a slot, when the run set it.
    prefetch_tasks: int | None
    # Tasks per second submitted open loop (`--rate`), None: closed loop.
    rate: float | None
    # Whether every call went to the leader (`--to-leader`), none forwarded.
    to_leader: bool
    # Whether the clients sent their writes to the leader (not `--no-route-writes`).
    route_writes: bool
    node_ids: list[str]
    load_before: float
    elapsed_s: float
    submit_elapsed_s: float
    timed_out: bool
    records: list[SubmitRecord]
    timelines: list[TaskTimeline]
    applied_before: int
    applied_after: int
    cpu_seconds: dict[str, float]
    statuses: list[pb.GetClusterStatusResponse]
    # Per node: journal syncs and entries they made durable during the run.
    journal: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Per node: how long those syncs took, p50 and p99 in ms, each as the
    # bucket of `cortex_raft_journal_sync_seconds` it falls in (at most).
    journal_sync_ms: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    # CPU seconds each kind of thread used during the run, summed over the
    # nodes (`cortex_thread_cpu_seconds`; threads Python did not start are
    # in the processes' CPU only).
    thread_cpu_s: dict[str, float] = field(default_factory=dict)
    # Context switches during the run by (kind of thread, "voluntary" or
    # "involuntary"), summed over the nodes (`cortex_thread_context_switches`).
    thread_switches: dict[tuple[str, str], float] = field(default_factory=dict)
    # Batches merged into shared entries, and the times commands waited for
    # the leader's own next batch and left without it, summed over the nodes.
    merging: dict[str, float] = field(default_factory=dict)
    # With --stages: per node, each stage's calls and thread CPU in
    # nanoseconds during the run (`scripts/_node_timing`).
    stages: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    # With --path: the stretches of each task's way to its start.
    path: TaskPath | None = None
    # The machine's speed: CPU ms of `reference_work`, before the cluster
    # started and after it stopped (`machine_reference_ms`).
    reference_ms: tuple[float, float] | None = None


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def _spans(timelines: Sequence[TaskTimeline], start: str, end: str) -> list[float]:
    return [s for t in timelines if (s := t.span_ms(start, end)) is not None]


def _p50_p99(values: Sequence[float]) -> str:
    return f"{percentile(values, 50):.1f} / {percentile(values, 99):.1f} ms"


def _aim(value: float, aim: float, higher_is_better: bool) -> str:
    met = value >= aim if higher_is_better else value <= aim
    sign = ">=" if higher_is_better else "<="
    return f"(aim {sign} {aim:g}: {'met' if met else 'MISSED'})"


_SYNC_HISTOGRAM = "cortex_raft_journal_sync_seconds"
_THREAD_CPU = "cortex_thread_cpu_seconds"
_THREAD_SWITCHES = "cortex_thread_context_switches"
# The leader's merging of batches into shared entries (`cortex.raft.merging`).
_MERGE_COUNTERS = {
    "merged_batches": "cortex_raft_merged_batches",
    "holds": "cortex_raft_merge_holds",
    "holds_given_up": "cortex_raft_merge_holds_given_up",
}
# Kinds of thread the report names, the busiest first; the rest are summed.
_THREADS_SHOWN = 8


def _scrape(node: DevNode) -> list[Metric]:
    """The node's metrics now (none when they cannot be read)."""
    if not node.http:
        return []
    try:
        with urllib.request.urlopen(f"http://{node.http}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return []
    return list(text_string_to_metric_families(text))


def _samples(families: list[Metric], family: str, sample: str) -> Iterator[Sample]:
    """The samples named `sample` of the metric family `family`."""
    for found in families:
        if found.name == family:
            yield from (s for s in found.samples if s.name == sample)


def _sync_buckets(families: list[Metric]) -> dict[float, float]:
    """A node's journal sync histogram: cumulative counts by bucket bound
    in seconds (empty when its metrics could not be read)."""
    return {
        float(s.labels["le"]): s.value
        for s in _samples(families, _SYNC_HISTOGRAM, f"{_SYNC_HISTOGRAM}_bucket")
    }


def _thread_cpu(families: list[Metric]) -> dict[str, float]:
    """A node's CPU seconds by kind of thread (`cortex_thread_cpu_seconds`)."""
    return {
        s.labels["thread"]: s.value for s in _samples(families, _THREAD_CPU, f"{_THREAD_CPU}_total")
    }


def _merging(families: list[Metric]) -> dict[str, float]:
    """A node's counts of batches merged into shared entries and of waits
    for its own next batch, as leader (`_MERGE_COUNTERS`)."""
    return {
        key: sum(s.value for s in _samples(families, family, f"{family}_total"))
        for key, family in _MERGE_COUNTERS.items()
    }


def _thread_switches(families: list[Metric]) -> dict[tuple[str, str], float]:
    """A node's context switches by kind of thread and of switch."""
    return {
        (s.labels["thread"], s.labels["switch"]): s.value
        for s in _samples(families, _THREAD_SWITCHES, f"{_THREAD_SWITCHES}_total")
    }


K = TypeVar("K")


def _counted_between(
    before: list[list[Metric]],
    after: list[list[Metric]],
    read: Callable[[list[Metric]], dict[K, float]],
) -> dict[K, float]:
    """How much of a counter (`read` from each node's metrics, by key) grew
    between two scrapes, summed over nodes."""
    grown: dict[K, float] = {}
    for start, end in zip(before, after, strict=True):
        earlier = read(start)
        for key, value in read(end).items():
            grown[key] = grown.get(key, 0.0) + value - earlier.get(key, 0.0)
    return grown


def _sync_p50_p99(
    before: dict[float, float], after: dict[float, float]
) -> tuple[float | None, float | None]:
    return _bucket_quantile(before, after, 0.5), _bucket_quantile(before, after, 0.99)


def _bucket_quantile(
    before: dict[float, float], after: dict[float, float], q: float
) -> float | None:
    """The bound, in ms, of the bucket holding quantile `q` of what was
    observed between two scrapes; None when nothing was."""
    bounds = sorted(after)
    counts = [after[bound] - before.get(bound, 0.0) for bound in bounds]
    if not counts or counts[-1] <= 0:
        return None
    return next(
        bound * 1000 for bound, count in zip(bounds, counts, strict=True) if count >= q * counts[-1]
    )


def _at_most(ms: float | None) -> str:
    if ms is None:
        return "?"
    return "beyond the last bucket" if math.isinf(ms) else f"<= {ms:g} ms"


def _json_bound(ms: float | None) -> float | str | None:
    return "inf" if ms is not None and math.isinf(ms) else ms


def _line(label: str, text: str) -> None:
    print(f"  {label:<36} {text}")


def figures(run: BenchRun) -> dict[str, Any]:
    """The run's headline figures, as `--json` prints them."""
    completed = [t for t in run.timelines if t.state == "completed"]
    accepted = [r for r in run.records if r.task_id]
    entries = run.applied_after - run.applied_before
    elapsed = run.elapsed_s
    to_running = _spans(run.timelines, "submitted", "started")
    busy = sum(run.cpu_seconds.values())
    in_hand = tasks_in_hand(run.timelines)
    return {
        "mode": run.mode,
        "concurrency": run.concurrency,
        "rate": run.rate,
        "to_leader": run.to_leader,
        "route_writes": run.route_writes,
        "batch_size": run.batch_size if run.mode == "batch" else 1,
        "tasks": run.tasks,
        "completed": len(completed),
        "cpus": os.cpu_count() or 1,
        "raft_sync": run.raft_sync,
        "sched_batch": run.sched_batch,
        "max_tasks": run.max_tasks,
        "prefetch_tasks": run.prefetch_tasks,
        "load_before": round(run.load_before, 2),
        "reference_ms": list(run.reference_ms) if run.reference_ms else None,
        "elapsed_s": round(elapsed, 3),
        "tasks_per_s": round(len(completed) / elapsed, 1) if elapsed > 0 else 0.0,
        "submitted_per_s": (
            round(len(accepted) / run.submit_elapsed_s, 1) if run.submit_elapsed_s > 0 else 0.0
        ),
        "cpu_ms_per_task": round(busy * 1000 / len(completed), 3) if completed else None,
        "cpu_seconds": {name: round(used, 2) for name, used in run.cpu_seconds.items()},
        "submit_to_running_p50_ms": _rounded(percentile(to_running, 50)),
        "submit_to_running_p99_ms": _rounded(percentile(to_running, 99)),
        # The events' times are whole milliseconds: the mean tells apart
        # changes smaller than the percentiles' steps.
        "submit_to_running_mean_ms": _rounded(mean(to_running)) if to_running else None,
        "submit_to_completed_p50_ms": _rounded(
            percentile(_spans(run.timelines, "submitted", "completed"), 50)
        ),
        "submit_rpc_p50_ms": _rounded(percentile([r.rpc_ms for r in accepted], 50)),
        "submit_rpc_p99_ms": _rounded(percentile([r.rpc_ms for r in accepted], 99)),
        "entries": entries,
        "entries_per_s": round(entries / elapsed, 1) if elapsed > 0 else 0.0,
        "tasks_per_entry": round(len(accepted) / entries, 2) if entries > 0 else None,
        # Batches the leader merged into shared entries, times commands
        # waited there for its own next batch, and times they left without it.
        **{key: int(run.merging.get(key, 0)) for key in _MERGE_COUNTERS},
        "digests_equal": len({(s.state_digest, s.applied_index) for s in run.statuses}) == 1,
        # How many tasks were between their assignment and their end at once,
        # on average over the run (`tasks_in_hand`), and the nodes' slots.
        "tasks_in_hand_mean": _rounded(in_hand) if in_hand is not None else None,
        "slots": _slots(run),
        "waiting_slots": _waiting_slots(run),
        # Per node, the bounds of the buckets the syncs' p50 and p99 fall in
        # ("inf": beyond the last; null: no sync seen).
        "journal_sync_ms": {
            node: {"p50": _json_bound(p50), "p99": _json_bound(p99)}
            for node, (p50, p99) in run.journal_sync_ms.items()
        },
        # Microseconds of CPU per completed task, by kind of thread, all
        # nodes; the kinds that used at least one.
        "thread_cpu_us_per_task": {
            kind: used
            for kind, seconds in sorted(run.thread_cpu_s.items(), key=lambda item: -item[1])
            if (used := round(seconds * 1e6 / len(completed))) >= 1
        }
        if completed
        else {},
        # Context switches per completed task, all nodes: voluntary ones
        # (a thread waiting: each hand-off of work between threads) and
        # involuntary ones (preemption), and both by kind of thread.
        "context_switches_per_task": _switches_per_task(run.thread_switches, len(completed)),
        # With --stages: per node, each stage's calls and microseconds of its
        # threads' CPU per Raft entry applied during the run.
        "stages": {
            node_id: {
                stage: {
                    "calls": calls,
                    "cpu_us_per_entry": round(spent / 1000 / max(entries, 1), 1),
                }
                for stage, (calls, spent) in stages.items()
                if calls
            }
            for node_id, stages in run.stages.items()
        },
        # With --path: per stretch of a task's way from its proposal to its
        # attempt's start, milliseconds of wall clock (p50, p90, p99, mean).
        "path": _path_figures(run.path) if run.path is not None else {},
    }


def tasks_in_hand(timelines: Sequence[TaskTimeline]) -> float | None:
    """How many tasks were assigned and not yet ended at once, on average
    from the first assignment to the last end, by the events' times (the
    round's proposal, the attempt's end; tasks waiting on a node for a slot
    included): against the nodes' slots, how busy the slots were kept. The
    state holds a slot longer (until the end's entry is applied), and fills
    it again only with the next round's entry:
    a figure well under the slots, with CPU to spare, means tasks wait on
    those round trips. None without completed tasks."""
    spans = [
        (t.events["assigned"], t.events["completed"])
        for t in timelines
        if "assigned" in t.events and "completed" in t.events
    ]
    if not spans:
        return None
    window = max(end for _, end in spans) - min(start for start, _ in spans)
    if window <= 0:
        return None
    return sum(end - start for start, end in spans) / window


def _node_config(run: BenchRun) -> NodeConfig:
    """The nodes' task limits as the run's flags set them."""
    limits = {"max_tasks": run.max_tasks, "prefetch_tasks": run.prefetch_tasks}
    return NodeConfig(**{name: value for name, value in limits.items() if value is not None})


def _slots(run: BenchRun) -> int:
    """The tasks the nodes run at once at most, all together."""
    return len(run.node_ids) * _node_config(run).max_tasks


def _waiting_slots(run: BenchRun) -> int:
    """The tasks the nodes take beyond their slots, to wait for one, all together."""
    return len(run.node_ids) * _node_config(run).waiting_tasks


def _spread(values: Sequence[float]) -> dict[str, float | int | None]:
    return {
        "n": len(values),
        "p50": _rounded(percentile(values, 50)),
        "p90": _rounded(percentile(values, 90)),
        "p99": _rounded(percentile(values, 99)),
        "mean": _rounded(mean(values)) if values else None,
    }


def _path_figures(path: TaskPath) -> dict[str, Any]:
    return {
        "traced": path.traced,
        "placed_later": path.placed_later,
        "stretches": {name: _spread(values) for name, values in path.stretches.items()},
        "total_by_role": {
            f"proposed on the {proposer}, run on the {runner}": _spread(values)
            for (proposer, runner), values in sorted(path.totals_by_role.items())
        },
    }


def _switches_per_task(switches: dict[tuple[str, str], float], completed: int) -> dict[str, Any]:
    if not completed:
        return {}
    by_thread: dict[str, float] = {}
    by_switch: dict[str, float] = {}
    for (kind, switch), count in switches.items():
        by_thread[kind] = by_thread.get(kind, 0.0) + count
        by_switch[switch] = by_switch.get(switch, 0.0) + count
    return {
        "voluntary": round(by_switch.get("voluntary", 0.0) / completed, 2),
        "involuntary": round(by_switch.get("involuntary", 0.0) / completed, 2),
        "by_thread": {
            kind: per_task
            for kind, count in sorted(by_thread.items(), key=lambda item: -item[1])
            if (per_task := round(count / completed, 2)) >= 0.01
        },
    }


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 2)


def _written_after(
    timing_dir: Path,
    suffix: str,
    nodes: Sequence[DevNode],
    fresh: Callable[[str, int], Any | None],
) -> dict[str, Any]:
    """What each node's timing file (`<node-id><suffix>`) holds once the node
    has written it after this call, so it covers what came before: `fresh`
    returns that from the file's text, or None while the last write is
    older than the time given."""
    asked_ns = time.time_ns()
    deadline = time.monotonic() + TIMING_WAIT_S
    read: dict[str, Any] = {}
    for node in nodes:
        path = timing_dir / f"{node.node_id}{suffix}"
        while True:
            with contextlib.suppress(OSError, ValueError):
                found = fresh(path.read_text(), asked_ns)
                if found is not None:
                    read[node.node_id] = found
                    break
            if time.monotonic() > deadline:
                raise CortexError(f"no timings from {node.node_id} in {path}")
            time.sleep(0.05)
    return read


def _stage_totals(stage_dir: Path, nodes: Sequence[DevNode]) -> dict[str, dict[str, list[int]]]:
    """Each node's stage totals (each node rewrites its file every `DUMP_S`)."""

    def fresh(text: str, asked_ns: int) -> dict[str, list[int]] | None:
        written = json.loads(text)
        return written["stages"] if written["at_ns"] > asked_ns else None

    return _written_after(stage_dir, ".json", nodes, fresh)


def _stages_between(
    before: dict[str, dict[str, list[int]]], after: dict[str, dict[str, list[int]]]
) -> dict[str, dict[str, tuple[int, int]]]:
    changed = {}
    for node_id, stages in after.items():
        earlier = before.get(node_id, {})
        changed[node_id] = {
            stage: (calls - earlier.get(stage, [0, 0])[0], spent - earlier.get(stage, [0, 0])[1])
            for stage, (calls, spent) in stages.items()
        }
    return changed


def _path_events(path_dir: Path, nodes: Sequence[DevNode]) -> dict[str, list[list[Any]]]:
    """Every event each node noted (`scripts/_node_timing`; each node
    appends its new events and a `flushed` line every `DUMP_S`)."""

    def fresh(text: str, asked_ns: int) -> list[list[Any]] | None:
        lines = [json.loads(line) for line in text.splitlines() if line]
        if not any(line[0] == "flushed" and line[1] > asked_ns for line in lines):
            return None
        return [line for line in lines if line[0] != "flushed"]

    return _written_after(path_dir, ".jsonl", nodes, fresh)


def _path_lines(path: TaskPath | None) -> None:
    """Each stretch of a task's way to its start, and the totals by where
    it was proposed and where it ran."""
    if path is None:
        return
    print()
    print(
        f"path of a task placed with its submission, proposal -> attempt start (wall clock,"
        f" ms; {len(path.stretches[TOTAL])} tasks, {path.placed_later} more placed later)"
    )
    for name in (*STRETCHES, TOTAL):
        values = path.stretches[name]
        if values:
            print(
                f"  {name:<44} p50 {percentile(values, 50):7.2f}  p90 {percentile(values, 90):7.2f}"
                f"  p99 {percentile(values, 99):7.2f}  mean {mean(values):7.2f}"
            )
    for (proposer, runner), values in sorted(path.totals_by_role.items()):
        print(
            f"  {f'total, proposed on the {proposer}, run on the {runner}':<44}"
            f" p50 {percentile(values, 50):7.2f}  n {len(values)}"
        )


def _stage_lines(run: BenchRun) -> None:
    """Per node, each stage's calls and CPU: per call, and per Raft entry
    applied during the run."""
    entries = max(run.applied_after - run.applied_before, 1)
    for node_id, stages in run.stages.items():
        print()
        print(
            f"stages on {node_id} (thread CPU; a stage includes those it calls), {entries} entries"
        )
        for stage, (calls, spent) in sorted(stages.items(), key=lambda item: -item[1][1]):
            if calls:
                print(
                    f"  {stage:<44} {calls:>8} calls {spent / calls / 1000:>8.1f} us/call"
                    f" {spent / entries / 1000:>8.1f} us/entry"
                )


def report(run: BenchRun) -> None:
    """Prints the figures for people."""
    completed = [t for t in run.timelines if t.state == "completed"]
    accepted = [r for r in run.records if r.task_id]
    entries = run.applied_after - run.applied_before
    elapsed = run.elapsed_s
    cpus = os.cpu_count() or 1
    throughput = len(completed) / elapsed if elapsed > 0 else 0.0
    to_running = _spans(run.timelines, "submitted", "started")
    p50_running = percentile(to_running, 50)
    aim = AIM_BATCH_TASKS_PER_S if run.mode == "batch" else AIM_SINGLE_TASKS_PER_S
    way = f"SubmitTasks batches of {run.batch_size}" if run.mode == "batch" else "SubmitTask"

    print()
    print(
        f"results: {run.tasks} noop tasks via {way}, concurrency {run.concurrency}, "
        f"{len(run.node_ids)} nodes, {cpus} CPUs, host load {run.load_before:.1f} before the run"
        + (f", open loop at {run.rate:g} tasks/s" if run.rate else "")
        + (f", each node running at most {run.max_tasks} tasks" if run.max_tasks else "")
        + (
            f", each taking {run.prefetch_tasks} more to wait for a slot"
            if run.prefetch_tasks is not None
            else ""
        )
    )
    _line("completed", f"{len(completed)}/{run.tasks}")
    _line("wall time, first submit -> all done", f"{elapsed:.2f} s")
    _line("end-to-end throughput", f"{throughput:.0f} tasks/s {_aim(throughput, aim, True)}")
    submitted_ts = [t.events["submitted"] for t in run.timelines if "submitted" in t.events]
    completed_ts = [t.events["completed"] for t in completed if "completed" in t.events]
    if submitted_ts and completed_ts and max(completed_ts) > min(submitted_ts):
        window = (max(completed_ts) - min(submitted_ts)) / 1000
        _line(
            "  same, by the events' clock",
            f"{len(completed) / window:.0f} tasks/s over {window:.2f} s",
        )
    if run.submit_elapsed_s > 0:
        _line("tasks accepted by submit RPCs", f"{len(accepted) / run.submit_elapsed_s:.0f} /s")
    _line(
        "submit -> running p50 / p99",
        f"{_p50_p99(to_running)} {_aim(p50_running, AIM_P50_MS, False)}",
    )
    if to_running:
        _line("  mean", f"{mean(to_running):.2f} ms")
    for start, end in (
        ("submitted", "assigned"),
        ("assigned", "started"),
        ("started", "completed"),
    ):
        _line(f"  {start} -> {end}", _p50_p99(_spans(run.timelines, start, end)))
    in_hand = tasks_in_hand(run.timelines)
    if in_hand is not None:
        slots = _slots(run)
        _line(
            "tasks assigned and not ended, mean",
            f"{in_hand:.1f} of the nodes' {slots} slots and {_waiting_slots(run)} to wait for"
            f" them ({in_hand / slots:.0%} of the slots, by the events' clock)",
        )
    _line(
        "submit -> completed p50 / p99", _p50_p99(_spans(run.timelines, "submitted", "completed"))
    )
    _line("submit RPC latency p50 / p99", f"{_p50_p99([r.rpc_ms for r in accepted])} (client)")
    _line(
        "raft entries applied",
        f"{entries} (last_applied {run.applied_before} -> {run.applied_after})",
    )
    if entries > 0 and elapsed > 0:
        events = sum(len(t.events) for t in run.timelines)
        _line("replicated entries/s", f"{entries / elapsed:.0f}")
        _line("tasks per entry (batching)", f"{len(accepted) / entries:.2f}")
        _line("  task events per entry", f"{events / entries:.2f} (4 events per noop task)")
    merging = {key: int(run.merging.get(key, 0)) for key in _MERGE_COUNTERS}
    _line(
        "batches merged at the leader",
        f"{merging['merged_batches']}; commands waited for its own batch {merging['holds']}"
        f" times, {merging['holds_given_up']} of them left without it"
        f" (after {MAX_HOLD_S * 1000:.0f} ms)",
    )
    for node_id, (syncs, synced) in run.journal.items():
        per_sync = f", {synced / syncs:.2f} entries per sync" if syncs else ""
        p50, p99 = run.journal_sync_ms.get(node_id, (None, None))
        took = f", each p50 {_at_most(p50)}, p99 {_at_most(p99)}" if p50 is not None else ""
        _line(f"journal syncs on {node_id}", f"{syncs / elapsed:.0f}/s{per_sync}{took}")
    busy = sum(run.cpu_seconds.values())
    _line(
        "CPU seconds during the run",
        ", ".join(f"{name} {used:.1f}" for name, used in run.cpu_seconds.items())
        + f"; {busy:.1f} of {elapsed * cpus:.1f} available",
    )
    if completed and busy > 0:
        per_task_ms = busy * 1000 / len(completed)
        _line(
            "CPU per task (all processes)",
            f"{per_task_ms:.2f} ms {_aim(per_task_ms, AIM_CPU_MS_PER_TASK, False)}, so at most"
            f" ~{cpus * 1000 / per_task_ms:.0f} tasks/s on {cpus} idle CPUs",
        )
        _thread_lines(run.thread_cpu_s, len(completed), busy)
        _switch_line(run.thread_switches, len(completed))
    _stage_lines(run)
    _path_lines(run.path)

    print()
    print("convergence")
    for node_id, status in zip(run.node_ids, run.statuses, strict=True):
        role = enum_name(pb.RaftRole, status.raft_role) or "unknown"
        print(
            f"  {node_id} {role:<8} last_applied {status.applied_index:<7} "
            f"commit {status.commit_index:<7} digest {status.state_digest}"
        )
    converged = len({(s.state_digest, s.applied_index) for s in run.statuses}) == 1
    print(f"  {'all nodes agree' if converged else 'NODES DISAGREE'}")


def _switch_line(switches: dict[tuple[str, str], float], completed: int) -> None:
    """Context switches per task, and the kinds of thread that made most."""
    figures = _switches_per_task(switches, completed)
    if not figures or not figures["by_thread"]:
        return
    busiest = list(figures["by_thread"].items())[:_THREADS_SHOWN]
    _line(
        "context switches per task",
        f"{figures['voluntary']:.1f} voluntary, {figures['involuntary']:.1f} involuntary"
        f" ({', '.join(f'{kind} {count:.2f}' for kind, count in busiest)})",
    )


def _thread_lines(used: dict[str, float], completed: int, busy: float) -> None:
    """Where the nodes' CPU went, by kind of thread, per completed task."""
    ranked = sorted(used.items(), key=lambda item: -item[1])
    if not ranked:
        return
    shown = ranked[:_THREADS_SHOWN]
    rest = sum(seconds for _, seconds in ranked[_THREADS_SHOWN:])
    unlisted = busy - sum(seconds for _, seconds in ranked)
    for kind, seconds in shown:
        _line(
            f"  {kind} threads", f"{seconds * 1e6 / completed:.0f} us/task ({seconds / busy:.0%})"
        )
    if rest > 0:
        _line("  other threads", f"{rest * 1e6 / completed:.0f} us/task ({rest / busy:.0%})")
    if unlisted > 0:
        _line(
            "  not by thread",
            f"{unlisted * 1e6 / completed:.0f} us/task ({unlisted / busy:.0%}: the client,"
            " threads Python did not start, ended threads' last moments)",
        )


def problems_of(run: BenchRun) -> list[str]:
    """What makes the run a failure (not missing an aim)."""
    completed = [t for t in run.timelines if t.state == "completed"]
    problems = []
    failed_submits = [r for r in run.records if not r.task_id]
    if failed_submits:
        problems.append(f"{len(failed_submits)} submits failed, e.g. {failed_submits[0].error}")
    if len(completed) < run.tasks:
        states: dict[str, int] = {}
        for t in run.timelines:
            if t.state != "completed":
                states[t.state] = states.get(t.state, 0) + 1
        problems.append(f"{run.tasks - len(completed)} tasks did not complete (states {states})")
    if run.timed_out:
        problems.append("timed out waiting for every task to finish")
    if len({(s.state_digest, s.applied_index) for s in run.statuses}) != 1:
        problems.append("state digests or applied indexes differ between nodes")
    return problems


# -- main ---------------------------------------------------------------------


# Something shaped like a task spec, for `reference_work`.
_REFERENCE_SPEC = {
    "type": "shell", "command": ["python3", "-c", "print(1)"], "env": {"A": "1"},
    "priority": 5, "retry_policy": {"max_retries": 3, "backoff_ms": 1000}, "labels": {},
}  # fmt: skip


def reference_work() -> None:
    """A fixed piece of the kind of work a node does (Python objects, JSON,
    SQLite inserts into an indexed table), the same in every run."""
    counts: dict[str, int] = {}
    for i in range(40_000):
        key = f"k{i % 997}"
        counts[key] = counts.get(key, 0) + i % 7
    for _ in range(400):
        json.loads(json.dumps(_REFERENCE_SPEC, sort_keys=True))
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, state TEXT, body TEXT)")
    conn.execute("CREATE INDEX t_by_state ON t (state, id)")
    with conn:
        conn.executemany(
            "INSERT INTO t VALUES (?, ?, ?)",
            ((f"{i:08x}", "queued", "x" * 200) for i in range(4000)),
        )
    conn.close()


def machine_reference_ms(runs: int = 5) -> float:
    """CPU ms `reference_work` takes this process now, the best of `runs`.
    This machine's speed moves with nothing else running (25 to 46 ms of
    this work within an hour): figures of two runs compare only as their
    references do."""
    best = math.inf
    for _ in range(runs):
        began = time.thread_time_ns()
        reference_work()
        best = min(best, (time.thread_time_ns() - began) / 1e6)
    return round(best, 1)


def run(args: argparse.Namespace) -> int:
    return progress_to_stderr(_run, args)


def _run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="cortex-bench-")).resolve()
    base_port = free_base_port(NODE_COUNT)
    print(
        f"starting {NODE_COUNT} nodes on 127.0.0.1 (raft {base_port}+, grpc {base_port + 100}+), "
        f"data in {data_dir}"
    )
    extra = [] if args.raft_sync else ["--no-raft-sync"]
    if args.max_tasks is not None:
        extra += ["--max-tasks", str(args.max_tasks)]
    if args.prefetch_tasks is not None:
        extra += ["--prefetch-tasks", str(args.prefetch_tasks)]
    print(f"raft_sync {'on' if args.raft_sync else 'OFF (--no-raft-sync)'}")
    if args.sched_batch:
        extra += ["--sched-batch"]
        print("the nodes' threads under SCHED_BATCH (--sched-batch)")
    stage_dir = data_dir / "stages" if args.stages else None
    path_dir = data_dir / "path" if args.path else None
    for variable, timing_dir in ((STAGE_DIR_VARIABLE, stage_dir), (PATH_DIR_VARIABLE, path_dir)):
        if timing_dir is not None:
            timing_dir.mkdir(parents=True, exist_ok=True)
            os.environ[variable] = str(timing_dir)
    if stage_dir is not None or path_dir is not None:
        # The nodes inherit both: Python loads the hooks at start-up.
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(NODE_TIMING_PATH), os.environ.get("PYTHONPATH")])
        )
    reference_before = machine_reference_ms()
    nodes = start_cluster(NODE_COUNT, base_port, data_dir, extra)
    clients: list[CortexClient] = []
    stop = threading.Event()
    problems = ["interrupted before the end of the run"]
    try:
        started = time.monotonic()
        wait_ready(nodes, timeout_s=args.ready_timeout)
        wait_all_active(nodes, timeout_s=args.ready_timeout)
        clients = [
            CortexClient(n.grpc, timeout_s=30, route_writes=args.route_writes) for n in nodes
        ]
        leader = leader_index(clients)
        print(f"cluster ready in {time.monotonic() - started:.1f}s; leader {nodes[leader].node_id}")
        measured = measure(args, nodes, clients, leader, stop, stage_dir, path_dir)
        report(measured)
        problems = problems_of(measured)
    finally:
        stop.set()
        for client in clients:
            client.close()
        stop_and_clean(data_dir, args, failed=bool(problems))
    # Measured again with the nodes gone, whose work would slow it.
    measured.reference_ms = (reference_before, machine_reference_ms())
    _line(
        "machine: reference work, CPU ms",
        f"{reference_before:.0f} before the run, {measured.reference_ms[1]:.0f} after"
        " (runs' figures compare only as these do)",
    )
    if args.json:
        print(json.dumps({**figures(measured), "problems": problems}), file=sys.__stdout__)
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


def measure(
    args: argparse.Namespace,
    nodes: Sequence[DevNode],
    clients: Sequence[CortexClient],
    leader: int,
    stop: threading.Event,
    stage_dir: Path | None = None,
    path_dir: Path | None = None,
) -> BenchRun:
    """Submits the tasks, waits for them all to finish, then gathers every
    task's events and every node's final status (with `stage_dir`, the
    nodes' stage timings too; with `path_dir`, what they noted of each
    task's way to its start)."""
    before = clients[leader].get_cluster_status()
    journal_before = [c.get_cluster_status() for c in clients]
    baseline = _terminal_count(clients[leader])
    load_before = os.getloadavg()[0]
    way = f"in batches of {args.batch_size}" if args.mode == "batch" else "one per call"
    if args.rate:
        way += f", {args.rate:g} a second"
    print(
        f"submitting {args.tasks} noop tasks {way} from {args.concurrency} threads, "
        + (
            "to the leader ..."
            if args.to_leader
            else f"round-robin over {len(nodes)} nodes"
            + (", writes routed to the leader ..." if args.route_writes else " ...")
        )
    )
    if args.stuck:
        # Queued for good: no node has the label.
        stuck = pb.TaskSpec(type="noop", constraints=pb.Constraints(node_labels=["bench=nowhere"]))
        for _ in range(args.stuck):
            clients[leader].submit_task(stuck)
        print(f"{args.stuck} tasks no node can take left queued")
    stages_before = _stage_totals(stage_dir, nodes) if stage_dir is not None else {}
    scraped_before = [_scrape(node) for node in nodes]
    cpu_before = _cpu_seconds(nodes)
    run_id = f"{time.time_ns()}"
    # Where the calls go: every node in turn, or the leader alone.
    targets = [clients[leader]] if args.to_leader else clients
    t0 = time.perf_counter()
    if args.mode == "batch":
        records = _submit_batches(
            targets, args.tasks, args.concurrency, args.batch_size, run_id, stop
        )
    else:
        records = _submit_all(targets, args.tasks, args.concurrency, run_id, stop, args.rate)
    t_submitted = time.perf_counter()
    finished = _wait_terminal(clients[leader], baseline + args.tasks, args.timeout)
    t_done = time.perf_counter()
    cpu_after = _cpu_seconds(nodes)
    stages_after = _stage_totals(stage_dir, nodes) if stage_dir is not None else {}
    scraped_after = [_scrape(node) for node in nodes]
    applied_after = clients[leader].get_cluster_status().applied_index
    journal_after = [c.get_cluster_status() for c in clients]
    task_ids = [r.task_id for r in records if r.task_id]
    return BenchRun(
        tasks=args.tasks,
        mode=args.mode,
        concurrency=args.concurrency,
        batch_size=args.batch_size,
        raft_sync=args.raft_sync,
        sched_batch=args.sched_batch,
        max_tasks=args.max_tasks,
        prefetch_tasks=args.prefetch_tasks,
        rate=args.rate,
        to_leader=args.to_leader,
        route_writes=args.route_writes,
        node_ids=[n.node_id for n in nodes],
        load_before=load_before,
        elapsed_s=t_done - t0,
        submit_elapsed_s=t_submitted - t0,
        timed_out=finished < baseline + args.tasks,
        records=records,
        timelines=_timelines(clients, task_ids, min(args.concurrency, 16)),
        applied_before=before.applied_index,
        applied_after=applied_after,
        cpu_seconds={k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after},
        statuses=_wait_converged(clients, timeout_s=30),
        journal={
            node.node_id: (
                after.journal_syncs - start.journal_syncs,
                after.journal_synced_entries - start.journal_synced_entries,
            )
            for node, start, after in zip(nodes, journal_before, journal_after, strict=True)
        },
        journal_sync_ms={
            node.node_id: _sync_p50_p99(_sync_buckets(start), _sync_buckets(end))
            for node, start, end in zip(nodes, scraped_before, scraped_after, strict=True)
        },
        thread_cpu_s=_counted_between(scraped_before, scraped_after, _thread_cpu),
        thread_switches=_counted_between(scraped_before, scraped_after, _thread_switches),
        merging=_counted_between(scraped_before, scraped_after, _merging),
        stages=_stages_between(stages_before, stages_after),
        path=path_of_tasks(_path_events(path_dir, nodes)) if path_dir is not None else None,
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000, help="noop tasks to run (default 2000)")
    parser.add_argument(
        "--stuck",
        type=int,
        default=0,
        help="tasks no node can take, left queued throughout (default 0)",
    )
    parser.add_argument(
        "--mode",
        choices=("single", "batch"),
        default="single",
        help="single: one SubmitTask call per task; batch: SubmitTasks calls of --batch-size",
    )
    parser.add_argument(
        "--concurrency", type=int, default=None, help="client submit threads (default 32, batch 4)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=500, help="tasks per SubmitTasks call (default 500)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="single mode: submit open loop, this many tasks per second in all, each at its"
        " time whether or not earlier calls returned (default: closed loop, each thread"
        " submitting as soon as its last call returned; --concurrency defaults to 8)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object of the figures on stdout"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=180.0,
        help="seconds to wait, after the last submit, for every task to finish (default 180)",
    )
    parser.add_argument(
        "--no-raft-sync",
        dest="raft_sync",
        action="store_false",
        help="run the nodes without syncing their Raft journals (to measure what syncing costs)",
    )
    parser.add_argument(
        "--to-leader",
        action="store_true",
        help="send every call to the leader instead of to each node in turn, as a client"
        " that routes its writes to the leader would: no node forwards a proposal",
    )
    parser.add_argument(
        "--no-route-writes",
        dest="route_writes",
        action="store_false",
        help="clients send writes to their own node, which forwards them to the leader, instead"
        " of to the leader their answers name (to measure what routing saves)",
    )
    parser.add_argument(
        "--sched-batch",
        action="store_true",
        help="run the nodes' threads under SCHED_BATCH (`cortex.cpu_policy`)",
    )
    parser.add_argument(
        "--max-tasks",
        type=int,
        default=None,
        help="most tasks each node runs at once (default: the node default, 64); a"
        " higher limit shows what the engine does when the nodes' slots do not bound it",
    )
    parser.add_argument(
        "--prefetch-tasks",
        type=int,
        default=None,
        help="tasks each node takes beyond --max-tasks, while every node is full, to start"
        " as its slots free (default: the node default, half of --max-tasks; 0: none)",
    )
    timing = parser.add_mutually_exclusive_group()
    timing.add_argument(
        "--path",
        action="store_true",
        help="also note, on every node, when each task is proposed, logged, applied and"
        " started, and print where its way to its start goes (scripts/_node_timing)",
    )
    timing.add_argument(
        "--stages",
        action="store_true",
        help="also time named stages of each node's work by their threads' CPU (apply, Raft"
        " messages, the journal, SubmitTask's parts, ...; scripts/_node_timing)",
    )
    add_cluster_arguments(parser)
    args = parser.parse_args(argv)
    if args.rate is not None and (args.mode != "single" or not args.rate > 0):
        parser.error("--rate must be above 0, in single mode")
    if args.concurrency is None:
        args.concurrency = 4 if args.mode == "batch" else 8 if args.rate else 32
    if args.tasks < 1 or args.concurrency < 1:
        parser.error("--tasks and --concurrency must be at least 1")
    if args.max_tasks is not None and args.max_tasks < 1:
        parser.error("--max-tasks must be at least 1")
    if args.prefetch_tasks is not None and args.prefetch_tasks < 0:
        parser.error("--prefetch-tasks must be at least 0")
    if not 1 <= args.batch_size <= MAX_SUBMIT_BATCH:
        parser.error(f"--batch-size must be from 1 to {MAX_SUBMIT_BATCH}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
