"""Every feasibility filter on plain data, passing and failing: each failure
names the node and the figures involved, is what `first_failure` reports
once the filter is composed into the stack, and is what `explain` and an
unplaced task show when nothing fits."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cortex.scheduler import (
    FILTERS,
    Candidate,
    GpuInfo,
    NodeLoad,
    NodeResources,
    PendingTask,
    explain,
    first_failure,
    schedule_round,
)
from cortex.scheduler import filters as f
from cortex.spec import Constraints

GPU = GpuInfo(name="rtx", memory_total_mb=8000, memory_used_mb=1000, usage_percent=20)


def resources(**overrides: Any) -> NodeResources:
    values: dict[str, Any] = {
        "cpu_cores": 8,
        "cpu_usage_percent": 10,
        "memory_total_mb": 16000,
        "memory_available_mb": 8000,
        "disk_total_gb": 500,
        "disk_available_gb": 100,
        "network_bandwidth_mbps": 1000,
    }
    values.update(overrides)
    return NodeResources(**values)


def node(node_id: str = "n1", **fields: Any) -> Candidate:
    fields.setdefault("resources", resources())
    fields.setdefault("max_tasks", 10)
    return Candidate(id=node_id, **fields)


def task(type_: str = "shell", **constraints: Any) -> PendingTask:
    return PendingTask(id="t1", type=type_, constraints=Constraints(**constraints))


def load(tasks: int = 0, reserved_mb: float = 0.0) -> NodeLoad:
    return NodeLoad(tasks=tasks, memory_reserved_mb=reserved_mb)


def assert_reason(reason: str | None, node_id: str, *figures: str) -> None:
    assert reason is not None, "expected the filter to exclude the node"
    assert reason.startswith(f"{node_id}:"), reason
    for figure in figures:
        assert figure in reason, f"{figure!r} not in {reason!r}"


# (filter, task, node, load, fragments the reason must contain after the node id)
FAILING: dict[str, tuple[f.Filter, PendingTask, Candidate, NodeLoad, tuple[str, ...]]] = {
    "observer": (f.node_is_voter, task(), node(role="observer"), load(), ("observer",)),
    "draining": (f.node_is_active, task(), node(status="draining"), load(), ("draining",)),
    "cordoned": (f.node_is_active, task(), node(status="cordoned"), load(), ("cordoned",)),
    "offline": (f.node_is_active, task(), node(status="offline"), load(), ("offline",)),
    "unreachable": (f.node_is_active, task(), node(reachable=False), load(), ("reachable",)),
    "executor": (
        f.executor_type,
        task("noop"),
        node(executors=frozenset({"shell"})),
        load(),
        ("noop",),
    ),
    "gpu-absent": (f.requires_gpu, task(requiresGpu=True), node(), load(), ("GPU",)),
    "gpu-no-report": (
        f.requires_gpu,
        task(requiresGpu=True),
        node(resources=None),
        load(),
        ("GPU",),
    ),
    "gaming-label": (
        f.avoid_gaming,
        task(avoidGaming=True),
        node(labels={"gaming": "true"}),
        load(),
        ("gaming",),
    ),
    "gaming-detected": (
        f.avoid_gaming,
        task(avoidGaming=True),
        node(resources=resources(gaming_detected=True)),
        load(),
        ("game",),
    ),
    "memory": (f.min_memory, task(minMemoryMb=9000), node(), load(), ("9000", "8000")),
    "memory-reserved": (
        f.min_memory,
        task(minMemoryMb=4096),
        node(),
        load(reserved_mb=5000),
        ("4096", "3000"),
    ),
    "memory-no-report": (
        f.min_memory,
        task(minMemoryMb=1),
        node(resources=None),
        load(),
        ("minMemoryMb", "report"),
    ),
    "disk": (
        f.min_disk,
        task(minDiskGb=150),
        node(),
        load(),
        ("minDiskGb", "150", "100"),
    ),
    "disk-no-report": (
        f.min_disk,
        task(minDiskGb=1),
        node(resources=None),
        load(),
        ("minDiskGb", "report"),
    ),
    "label-value": (
        f.node_labels,
        task(nodeLabels=["zone=a"]),
        node(labels={"zone": "b"}),
        load(),
        ("zone=a",),
    ),
    "label-bare": (f.node_labels, task(nodeLabels=["ssd"]), node(labels={}), load(), ("ssd",)),
    "target": (f.target_node, task(targetNode="n2"), node("n1"), load(), ("targetNode", "n2")),
    "capability-mismatch": (
        f.requires_capabilities,
        task(requiresCapabilities={"arch": "arm64"}),
        node(capabilities={"arch": "amd64"}),
        load(),
        ("arch", "arm64", "amd64"),
    ),
    "capability-missing": (
        f.requires_capabilities,
        task(requiresCapabilities={"arch": "arm64"}),
        node(capabilities={}),
        load(),
        ("arch", "arm64", "none"),
    ),
    "allowed": (
        f.allowed_nodes,
        task(allowedNodes=["n2", "n3"]),
        node("n1"),
        load(),
        ("allowedNodes",),
    ),
    "forbidden": (
        f.forbidden_nodes,
        task(forbiddenNodes=["n1"]),
        node("n1"),
        load(),
        ("forbiddenNodes",),
    ),
    "max-parallel": (
        f.max_parallel_per_node,
        task(maxParallelPerNode=2),
        node(),
        load(tasks=2),
        ("maxParallelPerNode", "2"),
    ),
    "max-tasks": (
        f.node_capacity,
        task(),
        node(max_tasks=3),
        load(tasks=3),
        ("3 active", "limit of 3"),
    ),
}

# (filter, task, node, load) that the filter lets through
PASSING: dict[str, tuple[f.Filter, PendingTask, Candidate, NodeLoad]] = {
    "voter": (f.node_is_voter, task(), node(role="voter"), load()),
    "active": (f.node_is_active, task(), node(status="active"), load()),
    "executor": (f.executor_type, task("noop"), node(executors=frozenset({"noop"})), load()),
    "gpu-present": (
        f.requires_gpu,
        task(requiresGpu=True),
        node(resources=resources(gpu=GPU)),
        load(),
    ),
    "gpu-not-required": (f.requires_gpu, task(), node(resources=None), load()),
    "gaming-clean": (
        f.avoid_gaming,
        task(avoidGaming=True),
        node(labels={"zone": "a"}),
        load(),
    ),
    "gaming-not-avoided": (
        f.avoid_gaming,
        task(),
        node(labels={"gaming": "true"}, resources=resources(gaming_detected=True)),
        load(),
    ),
    "memory-exact": (f.min_memory, task(minMemoryMb=8000), node(), load()),
    "memory-after-reservation": (
        f.min_memory,
        task(minMemoryMb=3000),
        node(),
        load(reserved_mb=5000),
    ),
    "memory-not-required": (f.min_memory, task(), node(resources=None), load()),
    "disk-exact": (f.min_disk, task(minDiskGb=100), node(), load()),
    "disk-not-required": (f.min_disk, task(), node(resources=None), load()),
    "label-value": (
        f.node_labels,
        task(nodeLabels=["zone=a", "ssd"]),
        node(labels={"zone": "a", "ssd": "", "extra": "x"}),
        load(),
    ),
    "label-bare-any-value": (
        f.node_labels,
        task(nodeLabels=["ssd"]),
        node(labels={"ssd": "nvme"}),
        load(),
    ),
    "target": (f.target_node, task(targetNode="n1"), node("n1"), load()),
    "capabilities": (
        f.requires_capabilities,
        task(requiresCapabilities={"arch": "arm64", "os": "linux"}),
        node(capabilities={"arch": "arm64", "os": "linux", "cuda": "12"}),
        load(),
    ),
    "allowed": (f.allowed_nodes, task(allowedNodes=["n1", "n2"]), node("n1"), load()),
    "allowed-empty": (f.allowed_nodes, task(), node("n1"), load()),
    "forbidden-other": (f.forbidden_nodes, task(forbiddenNodes=["n2"]), node("n1"), load()),
    "max-parallel-below": (
        f.max_parallel_per_node,
        task(maxParallelPerNode=2),
        node(),
        load(tasks=1),
    ),
    "max-parallel-unset": (f.max_parallel_per_node, task(), node(max_tasks=0), load(tasks=50)),
    "max-tasks-below": (f.node_capacity, task(), node(max_tasks=3), load(tasks=2)),
    "max-tasks-unlimited": (f.node_capacity, task(), node(max_tasks=0), load(tasks=50)),
}


@pytest.mark.parametrize("case", sorted(FAILING))
def test_filter_excludes_and_says_why(case: str) -> None:
    check, pending, candidate, node_load, figures = FAILING[case]
    why = check(pending, candidate, node_load)
    assert_reason(why, candidate.id, *figures)
    # Composed into the stack, the same reason is the one shown.
    assert check in FILTERS
    assert first_failure(pending, candidate, node_load) == why


@pytest.mark.parametrize("case", sorted(PASSING))
def test_filter_lets_a_fitting_node_through(case: str) -> None:
    check, pending, candidate, node_load = PASSING[case]
    assert check(pending, candidate, node_load) is None
    assert first_failure(pending, candidate, node_load) is None


def test_every_filter_is_covered_by_a_failing_and_a_passing_case() -> None:
    assert {FAILING[c][0] for c in FAILING} == set(FILTERS)
    assert {PASSING[c][0] for c in PASSING} == set(FILTERS)


def test_status_is_reported_before_reachability() -> None:
    assert_reason(f.node_is_active(task(), node(reachable=False), load()), "n1", "not reachable")
    draining_and_gone = f.node_is_active(task(), node(status="draining", reachable=False), load())
    assert_reason(draining_and_gone, "n1", "draining")


def test_gaming_label_counts_whatever_its_value() -> None:
    assert f.avoid_gaming(task(avoidGaming=True), node(labels={"gaming": ""}), load())


def test_label_value_must_match_exactly() -> None:
    assert f.node_labels(task(nodeLabels=["zone=a"]), node(labels={"zone": "a"}), load()) is None
    assert f.node_labels(task(nodeLabels=["zone=a"]), node(labels={"zone": "ab"}), load())
    # A node labelled "zone=a" as a key is not a node with zone set to a.
    assert f.node_labels(task(nodeLabels=["zone=a"]), node(labels={"zone=a": ""}), load())


def test_label_reason_lists_every_missing_label_only() -> None:
    why = f.node_labels(
        task(nodeLabels=["zone=a", "ssd", "rack=7"]), node(labels={"zone": "a"}), load()
    )
    assert_reason(why, "n1", "ssd", "rack=7")
    assert why is not None and "zone=a" not in why


def test_capabilities_must_all_match() -> None:
    why = f.requires_capabilities(
        task(requiresCapabilities={"arch": "arm64", "os": "linux"}),
        node(capabilities={"arch": "arm64", "os": "windows"}),
        load(),
    )
    assert_reason(why, "n1", "os", "linux", "windows")


def test_memory_figures_are_available_minus_reserved() -> None:
    why = f.min_memory(task(minMemoryMb=6000), node(), load(reserved_mb=2500))
    assert_reason(why, "n1", "minMemoryMb 6000", "available 5500")
    # One megabyte more than what is left fails; exactly what is left fits.
    assert f.min_memory(task(minMemoryMb=5501), node(), load(reserved_mb=2500))
    assert f.min_memory(task(minMemoryMb=5500), node(), load(reserved_mb=2500)) is None


def test_memory_reserved_on_the_node_before_the_round_counts() -> None:
    reserved = node("n1", reserved_memory_mb=6000)
    result = schedule_round(
        [PendingTask(id="t", constraints=Constraints(minMemoryMb=4096))], [reserved]
    )
    assert result.placements == []
    assert_reason(result.unplaced["t"][0], "n1", "4096", "available 2000")


def test_memory_reserved_earlier_in_the_round_counts() -> None:
    pending = [
        PendingTask(id=f"t{i}", created_at=i, constraints=Constraints(minMemoryMb=3000))
        for i in range(3)
    ]
    result = schedule_round(pending, [node("n1")])
    assert [(p.task_id, p.node) for p in result.placements] == [("t0", "n1"), ("t1", "n1")]
    assert list(result.unplaced) == ["t2"]
    # 8000 available, 2 x 3000 promised this round.
    assert len(result.unplaced["t2"]) == 1
    assert_reason(result.unplaced["t2"][0], "n1", "minMemoryMb 3000", "available 2000")


def test_memory_reserved_this_round_moves_the_next_task_elsewhere() -> None:
    pending = [
        PendingTask(id=f"t{i}", created_at=i, constraints=Constraints(minMemoryMb=5000))
        for i in range(2)
    ]
    result = schedule_round(pending, [node("n1"), node("n2")])
    assert sorted(p.node for p in result.placements) == ["n1", "n2"]


def test_max_parallel_counts_this_rounds_placements() -> None:
    pending = [
        PendingTask(id=f"t{i}", created_at=i, constraints=Constraints(maxParallelPerNode=2))
        for i in range(3)
    ]
    result = schedule_round(pending, [node("n1", active_tasks=1)])
    assert [p.task_id for p in result.placements] == ["t0"]
    assert set(result.unplaced) == {"t1", "t2"}
    assert_reason(result.unplaced["t1"][0], "n1", "maxParallelPerNode 2", "2 active")


def test_target_node_that_does_not_exist_leaves_the_task_queued() -> None:
    result = schedule_round(
        [PendingTask(id="t", constraints=Constraints(targetNode="ghost"))], [node("n1"), node("n2")]
    )
    assert result.placements == []
    reasons = result.unplaced["t"]
    assert len(reasons) == 2
    for node_id, reason in zip(("n1", "n2"), reasons, strict=True):
        assert_reason(reason, node_id, "targetNode", "ghost")


def test_unplaced_task_gets_each_nodes_own_reason() -> None:
    arm = {"arch": "arm64"}
    nodes = [
        node("n1", labels={"gaming": "1"}, capabilities=arm),
        node("n2", resources=resources(memory_available_mb=1000), capabilities=arm),
        node("n3", capabilities={"arch": "amd64"}),
        node("n4", resources=resources(disk_available_gb=2), capabilities=arm),
        node("n5", status="cordoned", capabilities=arm),
    ]
    pending = PendingTask(
        id="t",
        constraints=Constraints(
            avoidGaming=True, minMemoryMb=2048, minDiskGb=10, requiresCapabilities={"arch": "arm64"}
        ),
    )
    result = schedule_round([pending], nodes)
    assert result.placements == []
    reasons = result.unplaced["t"]
    assert len(reasons) == 5
    by_node = {r.split(":", 1)[0]: r for r in reasons}
    assert set(by_node) == {"n1", "n2", "n3", "n4", "n5"}
    assert "gaming" in by_node["n1"]
    assert "2048" in by_node["n2"] and "1000" in by_node["n2"]
    assert "arm64" in by_node["n3"] and "amd64" in by_node["n3"]
    assert "10" in by_node["n4"] and "2.0" in by_node["n4"]
    assert "cordoned" in by_node["n5"]


def test_explain_names_the_constraint_that_excludes_each_node() -> None:
    pending = task(minMemoryMb=4096, nodeLabels=["zone=a"])
    nodes = [
        node("n1", labels={"zone": "b"}),
        node("n2", labels={"zone": "a"}, resources=resources(memory_available_mb=2048)),
    ]
    reasons = explain(pending, nodes)
    assert len(reasons) == 2
    assert_reason(reasons[0], "n1", "zone=a")
    assert_reason(reasons[1], "n2", "4096", "2048")


def test_explain_is_empty_as_soon_as_one_node_fits() -> None:
    pending = task(minMemoryMb=4096, nodeLabels=["zone=a"])
    nodes = [
        node("n1", labels={"zone": "b"}),
        node("n2", labels={"zone": "a"}, resources=resources(memory_available_mb=2048)),
        node("n3", labels={"zone": "a"}),
    ]
    assert explain(pending, nodes) == []


def test_explain_accounts_for_memory_already_reserved() -> None:
    pending = task(minMemoryMb=4096)
    assert explain(pending, [node("n1", reserved_memory_mb=3000)]) == []
    reasons = explain(pending, [node("n1", reserved_memory_mb=5000)])
    assert len(reasons) == 1
    assert_reason(reasons[0], "n1", "4096", "3000")


def shown_figures(reason: str) -> list[float]:
    """The numbers in a reason, after the node id."""
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", reason.split(":", 1)[1])]


@pytest.mark.parametrize(
    ("check", "pending", "report"),
    [
        (f.min_memory, task(minMemoryMb=4096), resources(memory_available_mb=4095.6)),
        (f.min_disk, task(minDiskGb=10), resources(disk_available_gb=9.96)),
    ],
    ids=["memory", "disk"],
)
def test_shown_figures_support_the_verdict(
    check: f.Filter, pending: PendingTask, report: NodeResources
) -> None:
    why = check(pending, node(resources=report), load())
    assert why is not None
    needed, available = shown_figures(why)
    assert needed > available, why
