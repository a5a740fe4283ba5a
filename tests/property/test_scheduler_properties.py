"""Generated clusters and task batches against `schedule_round`.

Nodes get random statuses, reachability, executors, labels, capabilities,
resource reports, task limits, active tasks and reserved memory; tasks get
random types, attempts, priorities, ages and constraints, drawn from a few
shared constraint sets so that tasks often compete for the same nodes.

Each placement is re-checked against SPEC §5 by an oracle written here,
independently of `cortex.scheduler.filters`, replaying the round's
placements in order so that earlier ones count (tasks and promised memory).
Properties: no placement on an infeasible node, no node over
`maxParallelPerNode` or `max_tasks` and `prefetch_tasks`, no task left to
wait for a node's slot while a node that fits it has one free, every task
placed at most once with
attempt + 1, every task either placed or explained, a task left unplaced
really fits nowhere, placements come in priority order, and a higher-priority
task is never left out while a lower-priority one of the same kind is
placed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import event, given, settings
from hypothesis import strategies as st

from cortex.scheduler import (
    Candidate,
    GpuInfo,
    NodeResources,
    PendingTask,
    RoundResult,
    schedule_round,
)
from cortex.spec import Constraints

NODE_IDS = ("n0", "n1", "n2", "n3", "n4", "n5")
# Most nodes are usable; the rest are down in one of the ways SPEC §5 names.
HEALTH = (("active", True),) * 6 + (
    ("draining", True),
    ("cordoned", True),
    ("offline", True),
    ("active", False),
    ("draining", False),
)
EXECUTORS = ("shell", "noop")
EXECUTOR_SETS = (frozenset(EXECUTORS),) * 3 + (frozenset({"shell"}), frozenset({"noop"}))
# None: the node lacks the label or capability.
LABEL_CHOICES: dict[str, tuple[str | None, ...]] = {
    "zone": ("a", "b", None),
    "ssd": ("", "nvme", None),
    "gaming": (None, None, None, "", "true"),
    "rack": ("1", "2", None),
}
REQUIRED_LABELS = ("zone=a", "zone=b", "ssd", "rack=1", "gaming")
CAPABILITY_CHOICES: dict[str, tuple[str | None, ...]] = {
    "arch": ("amd64", "arm64", None),
    "os": ("linux", "windows", None),
}


# --- strategies -------------------------------------------------------------

gpus = st.builds(
    GpuInfo,
    name=st.just("gpu"),
    memory_total_mb=st.just(8000.0),
    memory_used_mb=st.floats(0, 8000),
    usage_percent=st.floats(0, 100),
)

reports = st.builds(
    NodeResources,
    cpu_cores=st.sampled_from([2.0, 8.0]),
    cpu_usage_percent=st.floats(0, 120),
    memory_total_mb=st.sampled_from([16000.0, 8000.0, 0.0]),
    memory_available_mb=st.sampled_from([12000.0, 6000.0, 4096.0, 3000.0, 1000.0, 0.0]),
    disk_available_gb=st.sampled_from([100.0, 20.0, 5.0, 0.0]),
    disk_io_util_percent=st.floats(0, 100),
    network_bandwidth_mbps=st.sampled_from([1000.0, 0.0]),
    network_throughput_mbps=st.floats(0, 1200),
    gpu=st.one_of(st.none(), gpus),
    gaming_detected=st.sampled_from([False, False, True]),
)


def _present(choices: dict[str, tuple[str | None, ...]]) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries({k: st.sampled_from(v) for k, v in choices.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not None}
    )


@st.composite
def candidates(draw: st.DrawFn) -> list[Candidate]:
    count = draw(st.integers(0, len(NODE_IDS)))
    out = []
    for node_id in NODE_IDS[:count]:
        status, reachable = draw(st.sampled_from(HEALTH))
        has_report = draw(st.sampled_from([True, True, True, False]))
        out.append(
            Candidate(
                id=node_id,
                status=status,
                reachable=reachable,
                executors=draw(st.sampled_from(EXECUTOR_SETS)),
                active_tasks=draw(st.integers(0, 3)),
                max_tasks=draw(st.sampled_from([0, 6, 4, 2, 1, 0])),
                prefetch_tasks=draw(st.sampled_from([0, 0, 1, 2])),
                labels=draw(_present(LABEL_CHOICES)),
                capabilities=draw(_present(CAPABILITY_CHOICES)),
                resources=draw(reports) if has_report else None,
                reserved_memory_mb=draw(st.sampled_from([0.0, 0.0, 1000.0, 4000.0])),
            )
        )
    return out


# Each constraint set uses a few constraints, so that most tasks fit somewhere
# and the limits, not just the static filters, decide.
CONSTRAINT_VALUES: dict[str, st.SearchStrategy[object]] = {
    "requiresGpu": st.just(True),
    "avoidGaming": st.just(True),
    "minMemoryMb": st.sampled_from([512, 2048, 4096, 8192]),
    "minDiskGb": st.sampled_from([5, 20, 50]),
    "nodeLabels": st.lists(st.sampled_from(REQUIRED_LABELS), min_size=1, max_size=2, unique=True),
    "targetNode": st.sampled_from((*NODE_IDS, "ghost")),
    "requiresCapabilities": _present(CAPABILITY_CHOICES).filter(bool),
    "allowedNodes": st.lists(st.sampled_from(NODE_IDS), min_size=1, max_size=4, unique=True),
    "forbiddenNodes": st.lists(st.sampled_from(NODE_IDS), min_size=1, max_size=2, unique=True),
    "maxParallelPerNode": st.integers(1, 5),
}


@st.composite
def constraint_sets(draw: st.DrawFn) -> Constraints:
    chosen = draw(st.sets(st.sampled_from(sorted(CONSTRAINT_VALUES)), max_size=3))
    return Constraints(**{name: draw(CONSTRAINT_VALUES[name]) for name in chosen})


@st.composite
def task_batches(draw: st.DrawFn) -> list[PendingTask]:
    shared = draw(st.lists(constraint_sets(), min_size=1, max_size=3))
    count = draw(st.integers(1, 16))
    return [
        PendingTask(
            id=f"t{i:02d}",
            type=draw(st.sampled_from(EXECUTORS)),
            attempt=draw(st.integers(0, 3)),
            priority=draw(st.integers(0, 10)),
            created_at=draw(st.integers(0, 5)),
            constraints=draw(st.sampled_from(shared)),
        )
        for i in range(count)
    ]


# --- oracle -----------------------------------------------------------------


@dataclass
class Taken:
    """What a node holds so far in the round under replay."""

    tasks: int
    reserved_mb: float


def has_label(labels: dict[str, str], required: str) -> bool:
    """`key=value` needs that value, a bare `key` just the key."""
    if "=" in required:
        key, value = required.split("=", 1)
        return labels.get(key) == value
    return required in labels


def fits(task: PendingTask, node: Candidate, taken: Taken) -> bool:
    """SPEC §5 feasibility, restated from the constraint definitions."""
    c = task.constraints
    res = node.resources
    checks = [
        node.status == "active" and node.reachable,
        task.type in node.executors,
        not c.requires_gpu or (res is not None and res.gpu is not None),
        not c.avoid_gaming
        or ("gaming" not in node.labels and not (res is not None and res.gaming_detected)),
        c.min_memory_mb == 0
        or (res is not None and c.min_memory_mb <= res.memory_available_mb - taken.reserved_mb),
        c.min_disk_gb == 0 or (res is not None and c.min_disk_gb <= res.disk_available_gb),
        all(has_label(node.labels, required) for required in c.node_labels),
        c.target_node is None or c.target_node == node.id,
        all(node.capabilities.get(k) == v for k, v in c.requires_capabilities.items()),
        not c.allowed_nodes or node.id in c.allowed_nodes,
        node.id not in c.forbidden_nodes,
        # One more task must stay within both limits (0 means no limit).
        c.max_parallel_per_node == 0 or taken.tasks + 1 <= c.max_parallel_per_node,
        node.max_tasks == 0 or taken.tasks + 1 <= node.max_tasks + node.prefetch_tasks,
    ]
    return all(checks)


def has_free_slot(node: Candidate, taken: Taken) -> bool:
    """Whether one more task would run at once rather than wait for a slot."""
    return node.max_tasks == 0 or taken.tasks < node.max_tasks


def replay(
    tasks: list[PendingTask], nodes: list[Candidate], result: RoundResult
) -> dict[str, Taken]:
    """Re-checks every placement in order; returns what each node ends with."""
    by_id = {t.id: t for t in tasks}
    node_by_id = {n.id: n for n in nodes}
    taken = {n.id: Taken(n.active_tasks, n.reserved_memory_mb) for n in nodes}
    seen: set[str] = set()
    for p in result.placements:
        assert p.task_id in by_id, f"unknown task {p.task_id}"
        assert p.task_id not in seen, f"{p.task_id} placed twice"
        seen.add(p.task_id)
        task = by_id[p.task_id]
        assert p.attempt == task.attempt + 1, p
        assert p.node in node_by_id, f"{p.task_id} placed on unknown node {p.node}"
        node, held = node_by_id[p.node], taken[p.node]
        assert fits(task, node, held), (
            f"{p.task_id} placed on {p.node}, which cannot take it: {task.constraints!r}, "
            f"{node!r}, {held!r}"
        )
        if not has_free_slot(node, held):
            free = [
                n.id for n in nodes if fits(task, n, taken[n.id]) and has_free_slot(n, taken[n.id])
            ]
            assert not free, f"{p.task_id} left to wait on {p.node} while {free} had a free slot"
        held.tasks += 1
        held.reserved_mb += task.constraints.min_memory_mb
        limit = task.constraints.max_parallel_per_node
        assert not limit or held.tasks <= limit
        assert not node.max_tasks or held.tasks <= node.max_tasks + node.prefetch_tasks
    return taken


def order_key(task: PendingTask) -> tuple[int, int]:
    return (-task.priority, task.created_at)


def kind(task: PendingTask) -> tuple[str, str]:
    return (task.type, task.constraints.model_dump_json())


# --- properties -------------------------------------------------------------


@settings(deadline=None, max_examples=600)
@given(nodes=candidates(), tasks=task_batches())
def test_schedule_round_respects_every_constraint(
    nodes: list[Candidate], tasks: list[PendingTask]
) -> None:
    result = schedule_round(tasks, nodes)
    taken = replay(tasks, nodes, result)
    event(f"placed {min(len(result.placements), 3)}+ tasks")
    if result.placements and result.unplaced:
        event("some tasks placed, some not")

    placed = {p.task_id for p in result.placements}
    assert placed.isdisjoint(result.unplaced)
    assert placed | set(result.unplaced) == {t.id for t in tasks}
    assert all(result.unplaced[t] for t in result.unplaced), "an unplaced task has no reason"

    # Loads only grow within a round, so a task that fitted nowhere when its
    # turn came fits nowhere at the end either, and vice versa.
    for task in tasks:
        if task.id in result.unplaced:
            assert not any(fits(task, n, taken[n.id]) for n in nodes), (
                f"{task.id} left unplaced although a node fits it"
            )
            reasons = result.unplaced[task.id]
            if nodes:
                assert sorted(r.split(":", 1)[0] for r in reasons) == sorted(n.id for n in nodes)


@settings(deadline=None, max_examples=300)
@given(nodes=candidates(), tasks=task_batches())
def test_priority_is_never_inverted(nodes: list[Candidate], tasks: list[PendingTask]) -> None:
    result = schedule_round(tasks, nodes)
    placed = {p.task_id for p in result.placements}
    by_id = {t.id: t for t in tasks}

    keys = [order_key(by_id[p.task_id]) for p in result.placements]
    assert keys == sorted(keys), "placements are not in priority-then-age order"

    for left_out in tasks:
        if left_out.id in placed:
            continue
        for taken in tasks:
            if taken.id not in placed or kind(taken) != kind(left_out):
                continue
            event("a kind of task was only partly placed")
            assert left_out.priority <= taken.priority, (
                f"{taken.id} (priority {taken.priority}) placed while {left_out.id} "
                f"(priority {left_out.priority}) of the same kind was not"
            )
            if left_out.priority == taken.priority:
                assert left_out.created_at >= taken.created_at, (
                    f"{taken.id} (created {taken.created_at}) placed while older "
                    f"{left_out.id} (created {left_out.created_at}) of the same kind was not"
                )


@settings(deadline=None, max_examples=200)
@given(nodes=candidates(), tasks=task_batches())
def test_placements_count_in_the_next_round(
    nodes: list[Candidate], tasks: list[PendingTask]
) -> None:
    """Feeding a round's placements back as active tasks and reserved memory
    keeps every limit: the next round never overfills what the first filled."""
    first = schedule_round(tasks, nodes)
    by_id = {t.id: t for t in tasks}
    added = Counter(p.node for p in first.placements)
    memory: Counter[str] = Counter()
    for p in first.placements:
        memory[p.node] += by_id[p.task_id].constraints.min_memory_mb
    carried = [
        Candidate(
            id=n.id,
            status=n.status,
            reachable=n.reachable,
            executors=n.executors,
            active_tasks=n.active_tasks + added[n.id],
            max_tasks=n.max_tasks,
            labels=n.labels,
            capabilities=n.capabilities,
            resources=n.resources,
            reserved_memory_mb=n.reserved_memory_mb + memory[n.id],
        )
        for n in nodes
    ]
    retried = [
        PendingTask(
            id=f"{t.id}-again",
            type=t.type,
            attempt=t.attempt,
            priority=t.priority,
            created_at=t.created_at,
            constraints=t.constraints,
        )
        for t in tasks
    ]
    second = schedule_round(retried, carried)
    replay(retried, carried, second)
