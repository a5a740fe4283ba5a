"""Fair queueing of sandbox work (pure, with a fake clock) and the bounded
cache it and the syntax checks remember sources in."""

from __future__ import annotations

import pytest

from cortex.workflows.fair_queue import FairQueue
from cortex.workflows.lru_cache import LruCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _drain(queue: FairQueue[str]) -> list[str]:
    order = []
    while (taken := queue.pop()) is not None:
        order.append(taken[1])
    return order


def test_one_flow_is_first_in_first_out():
    queue: FairQueue[str] = FairQueue(clock=Clock())
    for item in "abc":
        queue.push("w1", item, "src")
    assert len(queue) == 3
    assert _drain(queue) == ["a", "b", "c"]
    assert len(queue) == 0 and queue.pop() is None


def test_flows_that_used_no_time_take_turns_in_arrival_order():
    queue: FairQueue[str] = FairQueue(clock=Clock())
    queue.push("w1", "w1-a")
    queue.push("w1", "w1-b")
    queue.push("w2", "w2-a")
    queue.push("w3", "w3-a")
    assert _drain(queue) == ["w1-a", "w1-b", "w2-a", "w3-a"]


def test_a_flow_that_spent_time_waits_behind_one_that_did_not():
    queue: FairQueue[str] = FairQueue(clock=Clock())
    for i in range(5):
        queue.push("busy", f"busy-{i}", f"slow-{i}")
    flow, item, cost_key = queue.pop() or ("", "", None)
    assert (flow, item) == ("busy", "busy-0")
    queue.record(flow, cost_key, 0.1)  # it timed out
    queue.push("other", "other-0", "fresh")
    assert queue.pop() == ("other", "other-0", "fresh")
    assert _drain(queue) == [f"busy-{i}" for i in range(1, 5)]


def test_a_source_known_to_be_slow_waits_behind_unknown_ones_from_other_flows():
    """Many workflows with one slow condition each: once the condition's cost
    is known, a newcomer goes ahead of all of them."""
    queue: FairQueue[str] = FairQueue(clock=Clock())
    for i in range(150):
        queue.push(f"slow-{i}", f"slow-{i}", "while(true){}")
    flow, _, cost_key = queue.pop() or ("", "", None)
    queue.record(flow, cost_key, 0.1)
    assert queue.expected_cost("while(true){}") == pytest.approx(0.1)
    queue.push("newcomer", "quick", "parent.a.exitCode === 0")
    assert queue.pop() == ("newcomer", "quick", "parent.a.exitCode === 0")
    # The rest keep their order.
    assert _drain(queue) == [f"slow-{i}" for i in range(1, 150)]


def test_costs_are_averaged_per_source_and_charges_decay():
    clock = Clock()
    queue: FairQueue[str] = FairQueue(half_life_s=10.0, clock=clock)
    queue.record("w", "src", 0.2)
    queue.record("w", "src", 0.1)
    assert queue.expected_cost("src") == pytest.approx(0.15)
    assert queue.expected_cost("unknown") == 0.0 and queue.expected_cost(None) == 0.0
    assert queue.charge("w") == pytest.approx(0.3)
    clock.now += 10.0
    assert queue.charge("w") == pytest.approx(0.15)
    clock.now += 100.0
    assert queue.charge("w") < 0.001
    # A flow whose charge has decayed is level with a fresh one again.
    queue.push("w", "old")
    queue.push("new", "new")
    assert _drain(queue) == ["old", "new"]


def test_removed_and_drained_items_are_gone():
    queue: FairQueue[object] = FairQueue(clock=Clock())
    a, b, c = object(), object(), object()
    queue.push("w1", a)
    queue.push("w1", b)
    queue.push("w2", c)
    assert queue.remove("w1", b) and not queue.remove("w1", b) and not queue.remove("nope", a)
    assert len(queue) == 2
    assert queue.drain() == [a, c]
    assert len(queue) == 0 and queue.pop() is None


def test_idle_flows_are_forgotten():
    clock = Clock()
    queue: FairQueue[str] = FairQueue(half_life_s=1.0, clock=clock)
    for i in range(600):
        queue.push(f"w{i}", "x")
        queue.pop()
        queue.record(f"w{i}", None, 0.01)
    clock.now += 60
    for _ in range(600):
        queue.push("later", "x")
        queue.pop()
    assert len(queue._flows) < 300  # swept as they decayed


def test_the_cache_is_bounded_and_keeps_what_was_used_last():
    cache: LruCache[str, int] = LruCache(3)
    for i, key in enumerate("abc"):
        cache.put(key, i)
    assert cache.get("a") == 0  # refreshes a
    cache.put("d", 3)  # evicts b, the least recently used
    assert "b" not in cache and cache.get("b") is None
    assert [cache.get(k) for k in "acd"] == [0, 2, 3]
    cache.put("a", 9)
    assert cache.get("a") == 9 and len(cache) == 3
    assert cache.hits == 5 and cache.misses == 1
    for i in range(1000):
        cache.put(str(i), i)
    assert len(cache) == 3
    with pytest.raises(ValueError):
        LruCache(0)
