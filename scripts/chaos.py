#!/usr/bin/env python3
"""Bounded chaos run on a local 3-node cluster of real `cortex node start`
processes. While shell tasks are submitted steadily (each appends its id,
attempt and node to a shared file), a random node (the leader half the
time) is `kill -9`ed or frozen with SIGSTOP past the failure timeout, then
brought back, for --rounds rounds. With --partitions (root, iproute2 and
iptables) each node runs on a host of its own (a network namespace,
`scripts/_netns.py`), and half the rounds cut the network instead: the
node cut off from the others, or only its link to one other node, for up
to a few seconds past the failure timeout, then joined again.

Afterwards it waits until every task has ended and checks:

- every submitted task exists once and ended `completed` (with enough retries);
- no task has more than one `completed` event, on any node;
- every node has the same state digest at the same applied index;
- every completed task ran at least once (runs beyond that are the
  at-least-once re-executions that failures allow; their count is printed).

    python scripts/chaos.py --rounds 6 --seed 1
    python scripts/chaos.py --rounds 12 --partitions

Exits 1 when an invariant fails, 2 on a Cortex error.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from _cluster import add_cluster_arguments, free_base_port, leader_index, run_main
from _netns import Hosts, link_cuts_unavailable, netns_unavailable

from cortex.api.client import TERMINAL_STATES, CortexClient
from cortex.errors import CortexError, Unavailable
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

NODES = 3
TERMINAL = TERMINAL_STATES


@dataclass
class ChaosNode:
    node_id: str
    raft: str
    grpc: str
    http: str
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None
    # On a host of its own (--partitions): what runs it there, and where
    # its API listens (clients reach it through a relay at `grpc`).
    wrapper: list[str] = field(default_factory=list)
    grpc_listen: str = ""

    def start(self, peers: str, env: dict[str, str]) -> None:
        log = open(self.data_dir / "node.log", "ab")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            [*self.wrapper, sys.executable, "-P", "-m", "cortex.cli.main", "node", "start",
             "--node-id", self.node_id, "--data-dir", str(self.data_dir), "--raft", self.raft,
             "--grpc", self.grpc_listen or self.grpc, "--http", self.http, "--peers", peers],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        log.close()

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.process is not None
        self.process.wait(10)


@dataclass
class Workload:
    nodes: list[ChaosNode]
    marker: Path
    submitted: list[str] = field(default_factory=list)
    refused: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, rate_per_s: float) -> None:
        number = 0
        while not self.stop.is_set():
            number += 1
            self.submitted.append(self._submit(number))
            self.stop.wait(1 / rate_per_s)

    def _submit(self, number: int) -> str:
        """Retries with the same idempotency key until some node takes it."""
        spec = pb.TaskSpec(
            shell=f'echo "$CORTEX_TASK_ID $CORTEX_ATTEMPT $CORTEX_NODE_ID" >> {self.marker}; '
            f"sleep 0.{random.randint(1, 9)}",
            retry_policy=pb.RetryPolicy(max_retries=20, backoff=timedelta(milliseconds=200)),
        )
        while True:
            node = random.choice(self.nodes)
            try:
                with CortexClient(node.grpc, timeout_s=5, tls=False) as client:
                    return client.submit_task(spec, idempotency_key=f"chaos-{number}").task.id
            except Unavailable:
                self.refused += 1
                time.sleep(0.05)


def _wait(check, timeout_s: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except CortexError:
            pass
        time.sleep(0.2)
    raise CortexError(f"timed out after {timeout_s:g}s waiting for {what}")


def _status(node: ChaosNode) -> pb.GetClusterStatusResponse:
    with CortexClient(node.grpc, timeout_s=3, tls=False) as client:
        return client.get_cluster_status()


def _all_active(nodes: list[ChaosNode]) -> bool:
    for node in nodes:
        status = _status(node)
        active = [n for n in status.nodes if n.status == pb.NODE_STATUS_ACTIVE]
        if not status.leader_raft_address or len(active) < len(nodes):
            return False
    return True


def _leader(nodes: list[ChaosNode]) -> int:
    clients = [CortexClient(n.grpc, timeout_s=3, tls=False) for n in nodes]
    try:
        return leader_index(clients)
    finally:
        for client in clients:
            client.close()


def _completions(node: ChaosNode) -> Counter[str]:
    conn = sqlite3.connect(f"file:{node.data_dir / 'state.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT task_id FROM task_events WHERE event = 'completed'")
        return Counter(row[0] for row in rows)
    finally:
        conn.close()


def _loopback_nodes(root: Path) -> list[ChaosNode]:
    base = free_base_port(NODES)
    return [
        ChaosNode(
            f"node-{i + 1}",
            f"127.0.0.1:{base + i}",
            f"127.0.0.1:{base + 100 + i}",
            f"127.0.0.1:{base + 200 + i}",
            root / f"node-{i + 1}",
        )  # fmt: skip
        for i in range(NODES)
    ]


def _hosted_nodes(root: Path, hosts: Hosts) -> list[ChaosNode]:
    """Node k on host k, its API reached through a relay."""
    nodes = []
    for k in range(1, NODES + 1):
        listen = f"{hosts.address(k)}:7100"
        nodes.append(
            ChaosNode(
                f"node-{k}",
                f"{hosts.address(k)}:7000",
                hosts.relay(k, listen),
                "127.0.0.1:7200",
                root / f"node-{k}",
                wrapper=hosts.wrapper(k),
                grpc_listen=listen,
            )
        )
    return nodes


def _cut(
    rng: random.Random, hosts: Hosts, nodes: list[ChaosNode], victim: ChaosNode, longest: float
) -> str:
    """Cuts the network around `victim` for a while (the node, or one of its
    links), then joins it again; says what it did."""
    k = nodes.index(victim) + 1
    cut_s = rng.uniform(1.0, longest)
    if rng.random() < 0.5:
        with hosts.cut_off(k):
            time.sleep(cut_s)
        return f"cut off for {cut_s:.1f}s"
    other = rng.choice([j for j in range(1, NODES + 1) if j != k])
    with hosts.link_cut(k, other):
        time.sleep(cut_s)
    return f"link to node-{other} cut for {cut_s:.1f}s"


def run(args: argparse.Namespace) -> int:
    if not args.partitions:
        return _run(args, None)
    missing = netns_unavailable() or link_cuts_unavailable()
    if missing:
        raise CortexError(f"--partitions cannot run here: {missing}")
    with Hosts(NODES) as hosts:
        return _run(args, hosts)


def _run(args: argparse.Namespace, hosts: Hosts | None) -> int:
    rng = random.Random(args.seed)
    root = Path(args.data_dir or tempfile.mkdtemp(prefix="cortex-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    nodes = _loopback_nodes(root) if hosts is None else _hosted_nodes(root, hosts)
    peers = ",".join(n.raft for n in nodes)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")},
        "CORTEX_SECRET": secrets.token_urlsafe(24),
        "CORTEX_FAILURE_TIMEOUT_S": str(args.failure_timeout),
        "CORTEX_HEARTBEAT_INTERVAL_S": "0.5",
        "CORTEX_SHUTDOWN_DRAIN_S": "0",
        "CORTEX_COMPACTION_MIN_ENTRIES": "200",
    }
    for node in nodes:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        node.start(peers, env)
    workload = Workload(nodes, root / "runs.log")
    submitter = threading.Thread(target=workload.run, args=(args.rate,), daemon=True)
    try:
        _wait(lambda: _all_active(nodes), args.ready_timeout, "the cluster")
        print(f"cluster up in {root}; {args.rounds} rounds of chaos, seed {args.seed}")
        submitter.start()
        started = time.monotonic()
        for round_number in range(1, args.rounds + 1):
            time.sleep(rng.uniform(1.0, 3.0))
            leader = _wait(lambda: _leader(nodes) + 1, 60, "a leader") - 1
            victim = nodes[leader] if rng.random() < 0.5 else rng.choice(nodes)
            role = "leader" if victim is nodes[leader] else "follower"
            if hosts is not None and rng.random() < 0.5:
                action = _cut(rng, hosts, nodes, victim, args.failure_timeout + 3)
            elif rng.random() < 0.7:
                victim.kill()
                down = rng.uniform(0.5, args.failure_timeout + 2)
                time.sleep(down)
                victim.start(peers, env)
                action = f"kill -9, restarted after {down:.1f}s"
            else:
                victim.signal(signal.SIGSTOP)
                frozen = rng.uniform(args.failure_timeout + 1, args.failure_timeout + 4)
                time.sleep(frozen)
                victim.signal(signal.SIGCONT)
                action = f"SIGSTOP for {frozen:.1f}s"
            _wait(lambda: _all_active(nodes), 90, "every node active again")
            print(f"  round {round_number}: {victim.node_id} ({role}) {action}; "
                  f"{len(workload.submitted)} tasks submitted so far")  # fmt: skip
        workload.stop.set()
        submitter.join(30)
        ids = list(workload.submitted)

        def all_ended() -> bool:
            with CortexClient(nodes[0].grpc, timeout_s=10, tls=False) as client:
                return all(client.get_task(t).task.state in TERMINAL for t in ids)

        _wait(all_ended, 180, f"all {len(ids)} tasks to end")
        statuses = _wait(
            lambda: (
                (s := [_status(n) for n in nodes])
                and len({(x.state_digest, x.applied_index) for x in s}) == 1
                and s
            ),
            90,
            "equal digests",
        )
        elapsed = time.monotonic() - started
        with CortexClient(nodes[0].grpc, timeout_s=10, tls=False) as client:
            states = Counter(enum_name(pb.TaskState, client.get_task(t).task.state) for t in ids)
        runs = Counter(line.split()[0] for line in workload.marker.read_text().splitlines())
        completions = [_completions(n) for n in nodes]
    finally:
        workload.stop.set()
        for node in nodes:
            if node.process is not None and node.process.poll() is None:
                node.signal(signal.SIGCONT)
                node.kill()

    problems = []
    if len(set(ids)) != len(ids):
        problems.append("an idempotency key produced two tasks")
    if states.get("completed", 0) != len(ids):
        problems.append(f"not every task completed: {dict(states)}")
    for node, counts in zip(nodes, completions, strict=True):
        twice = [t for t, c in counts.items() if c > 1]
        if twice:
            problems.append(f"{node.node_id}: {len(twice)} tasks completed more than once")
    never = [t for t in ids if runs[t] == 0]
    if never:
        problems.append(f"{len(never)} completed tasks never ran")
    reruns = sum(max(0, runs[t] - 1) for t in ids)
    print(f"{len(ids)} tasks over {elapsed:.0f}s ({workload.refused} submits refused while "
          f"no leader was known, retried with the same key)")  # fmt: skip
    print(f"  states: {dict(states)}")
    print(f"  runs: {sum(runs.values())} ({reruns} re-executions after failures)")
    print(f"  digest {statuses[0].state_digest[:16]} at applied index "
          f"{statuses[0].applied_index} on all {NODES} nodes")  # fmt: skip
    if problems:
        print("INVARIANTS FAILED:\n  " + "\n  ".join(problems))
        print(f"data kept in {root}")
        return 1
    print("all invariants held")
    if not args.keep_data and not args.data_dir:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="failures to inject (1-50)")
    parser.add_argument("--rate", type=float, default=20.0, help="tasks submitted per second")
    parser.add_argument("--failure-timeout", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--partitions",
        action="store_true",
        help="each node on a host of its own, and network cuts among the faults"
        " (root, iproute2, iptables)",
    )
    add_cluster_arguments(parser)
    args = parser.parse_args()
    if not 1 <= args.rounds <= 50:
        parser.error("--rounds must be between 1 and 50")
    random.seed(args.seed)
    sys.exit(run_main(run, args))


if __name__ == "__main__":
    main()
