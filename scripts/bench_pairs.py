#!/usr/bin/env python3
"""Paired runs of `scripts/bench_core.py`: two variants, A and B, run one
after the other in a random order, `--pairs` times. This machine's speed
moves from minute to minute (the reference work `bench_core` times before
and after every run moves by half), so a comparison made of runs far apart
measures the machine. A pair is run close together, and the median of the
pairs' ratios is the figure to quote.

A variant is a set of extra `bench_core` arguments (`--a-args`, `--b-args`)
and a tree whose code it runs (`--a-tree`, `--b-tree`: a checkout, e.g.
one made with `git worktree add /tmp/old <commit>`; its own
`scripts/bench_core.py` runs with the tree first on PYTHONPATH, so its
nodes run its code). Everything after `--` goes to both.

    python scripts/bench_pairs.py --pairs 6 --a-args=--no-route-writes -- --tasks 3000
    python scripts/bench_pairs.py --pairs 4 --a-tree /tmp/old -- --tasks 1000 --concurrency 1

Prints each run's figures and each pair's B/A throughput ratio, then the
median ratio, how many pairs came out above 1, and each variant's medians;
`--json` prints them as one JSON object instead."""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
FIGURES = (
    "tasks_per_s",
    "cpu_ms_per_task",
    "submit_to_running_p50_ms",
    "submit_to_running_p99_ms",
)


def _run(tree: Path, extra: list[str], common: list[str]) -> dict[str, Any]:
    """One `bench_core.py --json` run of `tree`'s code; its JSON object."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    command = [sys.executable, str(tree / "scripts" / "bench_core.py"), *common, *extra, "--json"]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{shlex.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def _line(pair: int, side: str, figures: dict[str, Any]) -> str:
    shown = " ".join(f"{name}={figures.get(name)}" for name in FIGURES)
    return (
        f"pair {pair} {side}: {shown} digests_equal={figures.get('digests_equal')}"
        f" reference_ms={figures.get('reference_ms')}"
    )


def _medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        name: statistics.median(float(r[name]) for r in runs if r.get(name) is not None)
        for name in FIGURES
        if any(r.get(name) is not None for r in runs)
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=6, help="pairs to run (default 6)")
    parser.add_argument("--a-args", default="", help="extra bench_core arguments of A (one string)")
    parser.add_argument("--b-args", default="", help="extra bench_core arguments of B (one string)")
    parser.add_argument("--a-tree", type=Path, default=HERE, help="checkout A runs (default this)")
    parser.add_argument("--b-tree", type=Path, default=HERE, help="checkout B runs (default this)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the pairs' order")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("common", nargs=argparse.REMAINDER, help="-- then bench_core arguments")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    common = args.common[1:] if args.common[:1] == ["--"] else args.common
    sides = {
        "A": (args.a_tree.resolve(), shlex.split(args.a_args)),
        "B": (args.b_tree.resolve(), shlex.split(args.b_args)),
    }
    for side, (tree, _) in sides.items():
        if not (tree / "scripts" / "bench_core.py").is_file():
            parser.error(f"--{side.lower()}-tree {tree} has no scripts/bench_core.py")
    order = random.Random(args.seed)
    runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    ratios: list[float] = []
    for pair in range(args.pairs):
        first, second = order.sample(["A", "B"], 2)
        got = {side: _run(*sides[side], common) for side in (first, second)}
        for side in "AB":
            runs[side].append(got[side])
            if not args.json:
                print(_line(pair, side, got[side]), flush=True)
        ratios.append(got["B"]["tasks_per_s"] / got["A"]["tasks_per_s"])
        if not args.json:
            print(f"pair {pair}: B/A {ratios[-1]:.3f} ({first} ran first)", flush=True)
    summary = {
        "pairs": len(ratios),
        "ratio_median": statistics.median(ratios),
        "ratios_above_1": sum(r > 1 for r in ratios),
        "ratios": [round(r, 4) for r in ratios],
        "digests_equal": all(r.get("digests_equal") for side in runs.values() for r in side),
        "a": {"tree": str(sides["A"][0]), "args": sides["A"][1], "medians": _medians(runs["A"])},
        "b": {"tree": str(sides["B"][0]), "args": sides["B"][1], "medians": _medians(runs["B"])},
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"throughput B/A: median {summary['ratio_median']:.3f},"
        f" {summary['ratios_above_1']} of {summary['pairs']} pairs above 1;"
        f" digests equal in every run: {summary['digests_equal']}"
    )
    for side in "AB":
        shown = ", ".join(f"{name} {value:g}" for name, value in _medians(runs[side]).items())
        print(f"  {side} medians: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
