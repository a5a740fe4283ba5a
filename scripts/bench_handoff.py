#!/usr/bin/env python3
"""What this machine charges for the moves a node makes around every task,
with nothing of Cortex in them: handing work from one thread to another and
back, a SQLite point read alone and beside a thread running Python (the
read releases the GIL and must win it back), writing and syncing a 4 KB
page, and a small piece of work in a loop and after the thread slept (a
node's threads sleep between messages, and wake to cold caches). A node hands each task between threads several times (the API's pool,
the proposer, the Raft loop, the agent's loop, its steps and the attempt's
thread: `cortex_thread_context_switches_total`, which `bench_core.py`
reports per task); these figures say what each such move costs here, so
per-task CPU can be read against the machine it ran on.

    python scripts/bench_handoff.py
    python scripts/bench_handoff.py --rounds 50000 --json"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import queue
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench_core import percentile

# Rows of the table the point reads look up.
_ROWS = 100_000
_PAGE = b"x" * 4096


def _spent(work: Callable[[], object]) -> tuple[float, float]:
    """The process CPU seconds and wall seconds `work` took."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def handoff(rounds: int) -> dict[str, float]:
    """A thread hands an item to another, which hands it back: two hand-offs
    a round, each waking a thread that waits with nothing to do."""
    there: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    back: queue.SimpleQueue[int] = queue.SimpleQueue()

    def echo() -> None:
        while (item := there.get()) is not None:
            back.put(item)

    echoer = threading.Thread(target=echo, daemon=True)
    echoer.start()

    def rally() -> None:
        for number in range(rounds):
            there.put(number)
            back.get()

    cpu, wall = _spent(rally)
    there.put(None)
    echoer.join()
    return {"cpu_us": cpu / (2 * rounds) * 1e6, "wall_us": wall / (2 * rounds) * 1e6}


def _database(directory: str) -> str:
    path = os.path.join(directory, "reads.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE rows (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO rows VALUES (?, ?)", ((f"key-{n}", f"value-{n}") for n in range(_ROWS))
    )
    conn.execute("COMMIT")
    conn.close()
    return path


def reads(path: str, count: int, beside_busy_thread: bool) -> float:
    """CPU microseconds of the reading thread per point read, alone or while
    another thread of the process runs Python without a pause."""
    conn = sqlite3.connect(path, check_same_thread=False)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(100))

    spinner = threading.Thread(target=spin, daemon=True)
    if beside_busy_thread:
        spinner.start()
    began = time.thread_time()
    for number in range(count):
        conn.execute("SELECT value FROM rows WHERE key = ?", (f"key-{number % _ROWS}",)).fetchone()
    spent = time.thread_time() - began
    stop.set()
    if beside_busy_thread:
        spinner.join()
    conn.close()
    return spent / count * 1e6


def page_writes(directory: str, count: int) -> dict[str, float]:
    """A 4 KB write alone, and followed by fdatasync (as a journal append)."""
    fd = os.open(os.path.join(directory, "pages"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        cpu, _ = _spent(lambda: [os.pwrite(fd, _PAGE, (n % 64) * 4096) for n in range(count)])
        synced: list[float] = []

        def write_and_sync() -> None:
            for number in range(count):
                os.pwrite(fd, _PAGE, (number % 64) * 4096)
                began = time.perf_counter()
                os.fdatasync(fd)
                synced.append(time.perf_counter() - began)

        sync_cpu, _ = _spent(write_and_sync)
    finally:
        os.close(fd)
    return {
        "write_cpu_us": cpu / count * 1e6,
        "write_sync_cpu_us": sync_cpu / count * 1e6,
        "sync_p50_ms": percentile(synced, 50) * 1000,
        "sync_p99_ms": percentile(synced, 99) * 1000,
    }


def cold_work(count: int, pause_s: float = 0.002) -> dict[str, float]:
    """The thread CPU one small piece of a node's work takes (reading a Raft
    acknowledgement from its pickle, as a node does for every one it
    receives) when done over and over, and when the thread slept `pause_s`
    before each: the machine's caches have gone cold meanwhile, as they have
    for a node's thread woken by the next message."""
    ack = pickle.dumps((b"k" * 32, {"type": "next_node_idx", "next_node_idx": 12345,
                                    "reset": False, "success": True}), 2)  # fmt: skip

    def costs(pause: float) -> list[float]:
        spent = []
        for _ in range(count):
            if pause:
                time.sleep(pause)
            began = time.thread_time()
            pickle.loads(ack)
            spent.append(time.thread_time() - began)
        return spent

    warm, cold = costs(0.0), costs(pause_s)
    return {"warm_p50_us": percentile(warm, 50) * 1e6, "cold_p50_us": percentile(cold, 50) * 1e6}


def measure(rounds: int, directory: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        path = _database(scratch)
        moved = handoff(rounds)
        alone = reads(path, rounds, beside_busy_thread=False)
        # Each of these waits for the GIL: fewer of them say as much.
        crowded = reads(path, max(100, rounds // 5), beside_busy_thread=True)
        written = page_writes(scratch, max(100, rounds // 100))
        woken = cold_work(max(100, rounds // 50))
    return {
        "rounds": rounds,
        "cpus": os.cpu_count() or 1,
        "handoff_cpu_us": round(moved["cpu_us"], 1),
        "handoff_wall_us": round(moved["wall_us"], 1),
        "sqlite_read_cpu_us": round(alone, 1),
        "sqlite_read_beside_busy_thread_cpu_us": round(crowded, 1),
        "page_write_cpu_us": round(written["write_cpu_us"], 1),
        "page_write_and_sync_cpu_us": round(written["write_sync_cpu_us"], 1),
        "sync_p50_ms": round(written["sync_p50_ms"], 3),
        "sync_p99_ms": round(written["sync_p99_ms"], 3),
        "small_work_cpu_us": round(woken["warm_p50_us"], 1),
        "small_work_after_sleep_cpu_us": round(woken["cold_p50_us"], 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=20000, help="hand-off rounds and reads (default 20000)"
    )
    parser.add_argument("--dir", help="where the scratch files go (default: the temp dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    figures = measure(args.rounds, args.dir)
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"what a node's moves cost on this machine ({figures['cpus']} CPUs)")
    print(
        f"  thread hand-off (queue, wake)   {figures['handoff_cpu_us']} us CPU,"
        f" {figures['handoff_wall_us']} us wall"
    )
    print(f"  SQLite point read               {figures['sqlite_read_cpu_us']} us CPU")
    print(
        "    beside a busy Python thread   "
        f"{figures['sqlite_read_beside_busy_thread_cpu_us']} us CPU (the GIL won back)"
    )
    print(f"  4 KB page write                 {figures['page_write_cpu_us']} us CPU")
    print(
        f"    and fdatasync                 {figures['page_write_and_sync_cpu_us']} us CPU,"
        f" sync p50 {figures['sync_p50_ms']} ms, p99 {figures['sync_p99_ms']} ms"
    )
    print(
        f"  unpickling an acknowledgement   {figures['small_work_cpu_us']} us CPU (p50) in a loop,"
        f" {figures['small_work_after_sleep_cpu_us']} us after 2 ms asleep (cold caches)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
