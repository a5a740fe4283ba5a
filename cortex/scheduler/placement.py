"""Placement as pure functions: queued tasks and node views in, assignments
out. The first policy places each task on the eligible node with the fewest
active tasks; filters and scores are separate so richer ones slot in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Candidate:
    """A node as the scheduler sees it this round."""

    id: str
    status: str
    reachable: bool
    executors: frozenset[str]
    active_tasks: int
    max_tasks: int
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PendingTask:
    id: str
    type: str
    attempt: int
    priority: int = 5


@dataclass(frozen=True)
class Placement:
    task_id: str
    node: str
    attempt: int


@dataclass
class RoundResult:
    placements: list[Placement]
    # task id -> one reason per excluded node
    unplaced: dict[str, list[str]]


Filter = Callable[[PendingTask, Candidate, int], str | None]
"""Returns why `node` cannot take `task` (given its load so far this round), or None."""


def node_is_active(task: PendingTask, node: Candidate, load: int) -> str | None:
    if node.status != "active":
        return f"{node.id}: status {node.status}"
    if not node.reachable:
        return f"{node.id}: not reachable from the leader"
    return None


def node_runs_executor(task: PendingTask, node: Candidate, load: int) -> str | None:
    if task.type not in node.executors:
        return f"{node.id}: no {task.type} executor"
    return None


def node_has_free_slot(task: PendingTask, node: Candidate, load: int) -> str | None:
    if node.max_tasks and load >= node.max_tasks:
        return f"{node.id}: {load} active tasks, at its limit of {node.max_tasks}"
    return None


FILTERS: tuple[Filter, ...] = (node_is_active, node_runs_executor, node_has_free_slot)


def fewest_active_tasks(node: Candidate, load: int) -> tuple[int, str]:
    """Lower sorts first; ties break by node id."""
    return (load, node.id)


def exclusion_reasons(
    task: PendingTask, nodes: Sequence[Candidate], loads: dict[str, int]
) -> list[str]:
    reasons = []
    for node in nodes:
        for check in FILTERS:
            why = check(task, node, loads[node.id])
            if why:
                reasons.append(why)
                break
    return reasons or ["no nodes have joined the cluster"]


def explain(task: PendingTask, nodes: Sequence[Candidate]) -> list[str]:
    """Why no node can take `task` now; empty when some node can."""
    loads = {node.id: node.active_tasks for node in nodes}
    if any(all(check(task, node, loads[node.id]) is None for check in FILTERS) for node in nodes):
        return []
    return exclusion_reasons(task, nodes, loads)


def schedule_round(tasks: Sequence[PendingTask], nodes: Sequence[Candidate]) -> RoundResult:
    """Places tasks in the given order (callers sort by priority, then age);
    each placement counts against its node for the rest of the round, so a
    burst spreads."""
    loads = {node.id: node.active_tasks for node in nodes}
    result = RoundResult([], {})
    for task in tasks:
        eligible = [
            node
            for node in nodes
            if all(check(task, node, loads[node.id]) is None for check in FILTERS)
        ]
        if not eligible:
            result.unplaced[task.id] = exclusion_reasons(task, nodes, loads)
            continue
        best = min(eligible, key=lambda node: fewest_active_tasks(node, loads[node.id]))
        loads[best.id] += 1
        result.placements.append(Placement(task.id, best.id, task.attempt + 1))
    return result
