"""Plain data the scheduler works on: nodes with their resources, tasks with
their constraints, and what a round decides."""

from __future__ import annotations

from dataclasses import dataclass, field

from cortex.spec import Constraints

# What a task without constraints carries: one object for all of them (it is
# frozen), so they share one placement group (`cortex.scheduler.placement`).
NO_CONSTRAINTS = Constraints()


@dataclass(frozen=True)
class GpuInfo:
    name: str
    memory_total_mb: float
    memory_used_mb: float
    usage_percent: float


@dataclass(frozen=True)
class NodeResources:
    """A node's last resource report. `declared` names the fields that come
    from configuration rather than measurement."""

    cpu_cores: float = 0.0
    cpu_usage_percent: float = 0.0
    load_1m: float = 0.0
    memory_total_mb: float = 0.0
    memory_available_mb: float = 0.0
    disk_total_gb: float = 0.0
    disk_available_gb: float = 0.0
    disk_io_util_percent: float = 0.0
    network_bandwidth_mbps: float = 0.0
    network_throughput_mbps: float = 0.0
    gpu: GpuInfo | None = None
    gaming_detected: bool = False
    declared: frozenset[str] = frozenset()


def declares_memory(resources: NodeResources | None) -> bool:
    """Whether a node's memory is declared rather than measured: measured
    memory already shows running tasks' use, declared memory does not, so
    the memory promised to its tasks is counted against it."""
    return resources is not None and "memory_available_mb" in resources.declared


@dataclass(frozen=True)
class Candidate:
    """A node as the scheduler sees it this round."""

    id: str
    status: str = "active"
    reachable: bool = True
    executors: frozenset[str] = frozenset({"shell", "noop"})
    active_tasks: int = 0
    # Tasks it runs at once (0: no limit), and how many more it takes,
    # waiting, while no node has a free slot (`cortex.scheduler.placement`).
    max_tasks: int = 0
    prefetch_tasks: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    capabilities: dict[str, str] = field(default_factory=dict)
    resources: NodeResources | None = None
    # Memory (MB) already promised to active tasks through minMemoryMb.
    reserved_memory_mb: float = 0.0
    # "voter", or "observer": a read replica, which runs no tasks.
    role: str = "voter"


def task_limit(node: Candidate) -> int:
    """The most tasks `node` holds at once, running and waiting (0: no limit)."""
    return node.max_tasks + node.prefetch_tasks if node.max_tasks else 0


@dataclass(frozen=True)
class PendingTask:
    id: str
    type: str = "shell"
    attempt: int = 0
    priority: int = 5
    created_at: int = 0
    constraints: Constraints = NO_CONSTRAINTS
    # Shares placements with other keys by weight (cortex.scheduler.fairness).
    fairness_key: str = "default"
    # Counts against the key's limits (cortex.scheduler.limits); None: no key.
    concurrency_key: str | None = None


@dataclass(frozen=True)
class Placement:
    task_id: str
    node: str
    attempt: int
    score: float | None = None


@dataclass
class NodeLoad:
    """What a node has taken on so far, including this round's placements."""

    tasks: int
    memory_reserved_mb: float


@dataclass
class RoundResult:
    placements: list[Placement]
    # task id -> one reason per excluded node
    unplaced: dict[str, list[str]]
