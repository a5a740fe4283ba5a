#!/usr/bin/env python3
"""What placing a task with its submission costs the leader
(`PlacementAtProposal.place`, on the path of every submission while nothing
is queued): a real state database on a temporary SQLite file holding
`--active` tasks assigned to the nodes, three nodes with measured resources,
and batches of one noop submission placed one after another. Prints the
time per placement and what the reads under it take, both as the leader
places (the nodes and their counts from the view its applying thread reads
after each batch, `cortex.scheduler.applied_view`) and reading them from
the database, and what the applying thread pays for the view per batch.
In a quiet process, as here, a read costs a fraction of what it does on a
busy node's request thread. No Raft, no network."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _state_log import NODES, StateLog

from cortex.membership.board import ResourceBoard
from cortex.scheduler.applied_view import AppliedView
from cortex.scheduler.at_proposal import PlacementAtProposal
from cortex.scheduler.loop import build_candidates
from cortex.scheduler.model import NodeResources
from cortex.scheduler.queue_watch import QueueWatch
from cortex.scheduler.reservations import Reservations
from cortex.spec import parse_task_spec
from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.queries import StateReader
from cortex.steps import SYSTEM_CLOCK

ASSIGN_CHUNK = 500


def _state(path: Path, active: int, spec: dict[str, Any]) -> None:
    log = StateLog(path)
    ids = [e.new_id() for _ in range(active)]
    for start in range(0, active, ASSIGN_CHUNK):
        chunk = ids[start : start + ASSIGN_CHUNK]
        log.apply(*(e.TaskSubmit(task_id, spec, None) for task_id in chunk))
        log.apply(
            e.TaskAssign(
                [
                    {"task_id": task_id, "node": NODES[k % len(NODES)], "attempt": 1}
                    for k, task_id in enumerate(chunk)
                ]
            )
        )
    log.close()


def _per_call_us(call: Callable[[], object], count: int) -> float:
    began = time.perf_counter()
    for _ in range(count):
        call()
    return (time.perf_counter() - began) / count * 1e6


def measure(active: int, placements: int, batch: int = 1, declared: bool = False) -> dict[str, Any]:
    spec = parse_task_spec({"type": "noop"}, 1 << 20, None).model_dump(mode="json")
    with tempfile.TemporaryDirectory(prefix="cortex-bench-placement-") as scratch:
        path = Path(scratch) / "state.db"
        _state(path, active, spec)
        reader = StateReader(str(path))
        board = ResourceBoard()
        for node in NODES:
            measured = NodeResources(
                cpu_cores=2.0, cpu_usage_percent=20.0,
                memory_total_mb=4096.0, memory_available_mb=3000.0,
                declared=frozenset({"memory_available_mb"}) if declared else frozenset(),
            )  # fmt: skip
            board.record(node, measured, {}, 0)

        machine = StateMachine(str(path))
        view = AppliedView(machine, lambda: True)
        index = machine.applied_index
        view.on_change(index, [])  # as after a batch applied on the leader

        def candidates() -> Any:
            return build_candidates(reader, board, lambda node: True, view)

        def from_database() -> Any:
            return build_candidates(reader, board, lambda node: True)

        batches = []
        for _ in range(placements):
            ids = [e.new_id() for _ in range(batch)]
            entries = [e.Entry.create(e.TaskSubmit(i, spec, None), node=NODES[0]) for i in ids]
            batches.append((ids, e.encode_batch(entries)))
        with_view = _place_all(reader, candidates, batches)
        without_view = _place_all(reader, from_database, batches)
        figures = {
            "active_tasks": active,
            "memory_declared": declared,
            "tasks_per_batch": batch,
            "placements": placements,
            "place_p50_us": round(with_view[len(with_view) // 2] * 1e6, 1),
            "place_mean_us": round(statistics.mean(with_view) * 1e6, 1),
            "place_reading_database_p50_us": round(without_view[len(without_view) // 2] * 1e6, 1),
            "view_read_per_batch_us": round(
                _per_call_us(lambda: view.on_change(index, []), placements), 1
            ),
            "build_candidates_us": round(_per_call_us(from_database, placements), 1),
            "active_counts_us": round(_per_call_us(reader.active_counts_by_node, placements), 1),
            "reserved_memory_us": round(
                _per_call_us(reader.reserved_memory_by_node, placements), 1
            ),
            "nodes_us": round(_per_call_us(reader.nodes, placements), 1),
        }
        reader.close()
        machine.close()
        return figures


def _place_all(
    reader: StateReader, candidates: Callable[[], Any], batches: list[tuple[list[str], bytes]]
) -> list[float]:
    """Each batch placed in turn, the seconds each placement took, sorted."""
    reservations = Reservations(time.monotonic)
    placer = PlacementAtProposal(
        NODES[0], reader, candidates, reservations, SYSTEM_CLOCK, QueueWatch()
    )
    times = []
    for ids, data in batches:
        began = time.perf_counter()
        placed = placer.place(data)
        times.append(time.perf_counter() - began)
        assert placed is not None, "nothing was placed"
        # As apply releases them: each batch's placements are the only ones held.
        reservations.release(ids)
    times.sort()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--active", type=int, nargs="+", default=[0, 200, 2000],
                        help="tasks assigned to the nodes (default: 0 200 2000)")  # fmt: skip
    parser.add_argument("--placements", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1, help="submissions per batch placed")
    parser.add_argument("--declared-memory", action="store_true",
                        help="the nodes declare their memory, so each placement also reads"
                        " the memory promised to their active tasks")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object per line")
    args = parser.parse_args()
    for active in args.active:
        figures = measure(active, args.placements, args.batch, args.declared_memory)
        if args.json:
            print(json.dumps(figures))
            continue
        print(
            f"{active:6d} active tasks, {args.batch} per batch"
            f"{', memory declared' if args.declared_memory else ''}:"
            f" place p50 {figures['place_p50_us']:7.1f} us"
            f" (mean {figures['place_mean_us']:.1f}; reading the database"
            f" {figures['place_reading_database_p50_us']:.1f});"
            f" the view's read per applied batch {figures['view_read_per_batch_us']:.1f} us;"
            f" build_candidates from the database {figures['build_candidates_us']:.1f} us"
            f" [active counts {figures['active_counts_us']:.1f},"
            f" reserved memory {figures['reserved_memory_us']:.1f} (read only when a node"
            f" declares its memory), nodes {figures['nodes_us']:.1f}]"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
