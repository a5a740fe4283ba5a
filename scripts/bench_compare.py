"""Before/after figures of `bench_core.py` on one machine. Runs it from two
checkouts in turn, in pairs whose order alternates (before first, then after
first, ...), each from its own checkout's directory with only that checkout
on PYTHONPATH, so each cluster's nodes run that checkout's code. A side may
also add `bench_core.py` arguments of its own (`--before-args`,
`--after-args`), to compare two settings of one checkout. Prints the
median, lowest and highest of each figure on both sides, the change of the
medians, and each pair's throughput ratio (after / before) with their
median and how many came out above 1.

    git worktree add /tmp/before HEAD~3
    python scripts/bench_compare.py --before /tmp/before --pairs 3 -- --tasks 5000 --concurrency 32
    python scripts/bench_compare.py --before-args=--no-route-writes --pairs 6 -- --tasks 3000

On a 2-core machine shared by three nodes, one run of `bench_core.py` can
differ from the next by 15% or more with nothing changed: one before/after
pair says little. The runs are as slow as `bench_core.py` itself, one after
another; `--settle` seconds pass between runs so one cluster's shutdown does
not slow the next.

Exits non-zero when a run fails (a task did not complete, digests differ)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
# The figures compared, and whether higher is better.
FIGURES = (
    ("tasks_per_s", True),
    ("cpu_ms_per_task", False),
    ("submit_to_running_p50_ms", False),
    ("submit_to_running_p99_ms", False),
    ("submit_rpc_p50_ms", False),
    ("tasks_per_entry", True),
)


@dataclass
class Side:
    name: str
    checkout: Path
    # bench_core.py arguments of this side only, after those of both.
    args: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)


def pair_order(pair: int, before: Side, after: Side) -> tuple[Side, Side]:
    """Before first in even pairs, after first in odd ones: a machine that
    slows down over the runs then weighs on both sides alike."""
    return (before, after) if pair % 2 == 0 else (after, before)


def run_once(side: Side, bench_args: Sequence[str]) -> dict[str, Any]:
    """One `bench_core.py --json` run from `side`'s checkout: its figures."""
    command = [sys.executable, "scripts/bench_core.py", "--json", *bench_args, *side.args]
    env = {**os.environ, "PYTHONPATH": str(side.checkout)}
    done = subprocess.run(
        command, cwd=side.checkout, env=env, capture_output=True, text=True, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise RuntimeError(
            f"{side.name}: bench_core.py printed no figures (exit {done.returncode})\n{tail}"
        )
    figures: dict[str, Any] = json.loads(lines[-1])
    if done.returncode != 0 or figures.get("problems"):
        raise RuntimeError(f"{side.name}: the run failed: {figures.get('problems')}")
    return figures


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """Median, lowest and highest."""
    return statistics.median(values), min(values), max(values)


def summary(before: Side, after: Side) -> list[dict[str, Any]]:
    """Per figure: both sides' median, lowest and highest, and the change
    of the medians in percent (positive: better)."""
    rows = []
    for name, higher_is_better in FIGURES:
        sides = []
        for side in (before, after):
            values = [run[name] for run in side.runs if run.get(name) is not None]
            sides.append(spread(values) if values else None)
        change = None
        if sides[0] is not None and sides[1] is not None and sides[0][0]:
            change = (sides[1][0] - sides[0][0]) / sides[0][0] * 100
            if not higher_is_better:
                change = -change
        rows.append(
            {"figure": name, "before": sides[0], "after": sides[1], "better_by_percent": change}
        )
    return rows


def pair_ratios(before: Side, after: Side) -> list[float]:
    """Each pair's throughput, after over before (the runs of a pair are
    next to each other, so the machine's drift weighs on both alike)."""
    return [
        a["tasks_per_s"] / b["tasks_per_s"]
        for b, a in zip(before.runs, after.runs, strict=False)
        if b.get("tasks_per_s") and a.get("tasks_per_s") is not None
    ]


def _cell(values: tuple[float, float, float] | None) -> str:
    if values is None:
        return "-"
    median, low, high = values
    return f"{median:g} ({low:g}-{high:g})"


def print_table(rows: list[dict[str, Any]], pairs: int, ratios: list[float]) -> None:
    print(f"\nmedian (lowest-highest) of {pairs} runs each")
    print(f"{'figure':28} {'before':>24} {'after':>24} {'better by':>10}")
    for row in rows:
        change = row["better_by_percent"]
        better = "-" if change is None else f"{change:+.0f}%"
        print(
            f"{row['figure']:28} {_cell(row['before']):>24} {_cell(row['after']):>24} {better:>10}"
        )
    if ratios:
        shown = " ".join(f"{r:.3f}" for r in ratios)
        print(
            f"throughput after/before by pair: {shown}; median {statistics.median(ratios):.3f},"
            f" {sum(r > 1 for r in ratios)} of {len(ratios)} above 1"
        )


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s [--before CHECKOUT] [options] -- [bench_core.py arguments]",
    )
    parser.add_argument(
        "--before", type=Path, default=HERE, help="checkout measured as before (default: this one)"
    )
    parser.add_argument(
        "--after", type=Path, default=HERE, help="checkout measured as after (default: this one)"
    )
    parser.add_argument(
        "--before-args", default="", help="bench_core.py arguments of the before side only"
    )
    parser.add_argument(
        "--after-args", default="", help="bench_core.py arguments of the after side only"
    )
    parser.add_argument("--pairs", type=int, default=3, help="before/after pairs (default 3)")
    parser.add_argument(
        "--settle", type=float, default=10.0, help="seconds between runs (default 10)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    for checkout in (args.before, args.after):
        if not (checkout / "scripts" / "bench_core.py").is_file():
            parser.error(f"{checkout} is not a Cortex checkout (no scripts/bench_core.py)")
    if args.before.resolve() == args.after.resolve() and args.before_args == args.after_args:
        parser.error(
            "both sides run the same: give --before another checkout, or --before-args/--after-args"
        )
    return args, argv[split + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    args, bench_args = parse_args(argv)
    before = Side("before", args.before.resolve(), shlex.split(args.before_args))
    after = Side("after", args.after.resolve(), shlex.split(args.after_args))
    first = True
    try:
        for pair in range(args.pairs):
            for side in pair_order(pair, before, after):
                if not first:
                    time.sleep(args.settle)
                first = False
                figures = run_once(side, bench_args)
                side.runs.append(figures)
                shown = ", ".join(f"{name} {figures.get(name)}" for name, _ in FIGURES)
                print(f"pair {pair + 1} {side.name}: {shown}", file=sys.stderr)
    except RuntimeError as err:
        print(f"FAIL: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    rows = summary(before, after)
    ratios = pair_ratios(before, after)
    if args.json:
        print(
            json.dumps(
                {
                    "pairs": args.pairs,
                    "bench_args": bench_args,
                    "before_args": before.args,
                    "after_args": after.args,
                    "figures": rows,
                    "throughput_ratios": ratios,
                    "throughput_ratio_median": statistics.median(ratios) if ratios else None,
                }
            )
        )
    else:
        print_table(rows, args.pairs, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
