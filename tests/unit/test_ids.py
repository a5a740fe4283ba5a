"""Time-ordered ids (`cortex.ids`): they sort by when they were made, share a
prefix only with ids made close in time, and stay valid UUIDs."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from cortex.client.requests import new_idempotency_key
from cortex.ids import new_time_ordered_id, time_ordered
from cortex.state import entries as e

# A day in 2026, in seconds since the epoch, and the count's wrap in seconds.
DAY = 1_795_000_000.0
WRAP_S = (1 << 24) / 10

random_bits = st.integers(min_value=0, max_value=(1 << 128) - 1)


@given(
    first=st.floats(min_value=0, max_value=WRAP_S / 2),
    later_by=st.floats(min_value=0.2, max_value=WRAP_S / 2 - 1),
    a=random_bits,
    b=random_bits,
)
def test_an_id_made_later_in_the_same_wrap_sorts_after(
    first: float, later_by: float, a: int, b: int
) -> None:
    start = DAY - DAY % WRAP_S + first
    earlier, later = time_ordered(start, a), time_ordered(start + later_by, b)
    assert str(earlier) < str(later)


@given(bits=random_bits, seconds=st.floats(min_value=0, max_value=4e9))
def test_an_id_is_a_version_8_uuid_that_keeps_its_random_bits(bits: int, seconds: float) -> None:
    made = time_ordered(seconds, bits)
    assert made.version == 8
    assert made.variant == uuid.RFC_4122
    assert uuid.UUID(str(made)) == made
    kept = ((1 << 104) - 1) & ~((0xF << 76) | (0x3 << 62))
    assert made.int & kept == bits & kept


def test_ids_made_in_one_tenth_share_six_characters_and_a_second_apart_do_not() -> None:
    same = {str(time_ordered(DAY + 0.01 * k, bits))[:6] for k, bits in enumerate((1, 2**90, 7))}
    assert len(same) == 1
    seconds_apart = {str(time_ordered(DAY + k, 0))[:6] for k in range(10)}
    assert len(seconds_apart) == 10


def test_the_count_wraps_to_zero_after_two_to_the_24_tenths() -> None:
    assert str(time_ordered(WRAP_S, 0)).startswith("000000")
    assert str(time_ordered(WRAP_S - 0.1, 0)).startswith("ffffff")


def test_tasks_workflows_and_default_idempotency_keys_get_fresh_time_ordered_ids() -> None:
    made = [e.new_id(), new_time_ordered_id(), new_idempotency_key().removeprefix("client-")]
    assert len(set(made)) == 3
    assert all(uuid.UUID(value).version == 8 for value in made)
