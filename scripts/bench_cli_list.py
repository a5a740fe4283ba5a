#!/usr/bin/env python3
"""What listing every task of a large workflow costs the `cortex` command:
a local 3-node cluster of real `cortex node start` processes runs one
workflow of `--tasks` noop tasks to its end, then `cortex task list
--workflow ID --all` runs as a separate process in each output format
(table, wide, json, name), `--runs` times, alternating. Prints, per format,
the median wall time and CPU seconds of the command's process and what it
printed; and the wall time of one page of 100 tasks read by a client in
this process (the node's share of each page, with the network and the
protobuf decoding).

    python scripts/bench_cli_list.py --tasks 10000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _cluster import (
    add_cluster_arguments,
    free_base_port,
    run_main,
    stop_and_clean,
    wait_all_active,
)

from cortex.api.client import CortexClient
from cortex.cli.dev import start_cluster, wait_ready
from cortex.v1 import cortex_pb2 as pb

NODE_COUNT = 3
FORMATS = ("table", "wide", "json", "name")
DONE = (pb.WORKFLOW_STATE_COMPLETED, pb.WORKFLOW_STATE_FAILED, pb.WORKFLOW_STATE_CANCELLED)


def run_workflow(client: CortexClient, tasks: int, timeout_s: float) -> str:
    definition = {"name": "listed", "tasks": {f"t{i:06d}": {"type": "noop"} for i in range(tasks)}}
    workflow_id = client.submit_workflow(
        json.dumps(definition), pb.DEFINITION_FORMAT_JSON
    ).workflow_id
    deadline = time.monotonic() + timeout_s
    while client.get_workflow(workflow_id).workflow.state not in DONE:
        if time.monotonic() > deadline:
            raise SystemExit(f"workflow {workflow_id} did not end within {timeout_s:.0f}s")
        time.sleep(0.5)
    return workflow_id


def list_once(node: str, workflow_id: str, fmt: str) -> tuple[float, float, int]:
    """One `cortex task list --all` process: wall seconds, CPU seconds, bytes printed."""
    command = [sys.executable, "-m", "cortex.cli.main", "--node", node, "task", "list"]
    command += ["--workflow", workflow_id, "--all"] + ([] if fmt == "table" else ["-o", fmt])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(command)}` failed: {done.stderr.decode()[-500:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, len(done.stdout)


def page_walls(client: CortexClient, workflow_id: str) -> list[float]:
    """Wall seconds of each page of 100 of the workflow's tasks, read in turn."""
    walls = []
    token = ""
    while True:
        started = time.perf_counter()
        page = client.list_tasks(workflow_id=workflow_id, page_size=100, page_token=token)
        walls.append(time.perf_counter() - started)
        token = page.next_page_token
        if not token:
            return walls


def run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="cortex-bench-cli-list-"))
    base = free_base_port(NODE_COUNT)
    print(f"starting {NODE_COUNT} nodes (raft {base}+, grpc {base + 100}+) in {data_dir} ...")
    nodes = start_cluster(NODE_COUNT, base, data_dir)
    figures: dict[str, dict[str, float]] = {}
    try:
        wait_ready(nodes, args.ready_timeout)
        wait_all_active(nodes, args.ready_timeout)
        node = nodes[-1].grpc
        with CortexClient(node, timeout_s=120) as client:
            started = time.perf_counter()
            workflow_id = run_workflow(client, args.tasks, args.timeout)
            print(
                f"workflow of {args.tasks} noop tasks ran in {time.perf_counter() - started:.1f}s"
            )
            pages = [wall for _ in range(args.runs) for wall in page_walls(client, workflow_id)]
        measured: dict[str, list[tuple[float, float, int]]] = {fmt: [] for fmt in FORMATS}
        for number in range(args.runs):
            for fmt in FORMATS if number % 2 == 0 else FORMATS[::-1]:
                measured[fmt].append(list_once(node, workflow_id, fmt))
        print(
            f"\n`cortex task list --workflow ID --all`, {args.tasks} tasks,"
            f" median of {args.runs} runs (a process each):"
        )
        for fmt, runs in measured.items():
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            printed = statistics.median(r[2] for r in runs)
            figures[fmt] = {"wall_s": wall, "cpu_s": cpu, "bytes": printed}
            print(f"  -o {fmt:6}  {wall:6.2f} s wall  {cpu:6.2f} s CPU  {printed / 1e6:6.2f} MB")
        page_ms = sorted(wall * 1000 for wall in pages)
        figures["page_of_100"] = {
            "p50_ms": statistics.median(page_ms),
            "p99_ms": page_ms[min(len(page_ms) - 1, int(len(page_ms) * 0.99))],
        }
        print(
            f"  one page of 100 (client in this process): p50"
            f" {figures['page_of_100']['p50_ms']:.1f} ms,"
            f" p99 {figures['page_of_100']['p99_ms']:.1f} ms ({len(page_ms)} pages)"
        )
    finally:
        stop_and_clean(data_dir, args)
    if args.json:
        print(json.dumps(figures))
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks in the workflow")
    parser.add_argument("--runs", type=int, default=3, help="runs of each format (default 3)")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds the workflow may take to end"
    )
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    add_cluster_arguments(parser)
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.runs < 1:
        parser.error("--tasks and --runs must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
