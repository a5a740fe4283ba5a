"""Fair queues and per-key limits in `schedule_round`, over simulated runs:
placements split between fairness keys by weight; a key with one task is
served in the round it arrives whatever another key has queued; no round
passes a key's max-running; the token bucket never lets more starts through
than its burst plus its rate allows."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from cortex.scheduler import Candidate, PendingTask, schedule_round
from cortex.scheduler.fairness import LastServed
from cortex.scheduler.limits import TOKEN_UNITS, Bucket, KeyLimit, LimitGate, take_tokens

# Placements of two deep backlogs over a window must split by weight within
# this much of each key's expected share.
SHARE_TOLERANCE = 0.05


def backlog(key: str, count: int, start: int = 0, priority: int = 5) -> list[PendingTask]:
    return [
        PendingTask(
            f"{key}-{n:05d}", "noop", priority=priority, created_at=start + n, fairness_key=key
        )  # fmt: skip
        for n in range(count)
    ]


def nodes(slots: int, running: Counter[str] | None = None) -> list[Candidate]:
    active = sum((running or Counter()).values())
    return [Candidate("n1", executors=frozenset({"noop"}), max_tasks=slots, active_tasks=active)]


class Backlog:
    """A key's endless queue: the next `size` tasks, made as they are needed."""

    def __init__(self, key: str, first_created: int) -> None:
        self.key = key
        self.next = 0
        self.first_created = first_created

    def window(self, size: int) -> list[PendingTask]:
        return [
            PendingTask(
                f"{self.key}-{n:06d}",
                "noop",
                created_at=self.first_created + 2 * n,
                fairness_key=self.key,
            )  # fmt: skip
            for n in range(self.next, self.next + size)
        ]


@settings(max_examples=25, deadline=None)
@given(
    slots=st.integers(min_value=2, max_value=24),
    duration=st.integers(min_value=1, max_value=4),
    weights=st.sampled_from([(1, 3), (1, 1), (2, 5), (1, 9)]),
)
def test_two_deep_backlogs_share_placements_by_weight(
    slots: int, duration: int, weights: tuple[int, int]
) -> None:
    """Tasks last `duration` rounds; the cluster runs `slots` at once; each
    round sees the oldest 64 tasks of each key (the loop's per-key window)."""
    queues = {"a": Backlog("a", 0), "b": Backlog("b", 1)}
    weight = {"a": weights[0], "b": weights[1]}
    running: list[tuple[int, str]] = []  # (round it ends, key)
    placed: Counter[str] = Counter()
    for number in range(250):
        running = [(ends, key) for ends, key in running if ends > number]
        active = Counter(key for _, key in running)
        window = queues["a"].window(64) + queues["b"].window(64)
        result = schedule_round(window, nodes(slots, active), None, dict(active), weight)
        assert len(result.placements) == slots - len(running)
        for placement in result.placements:
            key = placement.task_id[0]
            # A key's tasks are placed oldest first.
            assert placement.task_id == f"{key}-{queues[key].next:06d}"
            queues[key].next += 1
            running.append((number + duration, key))
            if number >= 50:  # past the start, where both keys begin at zero
                placed[key] += 1
    share_b = placed["b"] / (placed["a"] + placed["b"])
    expected = weight["b"] / (weight["a"] + weight["b"])
    # A share can only be as fine as the cluster's slots allow.
    assert abs(share_b - expected) <= SHARE_TOLERANCE + 1 / slots, (share_b, expected)


@settings(max_examples=25, deadline=None)
@given(slots=st.integers(min_value=1, max_value=8), busy=st.integers(min_value=0, max_value=50))
def test_a_single_task_of_a_new_key_is_placed_within_one_round(slots: int, busy: int) -> None:
    """A 10,000-task backlog with `busy` tasks of its key running (ending at
    once): a task of another key is placed in the round it arrives, or, when
    the backlog's key has nothing running, in the next one at the latest."""
    big = backlog("big", 10_000)
    served = LastServed()
    # The backlog has been served before (the rounds before the single task came).
    served.serve("big")
    single = PendingTask("single-1", "noop", created_at=20_000, fairness_key="single")
    result = schedule_round([*big, single], nodes(slots + busy, Counter({"big": busy})), None,
                            {"big": busy}, {}, served)  # fmt: skip
    assert "single-1" in {p.task_id for p in result.placements}
    # Even where both keys have nothing running and there is one slot, each
    # round: the key served longest ago goes first.
    fresh = LastServed()
    for number in range(2):
        result = schedule_round([*big, single], nodes(1), None, {}, {}, fresh)
        if "single-1" in {p.task_id for p in result.placements}:
            break
        assert number == 0
        big = big[1:]
    else:
        raise AssertionError("the single task waited more than one round")


def test_priority_stays_strict_across_fairness_keys() -> None:
    urgent = backlog("a", 3, priority=9)
    rest = backlog("b", 3, start=10)
    result = schedule_round([*rest, *urgent], nodes(3), None, {"b": 0, "a": 100}, {})
    assert [p.task_id for p in result.placements] == [t.id for t in urgent]


@settings(max_examples=100, deadline=None)
@given(
    max_running=st.integers(min_value=1, max_value=5),
    running=st.integers(min_value=0, max_value=6),
    queued=st.integers(min_value=0, max_value=30),
    slots=st.integers(min_value=1, max_value=40),
)
def test_a_round_never_passes_a_keys_max_running(
    max_running: int, running: int, queued: int, slots: int
) -> None:
    tasks = [
        PendingTask(f"t{n}", "noop", created_at=n, concurrency_key="deploy") for n in range(queued)
    ]
    gate = LimitGate({"deploy": KeyLimit("deploy", max_running=max_running)},
                     {"deploy": running}, {}, now_ms=0)  # fmt: skip
    result = schedule_round(tasks, nodes(slots + running, Counter({"deploy": running})), gate)
    assert len(result.placements) == max(min(max_running - running, queued, slots), 0)
    held = [why for why in result.unplaced.values() if why[0].startswith("waiting: key deploy")]
    assert all(why == [f"waiting: key deploy at {max(running, max_running)}/{max_running} running"]
               for why in held)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    rate_per_min=st.integers(min_value=1, max_value=6000),
    burst=st.integers(min_value=1, max_value=5),
    tries=st.lists(
        st.tuples(
            st.integers(min_value=-50, max_value=2_000), st.integers(min_value=1, max_value=4)
        ),
        max_size=60,
    ),
)
def test_the_bucket_never_lets_more_starts_through_than_burst_plus_rate(
    rate_per_min: int, burst: int, tries: list[tuple[int, int]]
) -> None:
    """Entries arrive with times that mostly grow but may step back (another
    proposer's clock); each asks for a few starts."""
    limit = KeyLimit("api", rate_per_min=rate_per_min, burst=burst)
    bucket: Bucket | None = None
    now = 1_000_000
    taken: list[tuple[int, int]] = []
    for step, count in tries:
        now += step
        after = take_tokens(limit, bucket, now, count)
        if after is not None:
            bucket = after
            taken.append((bucket.at_ms, count))
    assert bucket is None or 0 <= bucket.units <= burst * TOKEN_UNITS
    for i, (start, _) in enumerate(taken):
        for end, _ in taken[i:]:
            started = sum(c for at, c in taken if start <= at <= end)
            allowed = burst + (end - start) * rate_per_min / TOKEN_UNITS
            assert started <= allowed + 1e-9, (start, end, started, allowed)


def test_a_gate_holds_a_key_at_its_rate_and_says_so() -> None:
    limit = KeyLimit("api", rate_per_min=300, burst=1)
    gate = LimitGate({"api": limit}, {}, {"api": Bucket(0, 1_000)}, now_ms=1_100)
    assert gate.held("api") == "waiting: key api at its rate of 5/s"
    later = LimitGate({"api": limit}, {}, {"api": Bucket(0, 1_000)}, now_ms=1_200)
    assert later.held("api") is None
    later.admit("api")
    assert later.held("api") == "waiting: key api at its rate of 5/s"
    assert later.held(None) is None and later.held("other") is None
