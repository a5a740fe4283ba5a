"""Failover benchmark on local 3-node clusters of real `cortex node start`
processes. Leader loss: `kill -9` of the Raft leader, then noop tasks
submitted to a survivor; reports the time to a new leader and to the first
assignment it makes. Worker loss: `kill -9` of a follower running `sleep 60`
tasks; reports the time until they are re-queued (against the failure
timeout) and running again on another node. Every run uses a fresh cluster;
min / median / max over the runs are printed.

    python scripts/bench_failover.py --runs 3 --failure-timeout 3

Exits non-zero when something awaited does not happen within --deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import psutil
from _cluster import (
    add_cluster_arguments,
    free_base_port,
    leader_index,
    run_main,
    wait_all_active,
)

from cortex.api.client import CortexClient
from cortex.api.convert import struct_dict
from cortex.cli.dev import DevNode, start_cluster, stop_cluster, wait_ready
from cortex.errors import CortexError, Unavailable
from cortex.v1 import cortex_pb2 as pb

NODE_COUNT = 3
PROBE_TASKS = 3
RETRY_BACKOFF_MS = 100
POLL_S = 0.01
# NodeSupervisor's default check interval (cortex/membership/failure.py): a
# new leader starts its wait up to one interval after its election.
SUPERVISOR_INTERVAL_S = 0.5

T = TypeVar("T")


class MissedDeadline(CortexError):
    """Something the benchmark waits for did not happen in time."""


class LeadershipChanged(CortexError):
    """The leader changed while a run was being set up, so its timing would
    include a fresh leader's wait."""


def _now_ms() -> float:
    """Wall-clock ms, the clock task events are stamped with (same host)."""
    return time.time() * 1000


def _wait_for(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Polls `check` until it returns something; CortexErrors count as not yet."""
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while True:
        try:
            value = check()
            if value is not None:
                return value
        except CortexError as err:
            last_error = f"; last error: {type(err).__name__}: {err}"
        if time.monotonic() > deadline:
            raise MissedDeadline(f"{what} did not happen within {timeout_s:g}s{last_error}")
        time.sleep(POLL_S)


# -- processes ----------------------------------------------------------------


def _descendants(pids: Iterable[int]) -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for pid in pids:
        try:
            found.extend(psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            pass
    return found


def _kill(processes: Iterable[psutil.Process]) -> None:
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass


def _own_children(pids: Iterable[int]) -> list[psutil.Process]:
    """The given processes that are still children of this one."""
    found = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            if process.ppid() == os.getpid():
                found.append(process)
        except psutil.Error:
            pass
    return found


def _kill9(node: DevNode) -> float:
    """`kill -9` of a node; returns when, in wall-clock ms. Its task processes
    run in their own sessions and would outlive it, so they go too, as they
    would with the machine."""
    tasks = _descendants([node.pid])
    killed_at = _now_ms()
    os.kill(node.pid, signal.SIGKILL)
    try:
        os.waitpid(node.pid, 0)
    except ChildProcessError:
        pass
    _kill(tasks)
    return killed_at


# -- cluster ------------------------------------------------------------------


@dataclass
class LiveCluster:
    nodes: list[DevNode]
    clients: list[CortexClient]

    def others(self, index: int) -> list[int]:
        return [i for i in range(len(self.nodes)) if i != index]


@contextmanager
def _node_settings(args: argparse.Namespace) -> Iterator[None]:
    """`start_cluster` hands its environment to the nodes, and node config
    reads `CORTEX_<KEY>`, so the settings reach the nodes without flags."""
    settings = {
        "CORTEX_FAILURE_TIMEOUT_S": str(args.failure_timeout),
        "CORTEX_HEARTBEAT_INTERVAL_S": str(args.heartbeat_interval),
        # Stopping must not wait for the sleep tasks to drain.
        "CORTEX_SHUTDOWN_DRAIN_S": "0",
    }
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _stop(nodes: Sequence[DevNode], data_dir: Path) -> None:
    """Stops the nodes and kills any task process they leave behind; a second
    Ctrl-C must not interrupt this."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        tasks = _descendants(n.pid for n in nodes)
        try:
            stop_cluster(data_dir)
        except CortexError:
            _kill(_own_children(n.pid for n in nodes))
        _kill(tasks)
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def fresh_cluster(args: argparse.Namespace, data_dir: Path) -> Iterator[LiveCluster]:
    """A new 3-node cluster in `data_dir`, every node active; stopped on the
    way out. The data dir (with the node logs) is kept when the body fails."""
    with _node_settings(args):
        nodes = start_cluster(NODE_COUNT, free_base_port(NODE_COUNT), data_dir)
    clients = [CortexClient(n.grpc, timeout_s=3) for n in nodes]
    keep = args.keep_data
    try:
        wait_ready(nodes, timeout_s=args.ready_timeout)
        wait_all_active(nodes, timeout_s=args.ready_timeout)
        yield LiveCluster(nodes, clients)
    except Exception:
        keep = True
        raise
    finally:
        for client in clients:
            client.close()
        _stop(nodes, data_dir)
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)


def _new_data_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="cortex-failover-")).resolve()


# -- leader loss --------------------------------------------------------------


@dataclass
class LeaderLoss:
    old_leader: str
    new_leader: str
    elected_ms: float
    accepted_ms: float
    assigned_ms: float
    assigned_node: str
    refused_submits: int
    assigned_to_dead: int


class _LeaderWatch(threading.Thread):
    """Polls the survivors' ClusterStatus until one names a leader other than
    the killed one; `seen_at` is when, in wall-clock ms."""

    def __init__(self, addresses: Sequence[str], old_leader: str) -> None:
        super().__init__(name="leader-watch", daemon=True)
        self._addresses = addresses
        self._old_leader = old_leader
        self.stop = threading.Event()
        self.seen_at: float | None = None
        self.new_leader = ""

    def run(self) -> None:
        clients = [CortexClient(a, timeout_s=0.5) for a in self._addresses]
        try:
            while not self.stop.is_set():
                for client in clients:
                    try:
                        status = client.get_cluster_status()
                    except CortexError:
                        continue
                    if status.leader_id not in ("", self._old_leader):
                        self.new_leader = status.leader_id
                        self.seen_at = _now_ms()
                        return
                time.sleep(POLL_S)
        finally:
            for client in clients:
                client.close()


def _submit_until_accepted(
    clients: Sequence[CortexClient], spec: pb.TaskSpec, key: str, timeout_s: float
) -> tuple[str, int]:
    """Submits to each client in turn until one accepts, retrying Unavailable
    with the same idempotency key; returns the task id and the refusals."""
    deadline = time.monotonic() + timeout_s
    refused = 0
    while True:
        try:
            return clients[refused % len(clients)].submit_task(spec, key).task.id, refused
        except Unavailable as err:
            refused += 1
            if time.monotonic() > deadline:
                raise MissedDeadline(
                    f"no survivor accepted a submit within {timeout_s:g}s; last error: {err}"
                ) from None
            time.sleep(POLL_S)


def _ms(event: pb.Event) -> int:
    return int(event.time.ToMilliseconds())


def _first_assignment(
    client: CortexClient, task_ids: Sequence[str], dead: str
) -> tuple[pb.Event | None, int]:
    """The earliest 'assigned' event to a live node among the tasks, and how
    many assignments went to the dead node."""
    first: pb.Event | None = None
    to_dead = 0
    for task_id in task_ids:
        for event in client.get_task(task_id, include_events=True).events:
            if event.type != pb.EVENT_TYPE_ASSIGNED:
                continue
            if event.node_id == dead:
                to_dead += 1
            elif first is None or _ms(event) < _ms(first):
                first = event
    return first, to_dead


def measure_leader_loss(cluster: LiveCluster, args: argparse.Namespace) -> LeaderLoss:
    """Kills the leader, submits noop tasks to the survivors, and waits for
    the first of them to be assigned to a live node."""
    leader = leader_index(cluster.clients)
    old = cluster.nodes[leader]
    survivors = [cluster.clients[i] for i in cluster.others(leader)]
    watch = _LeaderWatch([cluster.nodes[i].grpc for i in cluster.others(leader)], old.node_id)
    watch.start()
    try:
        killed_at = _kill9(old)
        key = f"failover-{time.time_ns()}"
        task_ids: list[str] = []
        refused_total = 0
        accepted_at = 0.0
        for k in range(PROBE_TASKS):
            task_id, refused = _submit_until_accepted(
                survivors, pb.TaskSpec(type="noop"), f"{key}-{k}", args.deadline
            )
            accepted_at = accepted_at or _now_ms()
            task_ids.append(task_id)
            refused_total += refused

        def assigned() -> tuple[pb.Event, int] | None:
            first, to_dead = _first_assignment(survivors[0], task_ids, old.node_id)
            return (first, to_dead) if first is not None else None

        first, to_dead = _wait_for(
            assigned, args.deadline, "an assignment of the tasks submitted after the leader kill"
        )
        watch.join(args.deadline)
        elected_at = watch.seen_at
        if elected_at is None:
            raise MissedDeadline(f"no survivor named a new leader within {args.deadline:g}s")
    finally:
        watch.stop.set()
    return LeaderLoss(
        old_leader=old.node_id,
        new_leader=watch.new_leader,
        elected_ms=elected_at - killed_at,
        accepted_ms=accepted_at - killed_at,
        assigned_ms=_ms(first) - killed_at,
        assigned_node=first.node_id,
        refused_submits=refused_total,
        assigned_to_dead=to_dead,
    )


# -- worker loss --------------------------------------------------------------


@dataclass
class WorkerLoss:
    victim: str
    heard_before_kill_ms: float
    first_requeued_ms: float
    requeued_ms: float
    running_ms: float
    nodes_after: list[str]
    retry_detail: str

    @property
    def silence_ms(self) -> float:
        """From the victim's last heartbeat the leader received to the re-queue."""
        return self.heard_before_kill_ms + self.requeued_ms


def _pin_running(
    leader: CortexClient, victim: DevNode, others: Sequence[DevNode], count: int, timeout_s: float
) -> list[str]:
    """Starts `count` `sleep 60` tasks on the victim. Cordoning the other nodes
    places them there while leaving them free to move: a target_node
    constraint would keep them queued for the dead node for ever."""
    for node in others:
        leader.cordon_node(node.node_id)
    backoff = timedelta(milliseconds=RETRY_BACKOFF_MS)
    spec = pb.TaskSpec(command=["sleep", "60"], retry_policy=pb.RetryPolicy(backoff=backoff))
    key = f"worker-loss-{time.time_ns()}"
    task_ids = [leader.submit_task(spec, f"{key}-{k}").task.id for k in range(count)]

    def all_running() -> bool | None:
        tasks = [leader.get_task(task_id).task for task_id in task_ids]
        placed = all(
            t.state == pb.TASK_STATE_RUNNING and t.node_id == victim.node_id for t in tasks
        )
        return True if placed else None

    _wait_for(all_running, timeout_s, f"{count} sleep tasks running on {victim.node_id}")
    for node in others:
        leader.uncordon_node(node.node_id)
    return task_ids


def _last_heard(leader: CortexClient, node_id: str) -> float | None:
    """When the leader last received a heartbeat from the node, in wall-clock
    ms; None before the first."""
    asked_at = _now_ms()
    for node in leader.list_nodes().nodes:
        if node.id == node_id and node.HasField("resources"):
            return asked_at - node.report_age.ToMilliseconds()
    return None


def _wait_steady(
    client: CortexClient, victim: DevNode, leader_seen: float, args: argparse.Namespace
) -> None:
    """Waits until the leader hears the victim's heartbeats and is past the
    full failure timeout a new leader waits before judging any node."""
    term = client.get_cluster_status().term
    fresh_ms = 2 * args.heartbeat_interval * 1000

    def heartbeating() -> bool | None:
        heard = _last_heard(client, victim.node_id)
        return True if heard is not None and _now_ms() - heard < fresh_ms else None

    _wait_for(heartbeating, args.deadline, f"heartbeats from {victim.node_id} at the leader")
    remaining = leader_seen + args.failure_timeout + SUPERVISOR_INTERVAL_S - time.monotonic()
    time.sleep(max(0.0, remaining))
    status = client.get_cluster_status()
    if status.raft_role != pb.RAFT_ROLE_LEADER or status.term != term:
        raise LeadershipChanged(
            f"leadership moved while setting up (now {status.leader_id or 'none'}, "
            f"term {status.term})"
        )


def measure_worker_loss(cluster: LiveCluster, args: argparse.Namespace) -> WorkerLoss:
    """Kills a follower running sleep tasks and waits until every task was
    retried and then started again on another node."""
    leader = leader_index(cluster.clients)
    leader_seen = time.monotonic()
    victim_index = cluster.others(leader)[0]
    victim = cluster.nodes[victim_index]
    others = [cluster.nodes[i] for i in cluster.others(victim_index)]
    client = cluster.clients[leader]
    task_ids = _pin_running(client, victim, others, args.tasks, args.deadline)
    _wait_steady(client, victim, leader_seen, args)
    killed_at = _kill9(victim)
    # Asked after the kill, so no heartbeat can arrive in between.
    heard_at = _last_heard(client, victim.node_id) or killed_at

    retried: dict[str, pb.Event] = {}
    restarted: dict[str, pb.Event] = {}

    def progress(want: dict[str, pb.Event]) -> bool | None:
        for task_id in task_ids:
            if task_id in retried and task_id in restarted:
                continue
            for event in client.get_task(task_id, include_events=True).events:
                if event.type == pb.EVENT_TYPE_RETRIED:
                    retried.setdefault(task_id, event)
                elif event.type == pb.EVENT_TYPE_STARTED and event.attempt > 1:
                    restarted.setdefault(task_id, event)
        return True if len(want) == len(task_ids) else None

    _wait_for(
        lambda: progress(retried),
        args.failure_timeout + args.deadline,
        f"re-queueing of the {len(task_ids)} tasks of the killed {victim.node_id}",
    )
    _wait_for(
        lambda: progress(restarted),
        args.deadline,
        f"the {len(task_ids)} re-queued tasks running again",
    )
    requeue_ts = [_ms(e) for e in retried.values()]
    return WorkerLoss(
        victim=victim.node_id,
        heard_before_kill_ms=killed_at - heard_at,
        first_requeued_ms=min(requeue_ts) - killed_at,
        requeued_ms=max(requeue_ts) - killed_at,
        running_ms=max(_ms(e) for e in restarted.values()) - killed_at,
        nodes_after=sorted({e.node_id for e in restarted.values()}),
        retry_detail=json.dumps(struct_dict(next(iter(retried.values())).detail), sort_keys=True),
    )


# -- report -------------------------------------------------------------------


def _spread(label: str, values: Sequence[float]) -> None:
    if not values:
        print(f"  {label:<46} no successful run")
        return
    low, mid, high = min(values), statistics.median(values), max(values)
    print(f"  {label:<46} {low:>7.0f} {mid:>7.0f} {high:>7.0f}")


def summarize(
    args: argparse.Namespace, leader_runs: list[LeaderLoss], worker_runs: list[WorkerLoss]
) -> None:
    timeout_ms = args.failure_timeout * 1000
    print()
    print(f"{'summary, ms':<48} {'min':>7} {'median':>7} {'max':>7}")
    if args.measure in ("leader", "both"):
        print(f" leader loss ({len(leader_runs)} of {args.runs} runs)")
        _spread("kill -9 leader -> new leader seen", [r.elected_ms for r in leader_runs])
        _spread("kill -9 leader -> first submit accepted", [r.accepted_ms for r in leader_runs])
        _spread("kill -9 leader -> first new assignment", [r.assigned_ms for r in leader_runs])
        _spread(
            "  new leader seen -> first assignment",
            [r.assigned_ms - r.elected_ms for r in leader_runs],
        )
    if args.measure in ("worker", "both"):
        print(
            f" worker loss ({len(worker_runs)} of {args.runs} runs; failure timeout "
            f"{timeout_ms:.0f}, heartbeat every {args.heartbeat_interval * 1000:.0f})"
        )
        _spread("kill -9 worker -> all its tasks re-queued", [r.requeued_ms for r in worker_runs])
        _spread("  minus the failure timeout", [r.requeued_ms - timeout_ms for r in worker_runs])
        _spread("last heartbeat -> re-queued", [r.silence_ms for r in worker_runs])
        _spread("  minus the failure timeout", [r.silence_ms - timeout_ms for r in worker_runs])
        print(
            f"  (the leader checks for silence every {SUPERVISOR_INTERVAL_S * 1000:.0f} ms, "
            "so a re-queue follows the timeout by up to that)"
        )
        _spread(
            "kill -9 worker -> running again elsewhere",
            [r.running_ms for r in worker_runs],
        )
        _spread(
            f"  re-queued -> running ({RETRY_BACKOFF_MS} ms back-off)",
            [r.running_ms - r.requeued_ms for r in worker_runs],
        )


def _print_leader_run(run: int, loss: LeaderLoss, data_dir: Path | None) -> None:
    dead = f"; {loss.assigned_to_dead} assigned to the dead node" if loss.assigned_to_dead else ""
    print(
        f"  run {run}: killed {loss.old_leader}; {loss.new_leader} named leader after "
        f"{loss.elected_ms:.0f} ms; first submit accepted after {loss.accepted_ms:.0f} ms "
        f"({loss.refused_submits} refused); first assignment after {loss.assigned_ms:.0f} ms "
        f"(to {loss.assigned_node}){dead}"
    )
    if data_dir:
        print(f"    data and node logs kept in {data_dir}")


def _print_worker_run(run: int, loss: WorkerLoss, timeout_ms: float, data_dir: Path | None) -> None:
    spread = (
        f"{loss.requeued_ms:.0f} ms"
        if round(loss.first_requeued_ms) == round(loss.requeued_ms)
        else f"{loss.first_requeued_ms:.0f}-{loss.requeued_ms:.0f} ms"
    )
    print(
        f"  run {run}: killed {loss.victim} {loss.heard_before_kill_ms:.0f} ms after its last "
        f"heartbeat; all re-queued after {spread} (timeout {loss.requeued_ms - timeout_ms:+.0f}"
        f" ms; silence {loss.silence_ms:.0f} ms = timeout {loss.silence_ms - timeout_ms:+.0f} ms);"
        f" running again after {loss.running_ms:.0f} ms on {', '.join(loss.nodes_after)}"
    )
    if data_dir:
        print(f"    data and node logs kept in {data_dir}")


# -- main ---------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    load = os.getloadavg()[0]
    print(
        f"failover benchmark: {NODE_COUNT} nodes on 127.0.0.1, fresh cluster per run, "
        f"{args.runs} runs; failure timeout {args.failure_timeout:g} s, heartbeat interval "
        f"{args.heartbeat_interval:g} s; {os.cpu_count()} CPUs, host load {load:.1f}"
    )
    print(
        "times run from the kill (this process's wall clock) to task events "
        "(stamped by the nodes' wall clocks, same host)"
    )
    failures: list[str] = []
    leader_runs: list[LeaderLoss] = []
    worker_runs: list[WorkerLoss] = []
    if args.measure in ("leader", "both"):
        print()
        print(
            f"leader loss: kill -9 of the Raft leader, then {PROBE_TASKS} noop tasks submitted "
            "to the survivors (Unavailable retried)"
        )
        for i in range(1, args.runs + 1):
            data_dir = _new_data_dir()
            try:
                with fresh_cluster(args, data_dir) as cluster:
                    leader_runs.append(measure_leader_loss(cluster, args))
                _print_leader_run(i, leader_runs[-1], data_dir if args.keep_data else None)
            except CortexError as err:
                failures.append(f"leader loss run {i}: {err}")
                print(f"  run {i}: FAILED: {err}\n    node logs kept in {data_dir}")
    if args.measure in ("worker", "both"):
        print()
        print(
            f"worker loss: kill -9 of a follower running {args.tasks} `sleep 60` tasks "
            f"(retry back-off {RETRY_BACKOFF_MS} ms)"
        )
        for i in range(1, args.runs + 1):
            data_dir = _new_data_dir()
            try:
                with fresh_cluster(args, data_dir) as cluster:
                    worker_runs.append(measure_worker_loss(cluster, args))
                _print_worker_run(
                    i,
                    worker_runs[-1],
                    args.failure_timeout * 1000,
                    data_dir if args.keep_data else None,
                )
            except CortexError as err:
                failures.append(f"worker loss run {i}: {err}")
                print(f"  run {i}: FAILED: {err}\n    node logs kept in {data_dir}")
        if worker_runs:
            print(f"  retry detail of run 1: {worker_runs[0].retry_detail}")
    summarize(args, leader_runs, worker_runs)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (default 3)")
    parser.add_argument(
        "--measure",
        choices=["leader", "worker", "both"],
        default="both",
        help="which loss to measure (default both)",
    )
    parser.add_argument(
        "--failure-timeout",
        type=float,
        default=3.0,
        help="node setting: seconds of silence before a node is offline (default 3)",
    )
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=0.5,
        help="node setting: seconds between heartbeats (default 0.5)",
    )
    parser.add_argument(
        "--tasks", type=int, default=3, help="sleep tasks on the killed worker (default 3)"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        help="seconds each awaited step may take before the run fails (default 30; "
        "re-queueing gets the failure timeout on top)",
    )
    add_cluster_arguments(parser, data_dir=False)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.tasks < 1:
        parser.error("--runs and --tasks must be at least 1")
    if args.failure_timeout <= 0 or args.heartbeat_interval <= 0 or args.deadline <= 0:
        parser.error("--failure-timeout, --heartbeat-interval and --deadline must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
