"""Retry back-off in integers (cortex/state/backoff.py): the same delays as
the floating point formula Cortex used before for every integer multiplier,
exact ones for multipliers with up to three decimals, and apply using it."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from cortex.spec import RetryPolicy
from cortex.state.backoff import (
    MAX_BACKOFF_MS,
    MAX_EXPONENT,
    backoff_delay_ms,
    exact_thousandths,
    nearest_thousandths,
)
from cortex.state.entries import Entry, NodeJoin, Payload, TaskAssign, TaskFailed, TaskSubmit
from cortex.state.entries import encode_batch as encode
from cortex.state.machine import StateMachine

BACKOFFS_MS = (0, 1, 7, 250, 1000, 4321, 60_000, MAX_BACKOFF_MS)
RETRIES = range(0, MAX_EXPONENT + 5)


def float_formula(backoff_ms: int, multiplier: float, retry_number: int) -> int:
    """The formula back-off used before, in floating point."""
    exponent = min(max(retry_number - 1, 0), 64)
    return int(min(backoff_ms * multiplier**exponent, MAX_BACKOFF_MS))


def exact_formula(backoff_ms: int, multiplier: Fraction, retry_number: int) -> int:
    exponent = min(max(retry_number - 1, 0), MAX_EXPONENT)
    return math.floor(min(backoff_ms * multiplier**exponent, MAX_BACKOFF_MS))


def test_default_policy_waits_one_two_four_seconds() -> None:
    policy = RetryPolicy()
    assert [backoff_delay_ms(1000, 2000, n) for n in (1, 2, 3)] == [1000, 2000, 4000]
    assert [policy.delay_ms(n) for n in (1, 2, 3)] == [1000, 2000, 4000]


@pytest.mark.parametrize("multiplier", range(1, 101))
def test_integer_multipliers_give_what_the_float_formula_gave(multiplier: int) -> None:
    for backoff_ms in BACKOFFS_MS:
        for retry in RETRIES:
            assert backoff_delay_ms(backoff_ms, multiplier * 1000, retry) == float_formula(
                backoff_ms, float(multiplier), retry
            ), (backoff_ms, multiplier, retry)


def test_one_and_a_half_is_exact() -> None:
    delays = [backoff_delay_ms(1000, nearest_thousandths(1.5), n) for n in range(1, 6)]
    assert delays == [1000, 1500, 2250, 3375, 5062]


@pytest.mark.parametrize("thousandths", [1001, 1100, 1250, 1333, 1999, 2675, 9999, 33_333, 100_000])
def test_multipliers_with_three_decimals_are_exact(thousandths: int) -> None:
    multiplier = thousandths / 1000  # as JSON carries it: a float
    assert exact_thousandths(multiplier) == thousandths
    for backoff_ms in BACKOFFS_MS:
        for retry in RETRIES:
            assert backoff_delay_ms(
                backoff_ms, nearest_thousandths(multiplier), retry
            ) == exact_formula(backoff_ms, Fraction(thousandths, 1000), retry)


def test_more_than_three_decimals_have_no_exact_thousandths() -> None:
    for value in (1.0005, 1.2345, 2.00001, 1 + 2**-40):
        assert exact_thousandths(value) is None, value
    assert exact_thousandths(3) == 3000
    assert exact_thousandths(1.1) == 1100  # the float nearest 1.1 is "1.1"
    # Rounded to the nearest thousandth for a value stored before the rule.
    assert nearest_thousandths(1.0004) == 1000 and nearest_thousandths(1.0006) == 1001


def test_a_growing_delay_stops_at_a_day() -> None:
    assert backoff_delay_ms(1000, 100_000, 64) == MAX_BACKOFF_MS
    assert backoff_delay_ms(MAX_BACKOFF_MS, 1000, 10**9) == MAX_BACKOFF_MS
    assert backoff_delay_ms(0, 100_000, 10**9) == 0


def test_apply_schedules_retries_with_the_integer_delays(tmp_path: Path) -> None:
    machine = StateMachine(str(tmp_path / "state.db"))
    index = 0

    def apply(payload: Payload, ts: int) -> dict[str, object]:
        nonlocal index
        index += 1
        data = encode([Entry.create(payload, node="n1", ts=ts)])
        (result,) = machine.apply_batch(index, data) or [{}]
        return result

    try:
        apply(NodeJoin("n1", "127.0.0.1:7100", "127.0.0.1:7200", executors=["shell"]), 1)
        policy = {"maxRetries": 4, "backoffMs": 1000, "backoffMultiplier": 1.5}
        apply(TaskSubmit("t1", {"command": ["false"], "retryPolicy": policy}), 1)
        for attempt in range(1, 5):
            assign = TaskAssign([{"task_id": "t1", "node": "n1", "attempt": attempt}])
            assert apply(assign, attempt * 10_000)["placed"] == 1
            assert apply(TaskFailed("t1", attempt, "n1", "exit 1"), attempt * 10_000 + 5)["ok"]
        rows = machine._conn.execute(
            "SELECT detail FROM task_events WHERE task_id = 't1' AND event = 'retried' ORDER BY seq"
        ).fetchall()
        assert [json.loads(row[0])["delay_ms"] for row in rows] == [1000, 1500, 2250, 3375]
        (scheduled,) = machine._conn.execute(
            "SELECT scheduled_after FROM tasks WHERE id = 't1'"
        ).fetchone()
        assert scheduled == 40_005 + 3375
    finally:
        machine.close()
