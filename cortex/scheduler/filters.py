"""Feasibility checks, one per constraint. Each returns why `node` cannot take
`task` given what the node has taken on this round, or None when it can."""

from __future__ import annotations

import math
from collections.abc import Callable

from cortex.scheduler.model import Candidate, NodeLoad, PendingTask, task_limit

Filter = Callable[[PendingTask, Candidate, NodeLoad], str | None]


def available_memory_mb(node: Candidate, load: NodeLoad) -> float | None:
    if node.resources is None:
        return None
    return node.resources.memory_available_mb - load.memory_reserved_mb


def node_is_voter(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    """Observers replicate the state for reads and never run tasks."""
    if node.role != "voter":
        return f"{node.id}: an {node.role}, which runs no tasks"
    return None


def node_is_active(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    if node.status != "active":
        return f"{node.id}: node is {node.status}"
    if not node.reachable:
        return f"{node.id}: not reachable"
    return None


def target_node(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    wanted = task.constraints.target_node
    if wanted and node.id != wanted:
        return f"{node.id}: targetNode is {wanted}"
    return None


def allowed_nodes(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    allowed = task.constraints.allowed_nodes
    if allowed and node.id not in allowed:
        return f"{node.id}: not in allowedNodes"
    return None


def forbidden_nodes(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    if node.id in task.constraints.forbidden_nodes:
        return f"{node.id}: in forbiddenNodes"
    return None


def executor_type(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    if task.type not in node.executors:
        return f"{node.id}: no {task.type} executor"
    return None


def node_capacity(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    limit = task_limit(node)
    if limit and load.tasks >= limit:
        waiting = f" and {node.prefetch_tasks} waiting" if node.prefetch_tasks else ""
        return (
            f"{node.id}: {load.tasks} active tasks, at its limit"
            f" of {node.max_tasks} running{waiting}"
        )
    return None


def max_parallel_per_node(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    limit = task.constraints.max_parallel_per_node
    if limit and load.tasks >= limit:
        return f"{node.id}: maxParallelPerNode {limit} <= {load.tasks} active tasks"
    return None


def node_labels(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    """`key=value` needs that value; a bare `key` needs the label present."""
    missing = []
    for required in task.constraints.node_labels:
        key, sep, value = required.partition("=")
        if key not in node.labels or (sep and node.labels[key] != value):
            missing.append(required)
    if missing:
        return f"{node.id}: missing labels {', '.join(missing)}"
    return None


def requires_capabilities(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    for key, value in sorted(task.constraints.requires_capabilities.items()):
        have = node.capabilities.get(key)
        if have != value:
            shown = "none" if have is None else repr(have)
            return f"{node.id}: capability {key}={value!r} required, has {shown}"
    return None


def requires_gpu(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    if task.constraints.requires_gpu and (node.resources is None or node.resources.gpu is None):
        return f"{node.id}: requiresGpu but no GPU"
    return None


def avoid_gaming(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    if not task.constraints.avoid_gaming:
        return None
    if "gaming" in node.labels:
        return f"{node.id}: avoidGaming and node is labelled gaming"
    if node.resources is not None and node.resources.gaming_detected:
        return f"{node.id}: avoidGaming and a game is running"
    return None


def min_memory(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    needed = task.constraints.min_memory_mb
    if not needed:
        return None
    available = available_memory_mb(node, load)
    if available is None:
        return f"{node.id}: minMemoryMb {needed} but no resource report yet"
    if needed > available:
        # Rounded down, so the figure shown never looks like enough.
        return f"{node.id}: minMemoryMb {needed} > available {math.floor(available)}"
    return None


def min_disk(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    needed = task.constraints.min_disk_gb
    if not needed:
        return None
    if node.resources is None:
        return f"{node.id}: minDiskGb {needed:g} but no resource report yet"
    if needed > node.resources.disk_available_gb:
        shown = math.floor(node.resources.disk_available_gb * 10) / 10
        return f"{node.id}: minDiskGb {needed:g} > available {shown:.1f}"
    return None


# Cheap, structural checks first; the first failing check is the reason shown.
FILTERS: tuple[Filter, ...] = (
    node_is_voter,
    node_is_active,
    target_node,
    allowed_nodes,
    forbidden_nodes,
    executor_type,
    node_labels,
    requires_capabilities,
    requires_gpu,
    avoid_gaming,
    min_memory,
    min_disk,
    node_capacity,
    max_parallel_per_node,
)


def first_failure(task: PendingTask, node: Candidate, load: NodeLoad) -> str | None:
    for check in FILTERS:
        why = check(task, node, load)
        if why:
            return why
    return None
