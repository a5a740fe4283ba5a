#!/usr/bin/env python3
"""Times one scheduling round of the real placement stack on modelled data:
10,000 queued tasks over 100 nodes by default, with a mix of constraints.
Prints the round time and placements per second. Aim: <= 1 s per round."""

from __future__ import annotations

import argparse
import random
import statistics
import time

from cortex.scheduler import Candidate, GpuInfo, NodeResources, PendingTask, schedule_round
from cortex.spec import Constraints


def model_nodes(count: int, rng: random.Random) -> list[Candidate]:
    nodes = []
    for i in range(count):
        gpu = GpuInfo("gpu", 16000, 0, rng.uniform(0, 90)) if i % 10 == 0 else None
        nodes.append(
            Candidate(
                id=f"node-{i:03d}",
                max_tasks=rng.choice([8, 16, 32, 64, 128]),
                active_tasks=rng.randint(0, 8),
                labels={"zone": rng.choice("abc"), **({"ssd": ""} if i % 3 == 0 else {})},
                resources=NodeResources(
                    cpu_cores=rng.choice([4, 8, 16, 32]),
                    cpu_usage_percent=rng.uniform(0, 100),
                    memory_total_mb=32_000,
                    memory_available_mb=rng.uniform(500, 32_000),
                    disk_total_gb=500,
                    disk_available_gb=rng.uniform(1, 500),
                    disk_io_util_percent=rng.uniform(0, 100),
                    network_bandwidth_mbps=1000,
                    network_throughput_mbps=rng.uniform(0, 1000),
                    gpu=gpu,
                ),
            )
        )
    return nodes


def model_tasks(count: int, rng: random.Random) -> list[PendingTask]:
    shapes = [
        Constraints(),
        Constraints(node_labels=["zone=a"]),
        Constraints(min_memory_mb=2048),
        Constraints(requires_gpu=True),
        Constraints(node_labels=["ssd"], min_disk_gb=50),
        Constraints(max_parallel_per_node=4),
        Constraints(forbidden_nodes=["node-000", "node-001"]),
    ]
    return [
        PendingTask(
            id=f"task-{i:05d}",
            priority=rng.randint(0, 10),
            created_at=i,
            constraints=rng.choice(shapes),
        )
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    nodes = model_nodes(args.nodes, rng)
    tasks = model_tasks(args.tasks, rng)
    times, placed = [], 0
    for _ in range(args.rounds):
        started = time.perf_counter()
        result = schedule_round(tasks, nodes)
        times.append(time.perf_counter() - started)
        placed = len(result.placements)
    best, median = min(times), statistics.median(times)
    print(f"round of {args.tasks} queued tasks over {args.nodes} nodes ({args.rounds} runs)")
    print(f"  placed {placed}, left queued with reasons {args.tasks - placed}")
    print(
        f"  round time: median {median * 1000:.0f} ms, best {best * 1000:.0f} ms   (aim <= 1000 ms)"
    )
    print(f"  placements/s: {placed / median:,.0f}")


if __name__ == "__main__":
    main()
