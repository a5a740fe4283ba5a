"""The scheduling stack: filter the nodes, score the survivors, place the
task, and account for it before the next task of the round.

A node with a free slot (fewer active tasks than its `max_tasks`) always
wins over one without, whatever their scores: a node takes tasks to wait for
its slots (its `prefetch_tasks`) only while no feasible node has a free one,
so a task waits behind a busy node only when every node it may run on is
busy.

Tasks with the same type and constraints form a group. Each group keeps a
max-heap of its statically feasible nodes; a node whose load changed since
it was scored is re-scored when it reaches the top (loads only grow within a
round, so scores only fall, nodes only run out of free slots, and a node
that stops fitting never fits again)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from cortex.scheduler.fairness import FairQueue, LastServed
from cortex.scheduler.filters import first_failure
from cortex.scheduler.limits import LimitGate
from cortex.scheduler.model import Candidate, NodeLoad, PendingTask, Placement, RoundResult
from cortex.scheduler.scores import score_node

_SCORE_DIGITS = 6


def order_tasks(tasks: Sequence[PendingTask]) -> list[PendingTask]:
    """Priority first, then age; task id makes the order total."""
    return sorted(tasks, key=lambda t: (-t.priority, t.created_at, t.id))


def initial_loads(nodes: Sequence[Candidate]) -> dict[str, NodeLoad]:
    return {n.id: NodeLoad(n.active_tasks, n.reserved_memory_mb) for n in nodes}


def exclusion_reasons(
    task: PendingTask, nodes: Sequence[Candidate], loads: dict[str, NodeLoad]
) -> list[str]:
    reasons = [why for n in nodes if (why := first_failure(task, n, loads[n.id]))]
    return reasons or ["no nodes have joined the cluster"]


def _rank(task: PendingTask, node: Candidate, load: NodeLoad) -> tuple[bool, float, str]:
    # Heap order: nodes with a free slot first, then best score first, ties
    # to the lowest node id.
    full = bool(node.max_tasks) and load.tasks >= node.max_tasks
    return (full, -round(score_node(task, node, load), _SCORE_DIGITS), node.id)


@dataclass
class _Group:
    """Nodes feasible for one kind of task, best first."""

    heap: list[tuple[bool, float, str, int]] = field(default_factory=list)


class _Round:
    def __init__(self, nodes: Sequence[Candidate]) -> None:
        self.nodes = {n.id: n for n in nodes}
        self.ordered = list(nodes)
        self.loads = initial_loads(nodes)
        self.versions = dict.fromkeys(self.nodes, 0)
        self.groups: dict[tuple[str, int], _Group] = {}

    def group_for(self, task: PendingTask) -> _Group:
        # Tasks sharing one Constraints object (the loop parses each distinct
        # one once) share a group; equal ones apart make equal groups.
        key = (task.type, id(task.constraints))
        group = self.groups.get(key)
        if group is None:
            group = _Group()
            for node in self.ordered:
                load = self.loads[node.id]
                if first_failure(task, node, load) is None:
                    group.heap.append((*_rank(task, node, load), self.versions[node.id]))
            heapq.heapify(group.heap)
            self.groups[key] = group
        return group

    def choose(self, task: PendingTask) -> tuple[Candidate, float] | None:
        heap = self.group_for(task).heap
        while heap:
            _, score, node_id, version = heap[0]
            node, load = self.nodes[node_id], self.loads[node_id]
            if version != self.versions[node_id]:
                heapq.heapreplace(heap, (*_rank(task, node, load), self.versions[node_id]))
                continue
            if first_failure(task, node, load) is not None:
                heapq.heappop(heap)
                continue
            return node, -score
        return None

    def place(self, task: PendingTask, node: Candidate) -> None:
        load = self.loads[node.id]
        load.tasks += 1
        load.memory_reserved_mb += task.constraints.min_memory_mb
        self.versions[node.id] += 1


def choose_node(task: PendingTask, nodes: Sequence[Candidate]) -> tuple[Candidate, float] | None:
    """The best feasible node for one task on its own, or None."""
    return _Round(nodes).choose(task)


def explain(task: PendingTask, nodes: Sequence[Candidate]) -> list[str]:
    """Why no node can take `task` now; empty when some node can."""
    if choose_node(task, nodes) is not None:
        return []
    return exclusion_reasons(task, nodes, initial_loads(nodes))


def schedule_round(
    tasks: Sequence[PendingTask],
    nodes: Sequence[Candidate],
    limits: LimitGate | None = None,
    active_by_fairness_key: dict[str, int] | None = None,
    weights: dict[str, int] | None = None,
    served: LastServed | None = None,
) -> RoundResult:
    """Places tasks by priority, sharing each level between fairness keys by
    weight (oldest first within a key); each placement counts against its
    node (tasks and reserved memory) and its concurrency key for the rest of
    the round, so a burst spreads and no limit is passed. A `targetNode`
    leaves one feasible node, so scores don't matter."""
    state = _Round(nodes)
    result = RoundResult([], {})
    reasons_by_group: dict[int, list[str]] = {}
    queue = FairQueue(tasks, active_by_fairness_key or {}, weights or {}, served)
    for task in queue:
        held = limits.held(task.concurrency_key) if limits is not None else None
        if held is not None:
            result.unplaced[task.id] = [held]
            continue
        choice = state.choose(task)
        if choice is None:
            group = id(state.group_for(task))
            if group not in reasons_by_group:
                reasons_by_group[group] = exclusion_reasons(task, state.ordered, state.loads)
            result.unplaced[task.id] = reasons_by_group[group]
            continue
        node, score = choice
        state.place(task, node)
        queue.placed(task)
        if limits is not None:
            limits.admit(task.concurrency_key)
        result.placements.append(Placement(task.id, node.id, task.attempt + 1, score))
    return result
