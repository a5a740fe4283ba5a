"""Score terms, one per resource, with the weights of the design: higher is
better. Nodes without a resource report score as half-loaded."""

from __future__ import annotations

from collections.abc import Callable

from cortex.scheduler.model import Candidate, NodeLoad, PendingTask

Score = Callable[[PendingTask, Candidate, NodeLoad], float]

CPU_WEIGHT = 0.3
MEMORY_WEIGHT = 0.3
DISK_IO_WEIGHT = 0.15
NETWORK_WEIGHT = 0.1
GPU_WEIGHT = 0.15
RUNNING_TASK_PENALTY = 5.0
_UNKNOWN_HEADROOM = 50.0


def _clamp(percent: float) -> float:
    return max(0.0, min(100.0, percent))


def cpu_headroom(task: PendingTask, node: Candidate, load: NodeLoad) -> float:
    if node.resources is None:
        return _UNKNOWN_HEADROOM * CPU_WEIGHT
    return _clamp(100.0 - node.resources.cpu_usage_percent) * CPU_WEIGHT


def memory_headroom(task: PendingTask, node: Candidate, load: NodeLoad) -> float:
    res = node.resources
    if res is None or res.memory_total_mb <= 0:
        return _UNKNOWN_HEADROOM * MEMORY_WEIGHT
    available = res.memory_available_mb - load.memory_reserved_mb
    return _clamp(available / res.memory_total_mb * 100.0) * MEMORY_WEIGHT


def disk_io_headroom(task: PendingTask, node: Candidate, load: NodeLoad) -> float:
    if node.resources is None:
        return _UNKNOWN_HEADROOM * DISK_IO_WEIGHT
    return _clamp(100.0 - node.resources.disk_io_util_percent) * DISK_IO_WEIGHT


def network_headroom(task: PendingTask, node: Candidate, load: NodeLoad) -> float:
    res = node.resources
    if res is None or res.network_bandwidth_mbps <= 0:
        return _UNKNOWN_HEADROOM * NETWORK_WEIGHT
    used = res.network_throughput_mbps / res.network_bandwidth_mbps * 100.0
    return _clamp(100.0 - used) * NETWORK_WEIGHT


def gpu_headroom(task: PendingTask, node: Candidate, load: NodeLoad) -> float:
    """Counts only for tasks that need a GPU."""
    if not task.constraints.requires_gpu or node.resources is None or node.resources.gpu is None:
        return 0.0
    return _clamp(100.0 - node.resources.gpu.usage_percent) * GPU_WEIGHT


def running_tasks(task: PendingTask, node: Candidate, load: NodeLoad) -> float:
    """Each task on the node, including ones placed earlier this round."""
    return -RUNNING_TASK_PENALTY * load.tasks


SCORES: tuple[Score, ...] = (
    cpu_headroom,
    memory_headroom,
    disk_io_headroom,
    network_headroom,
    gpu_headroom,
    running_tasks,
)


def score_node(task: PendingTask, node: Candidate, load: NodeLoad) -> float:
    return sum(term(task, node, load) for term in SCORES)
