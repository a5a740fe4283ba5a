"""Deterministic simulation campaigns: whole Cortex clusters in one process,
under seeded network, clock, disk and crash faults, checked by invariants.

    python scripts/simulate.py --seeds 1-200 --nodes 3 --mode safety --json
    python scripts/simulate.py --seed 17 --trace         # replay one seed, print its trace

Exits 0 only when no seed failed."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

HASH_SEED = "0"


def _pin_hash_seed() -> None:
    """Set iteration orders reach the Raft log: the hash seed must be fixed
    before Python starts, so the script runs itself again with it pinned."""
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, *sys.argv])


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        low, sep, high = part.partition("-")
        seeds.extend(range(int(low), int(high) + 1) if sep else [int(low)])
    return seeds


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from cortex.sim import PLANTED_BUGS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--seeds", help="seeds to run, e.g. 1-200 or 3,7,9-12")
    which.add_argument("--seed", type=int, help="one seed")
    parser.add_argument("--nodes", type=int, choices=(3, 5), default=3)
    parser.add_argument("--duration", type=float, default=60.0, help="simulated seconds (60)")
    parser.add_argument("--mode", choices=("safety", "liveness"), default="safety")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--trace", action="store_true", help="print the event trace (one seed)")
    parser.add_argument(
        "--unsafe-no-sync",
        action="store_true",
        help="storage acknowledges without syncing, so power cuts lose acknowledged writes",
    )
    parser.add_argument("--stop-on-failure", action="store_true")
    # Bugs planted for the checker's own tests.
    parser.add_argument("--planted-bug", choices=sorted(PLANTED_BUGS), help=argparse.SUPPRESS)
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="seeds run at once (CPU count)"
    )
    args = parser.parse_args(argv)
    try:
        args.seed_list = (
            parse_seeds(args.seeds) if args.seeds else [1 if args.seed is None else args.seed]
        )
    except ValueError:
        parser.error(
            f"--seeds takes numbers and ranges, e.g. 1-200 or 3,7,9-12: not {args.seeds!r}"
        )
    if args.duration <= 0:
        parser.error(
            f"--duration must be a positive number of simulated seconds, not {args.duration:g}"
        )
    if not args.seed_list:
        parser.error(f"--seeds {args.seeds!r} names no seed")
    if args.trace and len(args.seed_list) != 1:
        parser.error("--trace prints one seed's trace: give --seed")
    return args


def _results(configs: list[Any], jobs: int) -> Iterator[Any]:
    """Each seed's result, in seed order; seeds run in `jobs` processes (each
    seed is deterministic on its own, so they can run side by side)."""
    from cortex.sim import run_seed

    if jobs <= 1 or len(configs) == 1:
        for config in configs:
            yield run_seed(config)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(run_seed, configs)


def main(argv: Sequence[str] | None = None) -> int:
    _pin_hash_seed()
    args = parse_args(argv)
    from cortex.sim import SimConfig

    started = time.perf_counter()
    failed: list[dict[str, object]] = []
    hashes: dict[str, str] = {}
    simulated = 0.0
    faults = acknowledged = 0
    terms: list[int] = []
    configs = [
        SimConfig(
            seed=seed,
            nodes=args.nodes,
            duration_s=args.duration,
            mode=args.mode,
            unsafe_no_sync=args.unsafe_no_sync,
            keep_trace=args.trace,
            planted_bug=args.planted_bug,
        )
        for seed in args.seed_list
    ]
    for result in _results(configs, args.jobs):
        seed = result.seed
        simulated += result.simulated_s
        faults += result.faults
        acknowledged += result.acknowledged
        terms.append(result.stats["highest_term"])
        hashes[str(seed)] = result.trace_hash
        for failure in result.failures:
            failed.append({"seed": seed, **failure.to_json()})
        if args.trace:
            print("\n".join(result.trace))
        if not args.json:
            verdict = "FAILED" if result.failures else "ok"
            print(
                f"seed {seed}: {verdict} ({result.simulated_s:g} simulated s in {result.wall_s:g}s,"
                f" {result.faults} faults, {result.acknowledged} acknowledged,"
                f" term {result.stats['highest_term']}, trace {result.trace_hash[:16]})",
                flush=True,
            )
            for failure in result.failures:
                print(f"  {failure.invariant} at {failure.sim_time_s}s: {failure.detail}")
        if result.failures and args.stop_on_failure:
            break
    wall = time.perf_counter() - started
    if args.json:
        print(json.dumps({
            "seeds_run": len(hashes),
            "failed_seeds": failed,
            "simulated_seconds": round(simulated, 3),
            "wall_seconds": round(wall, 3),
            "trace_hashes": hashes,
            "faults_injected": faults,
            "acknowledged_submissions": acknowledged,
            "highest_term_median": statistics.median(terms) if terms else None,
            "highest_term_max": max(terms, default=None),
        }))  # fmt: skip
    else:
        print(
            f"{len(hashes)} seeds, {len({f['seed'] for f in failed})} failed;"
            f" {simulated:.0f} simulated s in {wall:.1f}s ({simulated / wall:.1f}x);"
            f" {faults} faults injected, {acknowledged} submissions acknowledged;"
            f" highest term per seed: median {statistics.median(terms) if terms else '-'},"
            f" max {max(terms, default='-')}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
