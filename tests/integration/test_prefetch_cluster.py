"""Tasks taken to wait for a slot (`prefetch_tasks`) on a real cluster: the
nodes hold more tasks than they run while every node is full, and no node
ever runs more than its `max_tasks` at once."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import completion_counts, shell_spec, state_rows, wait_until

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
    """Fifteen tasks that wait on a gate (a file) on three nodes of two slots
    and two waiting places each: the nodes hold twelve, three stay queued;
    once the gate opens every task completes, and by the tasks' own start
    and end times no node ever ran more than two at once."""
    cluster = make_cluster(
        3, ["--max-tasks", str(MAX_TASKS), "--prefetch-tasks", str(PREFETCH_TASKS)]
    )
    runs, gate = tmp_path / "runs.log", tmp_path / "gate"
    script = (
        f'echo "$CORTEX_NODE_ID start $(date +%s%N)" >> {runs}; '
        f"while [ ! -e {gate} ]; do sleep 0.05; done; sleep 0.1; "
        f'echo "$CORTEX_NODE_ID end $(date +%s%N)" >> {runs}'
    )
    count = 3 * (MAX_TASKS + PREFETCH_TASKS) + 3
    with cluster.nodes[0].client() as client:
        ids = [client.submit_task(shell_spec(script)).task.id for _ in range(count)]

        def full() -> bool:
            # Tasks assigned to or running on each node: beyond its slots
            # only when it took tasks to wait.
            held = [n.running_tasks for n in client.list_nodes().nodes]
            return held == [MAX_TASKS + PREFETCH_TASKS] * 3

        wait_until(full, 30, what="every node holding its slots' tasks and its waiting ones")
        states = [client.get_task(task_id).task.state for task_id in ids]
        assert states.count(pb.TASK_STATE_QUEUED) == 3, states
        shown = {n.id: (n.max_tasks, n.prefetch_tasks) for n in client.list_nodes().nodes}
        assert set(shown.values()) == {(MAX_TASKS, PREFETCH_TASKS)}, shown
        gate.touch()
        for task_id in ids:
            task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            assert task.state == pb.TASK_STATE_COMPLETED, (task_id, task.state, task.error)
            assert task.attempt == 1
    lines = runs.read_text().splitlines()
    assert len(lines) == 2 * count
    most = most_at_once(lines)
    assert set(most) <= {"n1", "n2", "n3"} and max(most.values()) <= MAX_TASKS, most


def gated_full_cluster(make_cluster, tmp_path: Path, *extra: str):
    """A cluster whose every node runs two tasks and holds two waiting, the
    tasks waiting on a gate (a file): (cluster, client of the leader, the
    leader, a follower, the tasks' ids, the follower's tasks, the gate, the
    log of starts)."""
    cluster = make_cluster(
        3, ["--max-tasks", str(MAX_TASKS), "--prefetch-tasks", str(PREFETCH_TASKS), *extra]
    )
    runs, gate = tmp_path / "runs.log", tmp_path / "gate"
    script = (
        f'echo "$CORTEX_NODE_ID $CORTEX_TASK_ID $CORTEX_ATTEMPT" >> {runs}; '
        f"while [ ! -e {gate} ]; do sleep 0.05; done"
    )
    leader = cluster.leader()
    follower = next(node for node in cluster.nodes if node is not leader)
    client = leader.client()
    count = 3 * (MAX_TASKS + PREFETCH_TASKS)
    ids = [client.submit_task(shell_spec(script)).task.id for _ in range(count)]

    def all_full() -> bool:
        held = [n.running_tasks for n in client.list_nodes().nodes]
        started = runs.read_text().splitlines() if runs.exists() else []
        return held == [MAX_TASKS + PREFETCH_TASKS] * 3 and len(started) == 3 * MAX_TASKS

    wait_until(all_full, 30, what="every node running two tasks and holding two")
    on_follower = {
        task_id
        for (task_id,) in state_rows(
            leader,
            "SELECT task_id FROM task_events WHERE event = 'assigned' AND node = ?",
            (follower.node_id,),
        )
    }
    assert len(on_follower) == MAX_TASKS + PREFETCH_TASKS
    return cluster, client, leader, follower, ids, on_follower, gate, runs


def started_on(runs: Path, node_id: str) -> set[str]:
    return {task for node, task, _ in (line.split() for line in runs.read_text().splitlines())
            if node == node_id}  # fmt: skip


def test_a_killed_nodes_waiting_tasks_run_elsewhere_and_complete_once(make_cluster, tmp_path):
    """A follower is killed with `kill -9` while it runs two tasks and holds
    two waiting. Its waiting tasks never started there; once it is offline
    all its tasks run elsewhere, and when the gate opens every task
    completes exactly once."""
    _, client, leader, victim, ids, on_victim, gate, runs = gated_full_cluster(
        make_cluster, tmp_path, "--heartbeat-interval", "0.5", "--failure-timeout", "3"
    )
    with client:
        victim.kill9()

        def moved() -> bool:
            tasks = [client.get_task(task_id).task for task_id in on_victim]
            return all(t.node_id != victim.node_id or t.state == pb.TASK_STATE_QUEUED
                       for t in tasks)  # fmt: skip

        wait_until(moved, 30, what=f"the tasks of {victim.node_id} taken back")
        gate.touch()
        for task_id in ids:
            task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            assert task.state == pb.TASK_STATE_COMPLETED, (task_id, task.state, task.error)
            assert task.node_id != victim.node_id or task_id not in on_victim
    began_on_victim = started_on(runs, victim.node_id)
    assert len(began_on_victim) == MAX_TASKS and began_on_victim < on_victim
    assert set(completion_counts(leader).values()) == {1}
    assert set(completion_counts(leader)) == set(ids)


def test_a_drained_nodes_waiting_tasks_move_at_once_without_spending_an_attempt(
    make_cluster, tmp_path
):
    """A follower running two tasks and holding two waiting (each of which
    says, asked, that it waits for a free slot there) is drained with a long
    deadline: its waiting tasks move at once (their retry budget untouched),
    its running ones finish there when the gate opens."""
    _, client, leader, node, ids, on_node, gate, runs = gated_full_cluster(make_cluster, tmp_path)
    with client:
        waiting = on_node - started_on(runs, node.node_id)
        assert len(waiting) == PREFETCH_TASKS
        slot = f"waiting for a free slot on {node.node_id} (all {MAX_TASKS} are running tasks)"

        def reasons() -> dict[str, list[str]]:
            return {t: list(client.get_task(t).task.pending_reasons) for t in on_node}

        expected = {t: [slot] if t in waiting else [] for t in on_node}
        wait_until(lambda: reasons() == expected, 30, what="the waiting tasks saying why")
        client.drain_node(node.node_id, deadline_ms=120_000)

        def moved() -> bool:
            return all(client.get_task(t).task.node_id != node.node_id for t in waiting)

        wait_until(moved, 30, what=f"the waiting tasks of {node.node_id} moved")
        gate.touch()
        for task_id in ids:
            task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            assert task.state == pb.TASK_STATE_COMPLETED, (task_id, task.state, task.error)
            assert (task.node_id == node.node_id) == (task_id in on_node - waiting)
    retried = state_rows(leader, "SELECT COUNT(*) FROM task_events WHERE event = 'retried'")
    assert retried == [(0,)]
    assert started_on(runs, node.node_id) == on_node - waiting
    assert set(completion_counts(leader).values()) == {1}
