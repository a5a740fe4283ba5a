"""Tasks taken to wait for a slot (`prefetch_tasks`) on a real cluster: the
nodes hold more tasks than they run while every node is full, and no node
ever runs more than its `max_tasks` at once."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import shell_spec, wait_until

pytestmark = pytest.mark.cluster

MAX_TASKS = 2
PREFETCH_TASKS = 2


def most_at_once(lines: list[str]) -> dict[str, int]:
    """Per node, the most tasks whose recorded runs overlapped."""
    marks: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for line in lines:
        node, edge, ns = line.split()
        marks[node].append((int(ns), 1 if edge == "start" else -1))
    most = {}
    for node, edges in marks.items():
        now = peak = 0
        for _, step in sorted(edges):  # an end sorts before a start at the same instant
            now += step
            peak = max(peak, now)
        most[node] = peak
    return most


def test_nodes_hold_waiting_tasks_but_run_no_more_than_max_tasks(make_cluster, tmp_path: Path):
    cluster = make_cluster(
        3, ["--max-tasks", str(MAX_TASKS), "--prefetch-tasks", str(PREFETCH_TASKS)]
    )
    runs = tmp_path / "runs.log"
    script = (
        f'echo "$CORTEX_NODE_ID start $(date +%s%N)" >> {runs}; sleep 0.5; '
        f'echo "$CORTEX_NODE_ID end $(date +%s%N)" >> {runs}'
    )
    count = 3 * (MAX_TASKS + PREFETCH_TASKS) + 3
    with cluster.nodes[0].client() as client:
        ids = [client.submit_task(shell_spec(script)).task.id for _ in range(count)]

        def holding() -> int | None:
            # Tasks assigned to or running on the nodes: beyond their slots
            # only when they took tasks to wait.
            held = sum(n.running_tasks for n in client.list_nodes().nodes)
            return held if held > 3 * MAX_TASKS else None

        held = wait_until(holding, 30, interval=0.05, what="nodes holding waiting tasks")
        assert held <= 3 * (MAX_TASKS + PREFETCH_TASKS)
        shown = {n.id: (n.max_tasks, n.prefetch_tasks) for n in client.list_nodes().nodes}
        assert set(shown.values()) == {(MAX_TASKS, PREFETCH_TASKS)}, shown
        for task_id in ids:
            task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            assert task.state == pb.TASK_STATE_COMPLETED, (task_id, task.state, task.error)
            assert task.attempt == 1
    lines = runs.read_text().splitlines()
    assert len(lines) == 2 * count
    most = most_at_once(lines)
    assert set(most) <= {"n1", "n2", "n3"} and max(most.values()) <= MAX_TASKS, most
