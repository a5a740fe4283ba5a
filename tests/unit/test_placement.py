"""Pure placement: a burst spreads, unusable nodes are skipped, capacity is
respected, ties break by node id, and unplaced tasks say why."""

from __future__ import annotations

from collections import Counter

from cortex.scheduler import (
    Candidate,
    NodeResources,
    PendingTask,
    RoundResult,
    explain,
    schedule_round,
)


def node(
    node_id: str,
    *,
    status: str = "active",
    reachable: bool = True,
    executors: tuple[str, ...] = ("shell", "noop"),
    active: int = 0,
    max_tasks: int = 10,
    prefetch_tasks: int = 0,
    resources: NodeResources | None = None,
) -> Candidate:
    return Candidate(
        id=node_id,
        status=status,
        reachable=reachable,
        executors=frozenset(executors),
        active_tasks=active,
        max_tasks=max_tasks,
        prefetch_tasks=prefetch_tasks,
        resources=resources,
    )


def tasks(count: int, type_: str = "shell", attempt: int = 0) -> list[PendingTask]:
    return [PendingTask(id=f"t{i:02d}", type=type_, attempt=attempt) for i in range(count)]


def placed(result: RoundResult) -> list[tuple[str, str, int]]:
    return [(p.task_id, p.node, p.attempt) for p in result.placements]


def test_burst_spreads_evenly_across_nodes() -> None:
    result = schedule_round(tasks(9), [node("a"), node("b"), node("c")])
    assert result.unplaced == {}
    assert Counter(p.node for p in result.placements) == {"a": 3, "b": 3, "c": 3}
    assert [p.task_id for p in result.placements] == [f"t{i:02d}" for i in range(9)]


def test_burst_fills_the_least_loaded_node_first() -> None:
    result = schedule_round(tasks(4), [node("a", active=3), node("b", active=0)])
    assert [p.node for p in result.placements] == ["b", "b", "b", "a"]


def test_placement_is_for_the_next_attempt() -> None:
    result = schedule_round([PendingTask(id="t", type="shell", attempt=2)], [node("a")])
    assert placed(result) == [("t", "a", 3)]


def test_ties_break_by_node_id_not_input_order() -> None:
    result = schedule_round(tasks(3), [node("c"), node("a"), node("b")])
    assert [p.node for p in result.placements] == ["a", "b", "c"]


def test_inactive_and_unreachable_nodes_are_skipped() -> None:
    nodes = [
        node("a", status="draining"),
        node("b", status="cordoned"),
        node("c", status="offline"),
        node("d", reachable=False),
        node("e", active=5),
    ]
    result = schedule_round(tasks(4), nodes)
    assert {p.node for p in result.placements} == {"e"}
    assert len(result.placements) == 4


def test_executor_type_must_be_supported() -> None:
    nodes = [node("a", executors=("shell",)), node("b", executors=("noop",))]
    result = schedule_round(
        [PendingTask(id="s", type="shell"), PendingTask(id="n", type="noop")], nodes
    )
    assert {(p.task_id, p.node) for p in result.placements} == {("s", "a"), ("n", "b")}


def test_max_tasks_is_respected_within_the_round() -> None:
    nodes = [node("a", active=1, max_tasks=2), node("b", active=0, max_tasks=1)]
    result = schedule_round(tasks(5), nodes)
    assert Counter(p.node for p in result.placements) == {"a": 1, "b": 1}
    assert set(result.unplaced) == {"t02", "t03", "t04"}
    for reasons in result.unplaced.values():
        assert len(reasons) == 2
        assert any(r.startswith("a:") and "limit of 2" in r for r in reasons)
        assert any(r.startswith("b:") and "limit of 1" in r for r in reasons)


def test_tasks_wait_on_a_node_only_while_no_node_has_a_free_slot() -> None:
    """`a` scores far better (idle CPU, no other load) but its slots are
    full: `b` takes tasks while it has free slots, then the two take tasks to
    wait for their slots, best score first, up to their prefetch; beyond it
    the tasks stay queued, saying so."""
    idle = NodeResources(cpu_usage_percent=0.0, memory_total_mb=100, memory_available_mb=100)
    busy = NodeResources(cpu_usage_percent=100.0, memory_total_mb=100, memory_available_mb=1)
    nodes = [
        node("a", active=4, max_tasks=4, prefetch_tasks=2, resources=idle),
        node("b", active=2, max_tasks=4, prefetch_tasks=1, resources=busy),
    ]
    result = schedule_round(tasks(6), nodes)
    assert [p.node for p in result.placements] == ["b", "b", "a", "a", "b"]
    (reasons,) = {tuple(r) for r in result.unplaced.values()}
    assert set(result.unplaced) == {"t05"}
    assert "a: 6 active tasks, at its limit of 4 running and 2 waiting" in reasons
    assert "b: 5 active tasks, at its limit of 4 running and 1 waiting" in reasons


def test_unplaced_tasks_get_one_reason_per_node() -> None:
    nodes = [
        node("a", status="draining"),
        node("b", reachable=False),
        node("c", executors=("noop",)),
        node("d", active=4, max_tasks=4),
    ]
    result = schedule_round(tasks(1), nodes)
    assert result.placements == []
    reasons = result.unplaced["t00"]
    assert len(reasons) == 4
    by_node = {r.split(":", 1)[0]: r for r in reasons}
    assert set(by_node) == {"a", "b", "c", "d"}
    assert "draining" in by_node["a"]
    assert "reachable" in by_node["b"]
    assert "shell" in by_node["c"]
    assert "limit" in by_node["d"]


def test_no_nodes_at_all() -> None:
    result = schedule_round(tasks(2), [])
    assert result.placements == []
    assert set(result.unplaced) == {"t00", "t01"}
    assert all(len(reasons) == 1 for reasons in result.unplaced.values())


def test_explain_gives_one_reason_per_excluded_node() -> None:
    task = PendingTask(id="t", type="shell")
    nodes = [node("x", status="cordoned"), node("y", executors=("noop",))]
    reasons = explain(task, nodes)
    assert len(reasons) == 2
    assert reasons[0].startswith("x:") and "cordoned" in reasons[0]
    assert reasons[1].startswith("y:") and "shell" in reasons[1]


def test_explain_is_empty_when_some_node_fits() -> None:
    task = PendingTask(id="t", type="shell")
    assert explain(task, [node("x", status="offline"), node("y")]) == []


def test_explain_with_no_nodes_says_so() -> None:
    reasons = explain(PendingTask(id="t", type="shell"), [])
    assert len(reasons) == 1 and "no nodes" in reasons[0]


def test_more_headroom_wins_when_loads_are_equal() -> None:
    busy = NodeResources(
        cpu_cores=8, cpu_usage_percent=95, memory_total_mb=16000, memory_available_mb=1000
    )
    idle = NodeResources(
        cpu_cores=8, cpu_usage_percent=5, memory_total_mb=16000, memory_available_mb=15000
    )
    nodes = [
        Candidate(id="a-busy", max_tasks=10, resources=busy),
        Candidate(id="b-idle", max_tasks=10, resources=idle),
    ]
    result = schedule_round(tasks(1), nodes)
    assert [p.node for p in result.placements] == ["b-idle"]


def test_inputs_are_not_modified() -> None:
    nodes = [node("a", active=2), node("b", active=1)]
    before = list(nodes)
    schedule_round(tasks(3), nodes)
    assert nodes == before and nodes[0].active_tasks == 2


def test_higher_priority_is_placed_first_when_capacity_is_short() -> None:
    pending = [
        PendingTask(id="low", priority=1, created_at=1),
        PendingTask(id="high", priority=9, created_at=5),
        PendingTask(id="older", priority=9, created_at=2),
    ]
    result = schedule_round(pending, [node("a", max_tasks=2)])
    assert [p.task_id for p in result.placements] == ["older", "high"]
    assert set(result.unplaced) == {"low"}
