"""Workflow benchmark: a local 3-node cluster of real `cortex node start`
processes runs a fan-out/fan-in workflow of `noop` tasks (one root, N-2
parallel tasks, one join; 1,000 tasks by default) and reports the time from
submit to the workflow's end, split into phases, plus the submit latency.

    python scripts/bench_workflow.py --tasks 1000 --runs 3

Exits non-zero when a workflow does not complete, the join did not start
after every parallel task finished, or the nodes' digests differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _cluster import (
    add_cluster_arguments,
    free_base_port,
    leader_index,
    run_main,
    stop_and_clean,
    wait_all_active,
)
from google.protobuf.timestamp_pb2 import Timestamp

from cortex.api.client import CortexClient
from cortex.cli.dev import start_cluster, wait_ready
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb
from cortex.workflows.definition import parse_definition

NODE_COUNT = 3


@dataclass
class Run:
    tasks: int
    submit_ms: float
    total_s: float
    root_done_ms: int
    fan_first_start_ms: int
    fan_last_finish_ms: int
    join_start_ms: int
    join_finish_ms: int
    nodes: dict[str, int]
    ok: bool
    problem: str = ""


def definition(tasks: int) -> dict[str, object]:
    width = tasks - 2
    fan = {f"t{i:05d}": {"type": "noop", "dependsOn": ["root"]} for i in range(width)}
    return {
        "name": f"bench-fan-{tasks}",
        "tasks": {
            "root": {"type": "noop"},
            **fan,
            "join": {"type": "noop", "dependsOn": list(fan)},
        },
    }


def _ms(stamp: Timestamp) -> int:
    """Milliseconds since the epoch; 0 when unset (as the old fields were)."""
    return int(stamp.ToMilliseconds())


def run_once(client: CortexClient, tasks: int, timeout_s: float) -> Run:
    text = json.dumps(definition(tasks))
    t0 = time.perf_counter()
    start_ms = int(time.time() * 1000)
    reply = client.submit_workflow(text, pb.DEFINITION_FORMAT_JSON)
    submit_ms = (time.perf_counter() - t0) * 1000
    deadline = time.monotonic() + timeout_s
    workflow = client.get_workflow(reply.workflow_id).workflow
    while workflow.state == pb.WORKFLOW_STATE_RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)
        workflow = client.get_workflow(reply.workflow_id).workflow
    total_s = time.perf_counter() - t0
    by_key: dict[str, pb.WorkflowTask] = {t.key: t for t in workflow.tasks}
    fan = [t for key, t in by_key.items() if key not in ("root", "join")]
    nodes: dict[str, int] = {}
    for task in fan:
        nodes[task.node_id] = nodes.get(task.node_id, 0) + 1
    root, join = by_key["root"], by_key["join"]
    run = Run(
        tasks=len(workflow.tasks),
        submit_ms=submit_ms,
        total_s=total_s,
        root_done_ms=_ms(root.finish_time) - start_ms,
        fan_first_start_ms=min(_ms(t.start_time) for t in fan) - start_ms if fan else 0,
        fan_last_finish_ms=max(_ms(t.finish_time) for t in fan) - start_ms if fan else 0,
        join_start_ms=_ms(join.start_time) - start_ms,
        join_finish_ms=_ms(join.finish_time) - start_ms,
        nodes=nodes,
        ok=workflow.state == pb.WORKFLOW_STATE_COMPLETED,
    )
    if not run.ok:
        state = enum_name(pb.WorkflowState, workflow.state)
        run.problem = f"workflow ended {state}: {workflow.error or 'timed out'}"
    elif run.join_start_ms < run.fan_last_finish_ms:
        run.problem = "the join started before every parallel task finished"
    return run


def converged(clients: Sequence[CortexClient], timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        statuses = [c.get_cluster_status() for c in clients]
        if len({(s.state_digest, s.applied_index) for s in statuses}) == 1:
            return True
        time.sleep(0.2)
    return False


def report(runs: list[Run], validate_ms: float) -> None:
    print(f"\nfan-out/fan-in of {runs[0].tasks} noop tasks on {NODE_COUNT} nodes")
    print(f"  local validation of the definition: {validate_ms:.0f} ms")
    header = "  run  submit ms  root done  fan start  fan done  join start  join done  total s"
    print(header)
    for i, r in enumerate(runs, 1):
        print(
            f"  {i:>3}  {r.submit_ms:9.0f}  {r.root_done_ms:9d}  {r.fan_first_start_ms:9d}"
            f"  {r.fan_last_finish_ms:8d}  {r.join_start_ms:10d}  {r.join_finish_ms:9d}"
            f"  {r.total_s:7.2f}"
        )
    print("  (phase columns: ms after submit, from the replicated task timestamps)")
    totals = [r.total_s for r in runs]
    median = statistics.median(totals)
    print(
        f"  median time to run the workflow: {median:.2f} s"
        f" ({runs[0].tasks / median:.0f} tasks/s end to end)"
    )
    print(f"  parallel tasks per node (last run): {dict(sorted(runs[-1].nodes.items()))}")


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    parse_definition(json.dumps(definition(args.tasks)), "json")
    validate_ms = (time.perf_counter() - started) * 1000
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="cortex-bench-workflow-"))
    base = free_base_port(NODE_COUNT)
    print(f"starting {NODE_COUNT} nodes (raft {base}+, grpc {base + 100}+) in {data_dir} ...")
    nodes = start_cluster(NODE_COUNT, base, data_dir)
    clients = [CortexClient(n.grpc, timeout_s=60) for n in nodes]
    problems: list[str] = []
    try:
        wait_ready(nodes, args.ready_timeout)
        wait_all_active(nodes, args.ready_timeout)
        # Submit to a follower, as a client that does not know the leader would.
        leader = leader_index(clients)
        client = clients[(leader + 1) % len(clients)]
        runs = []
        for number in range(args.runs):
            result = run_once(client, args.tasks, args.timeout)
            print(
                f"run {number + 1}: {result.total_s:.2f} s"
                + (f" ({result.problem})" if result.problem else "")
            )
            runs.append(result)
            if result.problem:
                problems.append(result.problem)
        if not converged(clients):
            problems.append("node digests did not converge")
        report(runs, validate_ms)
    finally:
        for c in clients:
            c.close()
        stop_and_clean(data_dir, args, failed=bool(problems))
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", type=int, default=1000, help="tasks in the workflow (default 1000)"
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="workflows run one after another (default 3)"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds one workflow may take"
    )
    add_cluster_arguments(parser)
    args = parser.parse_args(argv)
    if args.tasks < 3 or args.runs < 1:
        parser.error("--tasks must be at least 3 and --runs at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
