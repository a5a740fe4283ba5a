"""Score terms and the placements they lead to, on plain data. Every expected
number is worked out by hand from the weights of SPEC §5: CPU headroom x0.3,
memory headroom x0.3, disk-I/O headroom x0.15, network headroom x0.1, GPU
headroom x0.15 for GPU tasks only, and -5 per task on the node, counting
this round's placements. Also: ties break by node id, a burst spreads,
`targetNode` and `maxParallelPerNode` override the best score, tasks go in
priority order, and a node whose recorded load rises receives fewer tasks
over successive rounds."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from cortex.scheduler import (
    SCORES,
    Candidate,
    GpuInfo,
    NodeLoad,
    NodeResources,
    PendingTask,
    choose_node,
    order_tasks,
    schedule_round,
    score_node,
)
from cortex.scheduler import scores as s
from cortex.spec import Constraints


def resources(**overrides: Any) -> NodeResources:
    """An idle node unless told otherwise: every headroom at 100%."""
    values: dict[str, Any] = {
        "cpu_cores": 8,
        "cpu_usage_percent": 0,
        "memory_total_mb": 16000,
        "memory_available_mb": 16000,
        "disk_total_gb": 500,
        "disk_available_gb": 400,
        "disk_io_util_percent": 0,
        "network_bandwidth_mbps": 1000,
        "network_throughput_mbps": 0,
    }
    values.update(overrides)
    return NodeResources(**values)


def node(node_id: str, res: NodeResources | None = None, **fields: Any) -> Candidate:
    fields.setdefault("max_tasks", 100)
    return Candidate(id=node_id, resources=res if res is not None else resources(), **fields)


def task(task_id: str = "t", **constraints: Any) -> PendingTask:
    return PendingTask(id=task_id, constraints=Constraints(**constraints))


def burst(count: int, **constraints: Any) -> list[PendingTask]:
    return [
        PendingTask(id=f"t{i:02d}", created_at=i, constraints=Constraints(**constraints))
        for i in range(count)
    ]


def load(tasks: int = 0, reserved_mb: float = 0.0) -> NodeLoad:
    return NodeLoad(tasks=tasks, memory_reserved_mb=reserved_mb)


# A node with cpu 20%, memory 12000/16000 free, disk I/O 40%, network
# 250/1000 Mbps, a GPU at 30%, and 3 tasks running:
#   cpu 80 x 0.3 = 24, memory 75 x 0.3 = 22.5, disk 60 x 0.15 = 9,
#   network 75 x 0.1 = 7.5, GPU 70 x 0.15 = 10.5 (GPU tasks only), tasks -15.
WORKED = resources(
    cpu_usage_percent=20,
    memory_available_mb=12000,
    disk_io_util_percent=40,
    network_throughput_mbps=250,
    gpu=GpuInfo(name="rtx", memory_total_mb=8000, memory_used_mb=2000, usage_percent=30),
)


def test_cpu_headroom_term() -> None:
    assert s.cpu_headroom(task(), node("n", WORKED), load()) == pytest.approx(24.0)
    assert s.cpu_headroom(task(), node("n", resources(cpu_usage_percent=95)), load()) == (
        pytest.approx(1.5)
    )


def test_memory_headroom_term() -> None:
    assert s.memory_headroom(task(), node("n", WORKED), load()) == pytest.approx(22.5)


def test_memory_headroom_subtracts_reserved_memory() -> None:
    # (12000 - 4000) / 16000 = 50% -> 15
    assert s.memory_headroom(task(), node("n", WORKED), load(reserved_mb=4000)) == (
        pytest.approx(15.0)
    )


def test_disk_io_headroom_term() -> None:
    assert s.disk_io_headroom(task(), node("n", WORKED), load()) == pytest.approx(9.0)


def test_network_headroom_term() -> None:
    assert s.network_headroom(task(), node("n", WORKED), load()) == pytest.approx(7.5)


def test_gpu_headroom_counts_for_gpu_tasks_only() -> None:
    gpu_task = task(requiresGpu=True)
    assert s.gpu_headroom(gpu_task, node("n", WORKED), load()) == pytest.approx(10.5)
    assert s.gpu_headroom(task(), node("n", WORKED), load()) == 0.0


def test_running_tasks_term() -> None:
    assert s.running_tasks(task(), node("n", WORKED), load(tasks=3)) == pytest.approx(-15.0)
    assert s.running_tasks(task(), node("n", WORKED), load(tasks=0)) == 0.0


def test_total_is_the_sum_of_all_terms() -> None:
    worked = node("n", WORKED)
    assert score_node(task(), worked, load(tasks=3)) == pytest.approx(48.0)
    assert score_node(task(requiresGpu=True), worked, load(tasks=3)) == pytest.approx(58.5)
    assert len(SCORES) == 6


def test_idle_node_scores_the_full_weight() -> None:
    # 100 x (0.3 + 0.3 + 0.15 + 0.1) = 85, plus 100 x 0.15 for a GPU task.
    idle = node("n", resources(gpu=GpuInfo("g", 8000, 0, 0)))
    assert score_node(task(), idle, load()) == pytest.approx(85.0)
    assert score_node(task(requiresGpu=True), idle, load()) == pytest.approx(100.0)


def test_headroom_is_clamped_to_zero_and_a_hundred() -> None:
    over = resources(
        cpu_usage_percent=130,
        memory_available_mb=20000,
        disk_io_util_percent=150,
        network_throughput_mbps=3000,
    )
    n = node("n", over)
    assert s.cpu_headroom(task(), n, load()) == 0.0
    assert s.memory_headroom(task(), n, load()) == pytest.approx(30.0)
    assert s.disk_io_headroom(task(), n, load()) == 0.0
    assert s.network_headroom(task(), n, load()) == 0.0
    assert s.memory_headroom(task(), node("n"), load(reserved_mb=20000)) == 0.0


def test_node_without_a_report_scores_as_half_loaded() -> None:
    # The documented fallback: 50% headroom for every measured term, no GPU.
    # 50 x (0.3 + 0.3 + 0.15 + 0.1) = 42.5
    bare = Candidate(id="n", resources=None)
    assert score_node(task(), bare, load()) == pytest.approx(42.5)
    assert score_node(task(requiresGpu=True), bare, load()) == pytest.approx(42.5)


def test_placement_carries_the_hand_computed_score() -> None:
    result = schedule_round([task()], [node("n", WORKED, active_tasks=3)])
    assert [(p.node, p.score) for p in result.placements] == [("n", pytest.approx(48.0))]


def test_more_headroom_in_any_one_term_wins() -> None:
    for worse in (
        resources(cpu_usage_percent=10),
        resources(memory_available_mb=15000),
        resources(disk_io_util_percent=10),
        resources(network_throughput_mbps=100),
    ):
        # The worse node sorts first by id so only the score can pick "z".
        picked = choose_node(task(), [node("a", worse), node("z", resources())])
        assert picked is not None and picked[0].id == "z"


def test_gpu_headroom_picks_between_gpu_nodes() -> None:
    busy = resources(gpu=GpuInfo("g", 8000, 7000, usage_percent=90))
    free = resources(gpu=GpuInfo("g", 8000, 0, usage_percent=10))
    picked = choose_node(task(requiresGpu=True), [node("a", busy), node("b", free)])
    assert picked is not None
    # b: 85 + 90 x 0.15 = 98.5
    assert (picked[0].id, picked[1]) == ("b", pytest.approx(98.5))


def test_equal_totals_tie_break_by_node_id() -> None:
    # cpu 20% / memory 50%: 80 x 0.3 + 50 x 0.3 = 39 (+ 15 + 10 for disk and network)
    # cpu 50% / memory 80%: 50 x 0.3 + 80 x 0.3 = 39 (+ 15 + 10)
    cpu_light = resources(cpu_usage_percent=20, memory_available_mb=8000)
    mem_light = resources(cpu_usage_percent=50, memory_available_mb=12800)
    for first, second in ((cpu_light, mem_light), (mem_light, cpu_light)):
        nodes = [node("b", first), node("a", second)]
        result = schedule_round([task()], nodes)
        assert [(p.node, p.score) for p in result.placements] == [("a", pytest.approx(64.0))]


def test_burst_spreads_by_score_within_one_round() -> None:
    # a: cpu 10% -> 27 + 30 + 15 + 10 = 82;  b: cpu 50% -> 15 + 30 + 15 + 10 = 70.
    # Each placement costs its node 5: a 82, a 77, a 72, then b 70 > a 67,
    # then a 67 > b 65, then b 65 > a 62.
    nodes = [node("a", resources(cpu_usage_percent=10)), node("b", resources(cpu_usage_percent=50))]
    result = schedule_round(burst(6), nodes)
    assert [(p.node, p.score) for p in result.placements] == [
        ("a", pytest.approx(82.0)),
        ("a", pytest.approx(77.0)),
        ("a", pytest.approx(72.0)),
        ("b", pytest.approx(70.0)),
        ("a", pytest.approx(67.0)),
        ("b", pytest.approx(65.0)),
    ]


def test_burst_across_equal_nodes_alternates() -> None:
    nodes = [node(n) for n in ("c", "b", "a")]
    result = schedule_round(burst(7), nodes)
    assert [p.node for p in result.placements] == ["a", "b", "c", "a", "b", "c", "a"]
    assert [p.score for p in result.placements] == [
        pytest.approx(x) for x in (85,) * 3 + (80,) * 3 + (75,)
    ]


def test_memory_promised_this_round_lowers_the_nodes_score() -> None:
    # a: cpu 10% -> 82; b: cpu 30% -> 21 + 30 + 15 + 10 = 76.
    nodes = [node("a", resources(cpu_usage_percent=10)), node("b", resources(cpu_usage_percent=30))]
    # Without memory: after one task a has 77 > 76, so a takes both.
    assert [p.node for p in schedule_round(burst(2), nodes).placements] == ["a", "a"]
    # With 4000 MB each: a drops by 5 + 25% x 0.3 = 12.5 to 69.5 < 76.
    heavy = schedule_round(burst(2, minMemoryMb=4000), nodes)
    assert [(p.node, p.score) for p in heavy.placements] == [
        ("a", pytest.approx(82.0)),
        ("b", pytest.approx(76.0)),
    ]


def test_running_tasks_already_on_a_node_count() -> None:
    # a: 85 - 3 x 5 = 70; b: cpu 40% -> 18 + 55 - 1 x 5 = 68.
    nodes = [
        node("a", resources(), active_tasks=3),
        node("b", resources(cpu_usage_percent=40), active_tasks=1),
    ]
    picked = choose_node(task(), nodes)
    assert picked is not None and (picked[0].id, picked[1]) == ("a", pytest.approx(70.0))
    nodes[0] = node("a", resources(), active_tasks=4)  # 65 < 68
    picked = choose_node(task(), nodes)
    assert picked is not None and (picked[0].id, picked[1]) == ("b", pytest.approx(68.0))


def test_target_node_bypasses_scores() -> None:
    # a idle: 85; b busy (cpu 90%, disk I/O 90%, 4 tasks): 3 + 30 + 1.5 + 10 - 20 = 24.5
    nodes = [
        node("a"),
        node("b", resources(cpu_usage_percent=90, disk_io_util_percent=90), active_tasks=4),
    ]
    assert [p.node for p in schedule_round([task()], nodes).placements] == ["a"]
    pinned = schedule_round(burst(3, targetNode="b"), nodes)
    assert [(p.node, p.score) for p in pinned.placements] == [
        ("b", pytest.approx(24.5)),
        ("b", pytest.approx(19.5)),
        ("b", pytest.approx(14.5)),
    ]


def test_target_node_that_cannot_take_the_task_is_not_replaced() -> None:
    nodes = [node("a"), node("b", status="cordoned")]
    result = schedule_round([task(targetNode="b")], nodes)
    assert result.placements == []
    reasons = result.unplaced["t"]
    assert len(reasons) == 2
    assert reasons[0].startswith("a:") and "targetNode" in reasons[0]
    assert reasons[1].startswith("b:") and "cordoned" in reasons[1]


def test_node_at_max_parallel_is_skipped_despite_the_best_score() -> None:
    # a: 85 - 2 x 5 = 75; b: cpu 90% -> 3 + 55 = 58.
    nodes = [node("a", active_tasks=2), node("b", resources(cpu_usage_percent=90))]
    assert [p.node for p in schedule_round([task()], nodes).placements] == ["a"]
    limited = schedule_round([task(maxParallelPerNode=2)], nodes)
    assert [(p.node, p.score) for p in limited.placements] == [("b", pytest.approx(58.0))]


def test_max_parallel_caps_a_burst_per_node() -> None:
    nodes = [node("a"), node("b", resources(cpu_usage_percent=90)), node("c", active_tasks=1)]
    result = schedule_round(burst(5, maxParallelPerNode=1), nodes)
    # c already runs one task; a and b take one each.
    assert Counter(p.node for p in result.placements) == {"a": 1, "b": 1}
    assert set(result.unplaced) == {"t02", "t03", "t04"}


def test_order_is_priority_desc_then_created_at_asc() -> None:
    pending = [
        PendingTask(id="p5-late", priority=5, created_at=30),
        PendingTask(id="p9-late", priority=9, created_at=20),
        PendingTask(id="p0", priority=0, created_at=1),
        PendingTask(id="p5-early", priority=5, created_at=10),
        PendingTask(id="p9-early", priority=9, created_at=5),
        PendingTask(id="p10", priority=10, created_at=99),
    ]
    expected = ["p10", "p9-early", "p9-late", "p5-early", "p5-late", "p0"]
    assert [t.id for t in order_tasks(pending)] == expected
    assert [t.id for t in order_tasks(list(reversed(pending)))] == expected


def test_higher_priority_gets_the_better_node() -> None:
    # Only one slot on the best node; the urgent task submitted last takes it.
    nodes = [node("a", max_tasks=1), node("b", resources(cpu_usage_percent=80), max_tasks=1)]
    pending = [
        PendingTask(id="routine", priority=2, created_at=1),
        PendingTask(id="urgent", priority=8, created_at=9),
    ]
    result = schedule_round(pending, nodes)
    assert [(p.task_id, p.node) for p in result.placements] == [("urgent", "a"), ("routine", "b")]


def test_older_task_wins_at_equal_priority() -> None:
    pending = [PendingTask(id="new", created_at=50), PendingTask(id="old", created_at=10)]
    result = schedule_round(pending, [node("a", max_tasks=1)])
    assert [p.task_id for p in result.placements] == ["old"]
    assert list(result.unplaced) == ["new"]


# Recorded CPU usage (%) of node "a" as heartbeats delivered it, one report
# per scheduling round; node "b" stays idle throughout. Rounds 0-5 are before
# the rise, 6-8 the rise, 9-17 after.
CPU_TRACE_A = (10, 11, 9, 10, 12, 10, 35, 60, 85, 94, 95, 96, 95, 94, 95, 96, 95, 95)
CPU_TRACE_B = (9, 10, 10, 11, 9, 10, 10, 9, 11, 10, 10, 9, 10, 10, 11, 10, 9, 10)
BEFORE_RISE = range(0, 6)
AFTER_RISE = range(9, len(CPU_TRACE_A))
TASKS_PER_ROUND = 4
# A task placed in round r runs through rounds r + 1 and r + 2, then completes.
TASK_RUNS_FOR_ROUNDS = 2


def test_a_node_whose_load_rises_receives_fewer_new_tasks() -> None:
    running: list[tuple[str, int]] = []  # (node, round it was placed in)
    received: list[Counter[str]] = []
    for round_no, (cpu_a, cpu_b) in enumerate(zip(CPU_TRACE_A, CPU_TRACE_B, strict=True)):
        running = [(n, r) for n, r in running if round_no - r <= TASK_RUNS_FOR_ROUNDS]
        active = Counter(n for n, _ in running)
        nodes = [
            node("a", resources(cpu_usage_percent=cpu_a), active_tasks=active["a"]),
            node("b", resources(cpu_usage_percent=cpu_b), active_tasks=active["b"]),
        ]
        pending = [
            PendingTask(id=f"r{round_no}-{i}", created_at=round_no * 10 + i)
            for i in range(TASKS_PER_ROUND)
        ]
        result = schedule_round(pending, nodes)
        assert result.unplaced == {}
        received.append(Counter(p.node for p in result.placements))
        running += [(p.node, round_no) for p in result.placements]

    before = sum((received[r] for r in BEFORE_RISE), Counter())
    after = sum((received[r] for r in AFTER_RISE), Counter())
    assert abs(before["a"] - before["b"]) <= 2, before
    for r in BEFORE_RISE:
        assert abs(received[r]["a"] - received[r]["b"]) <= 2, (r, received[r])
    assert after["a"] < after["b"], after
    # At 95% the CPU term costs a about 25 points, five tasks' worth: a clear
    # majority goes to b, not a tie broken one way.
    assert after["b"] >= 2 * after["a"], after
    for r in AFTER_RISE:
        assert received[r]["a"] <= received[r]["b"], (r, received[r])
