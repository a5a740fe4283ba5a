#!/usr/bin/env python3
"""What an idle cluster costs: a local 3-node cluster of real `cortex node
start` processes with nothing to do (no task, no schedule, no client but
this one reading metrics). After the nodes are active and have settled, it
measures each node's CPU over a window, in all and by kind of thread
(`cortex_thread_cpu_seconds`), with the threads' voluntary context
switches (each one a wake-up).

    python scripts/bench_idle.py
    python scripts/bench_idle.py --window 30 --json

On a busy machine every wake-up costs several times the work it was woken
for (`scripts/bench_handoff.py`), so the wake-ups per second say as much
as the CPU; both drift a lot from one run to the next here, so compare
runs made one after the other (`--runs`)."""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _cluster import (
    add_cluster_arguments,
    free_base_port,
    progress_to_stderr,
    run_main,
    stop_and_clean,
    wait_all_active,
)
from bench_core import _scrape, _thread_cpu, _thread_switches

from cortex.cli.dev import DevNode, start_cluster, wait_ready

NODE_COUNT = 3
# Kinds of thread the report names, the busiest first.
_THREADS_SHOWN = 12


def _snapshot(nodes: list[DevNode]) -> tuple[float, dict[str, float], dict[str, float]]:
    """The nodes' process CPU seconds in all, and their threads' CPU seconds
    and voluntary switches by kind of thread, summed over the nodes."""
    total = 0.0
    cpu: dict[str, float] = collections.defaultdict(float)
    wakes: dict[str, float] = collections.defaultdict(float)
    for node in nodes:
        times = psutil.Process(node.pid).cpu_times()
        total += times.user + times.system
        families = _scrape(node)
        for kind, seconds in _thread_cpu(families).items():
            cpu[kind] += seconds
        for (kind, switch), count in _thread_switches(families).items():
            if switch == "voluntary":
                wakes[kind] += count
    return total, cpu, wakes


def measure_window(nodes: list[DevNode], window_s: float) -> dict[str, Any]:
    started = time.monotonic()
    total0, cpu0, wakes0 = _snapshot(nodes)
    time.sleep(window_s)  # the window measured: nothing is asked of the nodes in it
    total1, cpu1, wakes1 = _snapshot(nodes)
    elapsed = time.monotonic() - started
    per_node = NODE_COUNT * elapsed
    threads = {
        kind: {
            "cpu_ms_per_s": round(1000 * (cpu1[kind] - cpu0.get(kind, 0.0)) / per_node, 2),
            "wakeups_per_s": round((wakes1.get(kind, 0.0) - wakes0.get(kind, 0.0)) / per_node, 1),
        }
        for kind in cpu1
    }
    return {
        "window_s": round(elapsed, 1),
        "cpu_percent_per_node": round(100 * (total1 - total0) / per_node, 2),
        "wakeups_per_s_per_node": round(
            sum(wakes1.values()) / per_node - sum(wakes0.values()) / per_node, 1
        ),
        "threads": dict(sorted(threads.items(), key=lambda item: -item[1]["cpu_ms_per_s"])),
    }


def report(windows: list[dict[str, Any]]) -> None:
    cpu = [w["cpu_percent_per_node"] for w in windows]
    wakes = [w["wakeups_per_s_per_node"] for w in windows]
    print(
        f"\nidle cluster: {NODE_COUNT} nodes, {len(windows)} window(s) of {windows[0]['window_s']} s"
    )
    print(
        f"  CPU per node                 {statistics.median(cpu):.2f}% of one CPU (median; {min(cpu):.2f}-{max(cpu):.2f})"
    )
    print(
        f"  wake-ups per node            {statistics.median(wakes):.1f}/s (Python threads' voluntary switches)"
    )
    print("  by kind of thread (last window), per node:")
    for kind, figures in list(windows[-1]["threads"].items())[:_THREADS_SHOWN]:
        print(
            f"    {kind:24s} {figures['cpu_ms_per_s']:7.2f} ms/s  {figures['wakeups_per_s']:6.1f} wake-ups/s"
        )


def run(args: argparse.Namespace) -> int:
    return progress_to_stderr(_run, args)


def _run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="cortex-idle-")).resolve()
    base_port = free_base_port(NODE_COUNT)
    print(f"starting {NODE_COUNT} nodes on 127.0.0.1 (raft {base_port}+), data in {data_dir}")
    nodes = start_cluster(NODE_COUNT, base_port, data_dir)
    try:
        wait_ready(nodes, timeout_s=args.ready_timeout)
        wait_all_active(nodes, timeout_s=args.ready_timeout)
        print(f"cluster active; settling {args.settle:.0f} s")
        time.sleep(args.settle)  # registration and first heartbeats out of the way
        windows = []
        for number in range(args.runs):
            windows.append(measure_window(nodes, args.window))
            print(
                f"  window {number + 1}: {windows[-1]['cpu_percent_per_node']:.2f}% of one CPU per node"
            )
        report(windows)
        if args.json:
            cpu = [w["cpu_percent_per_node"] for w in windows]
            print(
                json.dumps({"cpu_percent_per_node": statistics.median(cpu), "windows": windows}),
                file=sys.__stdout__,
            )
    finally:
        stop_and_clean(data_dir, args)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured (default 20)")
    parser.add_argument("--runs", type=int, default=1, help="windows measured one after the other")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds waited before measuring")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_cluster_arguments(parser)
    return run_main(run, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
