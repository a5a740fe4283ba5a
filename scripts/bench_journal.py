#!/usr/bin/env python3
"""What one append and its sync cost the Raft journal (`cortex.raft.journal`)
on this machine's disk, as a node pays it for every entry it acknowledges:
one entry of `--bytes` appended, then one `fdatasync`. Measured with the
file grown ahead of its records in zeros (what a node does) and without
(each append grows the file, and each sync also commits the new size to the
file system's journal), the two alternated in rounds so a disk that drifts
drifts for both. Prints the sync's median, mean and p99 for each.

    python scripts/bench_journal.py
    python scripts/bench_journal.py --entries 5000 --bytes 2000 --json"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from bench_core import percentile

from cortex.raft.journal import PREALLOCATE_BYTES, DurableJournal


def _fault(what: str, err: BaseException) -> NoReturn:
    raise RuntimeError(f"{what}: {err}")


def _syncs(directory: str, entries: int, size: int, preallocate: int) -> list[float]:
    """Seconds of each sync of `entries` appends of `size` bytes."""
    journal = DurableJournal(directory, on_fault=_fault)
    journal.preallocate_bytes = preallocate
    command = b"x" * size
    seconds = []
    try:
        for index in range(1, entries + 1):
            journal.add(command, index, 1)
            began = time.perf_counter()
            journal.sync()
            seconds.append(time.perf_counter() - began)
    finally:
        journal._destroy()
    return seconds


def measure(entries: int, size: int, rounds: int, where: str | None) -> dict[str, Any]:
    kinds = {"grown_ahead": PREALLOCATE_BYTES, "grown_by_each_append": 0}
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(rounds):
        for kind, preallocate in kinds.items():
            directory = tempfile.mkdtemp(prefix="bench-journal-", dir=where)
            try:
                seconds[kind] += _syncs(directory, entries // rounds, size, preallocate)
            finally:
                shutil.rmtree(directory, ignore_errors=True)
    report: dict[str, Any] = {"entries": entries, "bytes": size, "rounds": rounds}
    for kind, values in seconds.items():
        micros = sorted(value * 1e6 for value in values)
        report[kind] = {
            "sync_median_us": round(statistics.median(micros)),
            "sync_mean_us": round(statistics.mean(micros)),
            "sync_p99_us": round(percentile(micros, 99)),
        }
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=4000, help="appends per kind")
    parser.add_argument("--bytes", type=int, default=1000, help="bytes of each entry")
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two kinds")
    parser.add_argument("--dir", help="where the journals go (default: the temp dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    report = measure(args.entries, args.bytes, args.rounds, args.dir)
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"journal: {args.entries} appends of {args.bytes} bytes, each synced")
    for kind in ("grown_ahead", "grown_by_each_append"):
        figures = report[kind]
        print(
            f"  {kind.replace('_', ' '):22} sync median {figures['sync_median_us']:5} us"
            f"  mean {figures['sync_mean_us']:5} us  p99 {figures['sync_p99_us']:6} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
