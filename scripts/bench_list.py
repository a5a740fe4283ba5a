"""What a node spends serving one page of `task list`, without the cluster
or the network: the query (rows and the total), the task views made from
the rows, and the page's messages built and serialized, as `ListTasks`
does. On a state database of finished noop tasks built here through the
state machine (`--tasks`), or on a node's own (`--db`, e.g. one kept by
`bench_scale.py --keep-data`). Prints the thread CPU of the best and the
median of `--samples` pages for the default listing, the listings by state
and by node, those of a node's few failed and running tasks among its many
completed (one task in `FAILING` fails, `RUNNING` are left running), and
those of the tasks created in the newest tenth of the time (in either
order, and a node's completed ones); and the best of each part (the
listing's query with its views, the views alone, the messages). With
`--workflows N`, also pages of `workflow list`: all, running, and the
newest tenth. The best is the figure to compare (the median moves with
whatever else the machine does)."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _state_log import NODES, StateLog

from cortex.api.convert import task_to_proto
from cortex.api.workflow_convert import workflow_to_proto
from cortex.executors.base import ExecutionResult
from cortex.requests import DEFAULT_PAGE_SIZE
from cortex.state import entries as e
from cortex.state.paging import CreatedWindow
from cortex.state.queries import StateReader, TaskPage, TaskView
from cortex.state.spec_rules import check_task_spec
from cortex.v1 import cortex_pb2 as pb
from cortex.workflows.definition import parse_definition
from cortex.workflows.operations import submit_payloads

CHUNK = 500
SPEC = check_task_spec({"type": "noop"})
RESULT = ExecutionResult(exit_code=0).to_dict()
FAILED = ExecutionResult(exit_code=1).to_dict()
# One task in this many fails; this many are left running (on the first node).
FAILING = 1_000
RUNNING = 10
TRACEPARENT = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"


def build(path: Path, tasks: int, workflows: int = 0) -> None:
    """`tasks` noop tasks submitted, placed round-robin and ended: every
    `FAILING`th failed for good, the rest completed; then `RUNNING` more,
    left running. So a node's failed and running tasks are a few among its
    many completed, as on a node with a long history. Then `workflows`
    workflows of one noop task each, left running, `CHUNK` to an entry."""
    log = StateLog(path)
    definition = parse_definition("name: one\ntasks:\n  only: {spec: {type: noop}}\n", "")
    for start in range(0, workflows, CHUNK):
        log.apply(
            *(
                payload
                for _ in range(min(CHUNK, workflows - start))
                for payload in submit_payloads(definition, str(uuid.uuid4()))
            )
        )
    for start in range(0, tasks, CHUNK):
        ids = [e.new_id() for _ in range(min(CHUNK, tasks - start))]
        placed = [(t, NODES[(start + k) % len(NODES)]) for k, t in enumerate(ids)]
        log.apply(
            *(
                e.TaskSubmit(task_id, SPEC, f"key-{task_id}", traceparent=TRACEPARENT)
                for task_id in ids
            ),
        )
        log.apply(
            e.TaskAssign([{"task_id": t, "node": node, "attempt": 1} for t, node in placed]),
        )
        log.apply(
            *(
                e.TaskFailed(t, 1, node, "exit 1", FAILED, permanent=True, started_at=log.index)
                if (start + k) % FAILING == FAILING - 1
                else e.TaskComplete(t, 1, node, RESULT, 1_000 + log.index)
                for k, (t, node) in enumerate(placed)
            ),
        )
    ids = [e.new_id() for _ in range(RUNNING)]
    log.apply(*(e.TaskSubmit(task_id, SPEC, None) for task_id in ids))
    log.apply(e.TaskAssign([{"task_id": t, "node": NODES[0], "attempt": 1} for t in ids]))
    log.apply(*(e.TaskStarted(t, 1, NODES[0]) for t in ids))
    log.close()


def _page(reader: StateReader, filters: dict[str, Any]) -> tuple[float, float, float]:
    """Seconds of CPU one page took: the listing (query and views), the
    views alone (made again from the page's rows), and the messages."""
    began = time.thread_time()
    page: TaskPage = reader.list_tasks(limit=DEFAULT_PAGE_SIZE, **filters)
    listed = time.thread_time()
    pb.ListTasksResponse(
        tasks=[task_to_proto(task) for task in page.tasks], total_size=page.total
    ).SerializeToString()
    built = time.thread_time()
    rows = (
        reader._conn()  # the bench's own reader
        .execute(
            "SELECT * FROM tasks WHERE id IN ({})".format(",".join("?" * len(page.tasks))),
            [task.id for task in page.tasks],
        )
        .fetchall()
    )
    viewing = time.thread_time()
    views = [TaskView.from_row(row) for row in rows]
    viewed = time.thread_time()
    assert len(views) == len(page.tasks)
    return listed - began, viewed - viewing, built - listed


def _last_tenth(reader: StateReader) -> CreatedWindow:
    """The creation window of the newest tenth of the tasks (by time)."""
    first, last = (
        reader._conn()  # the bench's own reader
        .execute("SELECT MIN(created_at), MAX(created_at) FROM tasks")
        .fetchone()
    )
    return CreatedWindow(last - (last - first) // 10, None)


def _workflow_page(reader: StateReader, filters: dict[str, Any]) -> float:
    """Seconds of CPU one page of `workflow list` took, its messages built."""
    began = time.thread_time()
    page = reader.list_workflows(limit=DEFAULT_PAGE_SIZE, **filters)
    pb.ListWorkflowsResponse(
        workflows=[workflow_to_proto(w) for w in page.workflows], total_size=page.total
    ).SerializeToString()
    return time.thread_time() - began


def measure_workflows(reader: StateReader, samples: int) -> dict[str, dict[str, float]]:
    first, last = (
        reader._conn()  # the bench's own reader
        .execute("SELECT MIN(created_at), MAX(created_at) FROM workflows")
        .fetchone()
    )
    listings: dict[str, dict[str, Any]] = {
        "workflows": {},
        "workflows, running": {"states": ["running"]},
        "workflows, last tenth": {"created": CreatedWindow(last - (last - first) // 10, None)},
    }
    figures = {}
    for name, filters in listings.items():
        taken = sorted(_workflow_page(reader, filters) for _ in range(samples))
        figures[name] = {
            "best_ms": round(taken[0] * 1e3, 2),
            "median_ms": round(statistics.median(taken) * 1e3, 2),
        }
    return figures


def measure(reader: StateReader, samples: int) -> dict[str, dict[str, float]]:
    recent = _last_tenth(reader)
    listings: dict[str, Callable[[], dict[str, Any]]] = {
        "default": dict,
        "state": lambda: {"states": ["completed"]},
        "node": lambda: {"node": NODES[0]},
        "node, failed": lambda: {"node": NODES[0], "states": ["failed"]},
        "node, running": lambda: {"node": NODES[0], "states": ["running"]},
        "node, running or failed": lambda: {"node": NODES[0], "states": ["running", "failed"]},
        "last tenth": lambda: {"created": recent, "newest_first": True},
        "last tenth, oldest first": lambda: {"created": recent},
        "node, completed, last tenth": lambda: {
            "node": NODES[0],
            "states": ["completed"],
            "created": recent,
            "newest_first": True,
        },
    }
    figures = {}
    for name, filters in listings.items():
        taken = [_page(reader, filters()) for _ in range(samples)]
        whole = sorted(listed + built for listed, _, built in taken)
        figures[name] = {
            "best_ms": round(whole[0] * 1e3, 2),
            "median_ms": round(statistics.median(whole) * 1e3, 2),
            "listing_best_ms": round(min(t[0] for t in taken) * 1e3, 2),
            "views_best_ms": round(min(t[1] for t in taken) * 1e3, 2),
            "messages_best_ms": round(min(t[2] for t in taken) * 1e3, 2),
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=20_000,
                        help="finished tasks in the database built (default 20000)")  # fmt: skip
    parser.add_argument("--db", help="a node's state database to read instead")
    parser.add_argument("--samples", type=int, default=300, help="pages per listing")
    parser.add_argument("--workflows", type=int, default=0,
                        help="also workflows (of one noop task each, running) in the database"
                        " built, and the `workflow list` pages measured")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-bench-list-") as scratch:
        if args.db:
            path = Path(args.db)
        else:
            path = Path(scratch) / "state.db"
            build(path, args.tasks, args.workflows)
        reader = StateReader(f"{path}")
        try:
            figures = measure(reader, args.samples)
            workflows = measure_workflows(reader, args.samples) if args.workflows else {}
        finally:
            reader.close()
    if args.json:
        print(json.dumps({**figures, **workflows}))
        return 0
    print(f"one page of {DEFAULT_PAGE_SIZE} tasks, CPU ms (best of {args.samples}; median):")
    for name, f in figures.items():
        print(
            f"  {name:28s} {f['best_ms']:6.2f} ({f['median_ms']:.2f})"
            f"  listing {f['listing_best_ms']:.2f} (views {f['views_best_ms']:.2f}),"
            f" messages {f['messages_best_ms']:.2f}"
        )
    for name, f in workflows.items():
        print(f"  {name:28s} {f['best_ms']:6.2f} ({f['median_ms']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
