"""A schedule's slots: `every` keeps the phase of its creation; cron follows
the wall clock of its time zone through daylight-saving changes (a skipped
time fires at the change, a repeated one once unless the hour is `*`); bad
timings are refused naming the problem."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from cortex.errors import InvalidArgument
from cortex.schedules.slots import Timing, next_slot, slots_between

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def walls(slots: list[int], zone: ZoneInfo) -> list[str]:
    return [datetime.fromtimestamp(s / 1000, zone).strftime("%m-%d %H:%M%z") for s in slots]


def test_every_keeps_the_phase_of_its_anchor() -> None:
    timing = Timing(every_ms=1000)
    assert slots_between(timing, 500, 500, 4000) == [1500, 2500, 3500]
    assert slots_between(timing, 500, 1500, 3500) == [2500, 3500]
    assert slots_between(timing, 500, 1700, 9000, limit=2) == [2500, 3500]
    assert slots_between(timing, 500, 0, 400) == []
    assert next_slot(timing, 500, 2500) == 3500


def test_a_daily_time_skipped_by_spring_forward_fires_at_the_change() -> None:
    timing = Timing(cron="30 2 * * *", timezone="America/New_York")
    found = slots_between(
        timing,
        0,
        ms(datetime(2026, 3, 7, tzinfo=NEW_YORK)),
        ms(datetime(2026, 3, 10, tzinfo=NEW_YORK)),
    )
    assert walls(found, NEW_YORK) == ["03-07 02:30-0500", "03-08 03:00-0400", "03-09 02:30-0400"]


def test_a_daily_time_repeated_by_fall_back_fires_once() -> None:
    timing = Timing(cron="30 1 * * *", timezone="America/New_York")
    found = slots_between(
        timing,
        0,
        ms(datetime(2026, 10, 31, tzinfo=NEW_YORK)),
        ms(datetime(2026, 11, 3, tzinfo=NEW_YORK)),
    )
    assert walls(found, NEW_YORK) == ["10-31 01:30-0400", "11-01 01:30-0400", "11-02 01:30-0500"]


def test_an_hourly_expression_fires_through_the_repeated_hour() -> None:
    timing = Timing(cron="*/30 * * * *", timezone="America/New_York")
    found = slots_between(
        timing,
        0,
        ms(datetime(2026, 11, 1, 0, 50, tzinfo=NEW_YORK)),
        ms(datetime(2026, 11, 1, 2, 40, tzinfo=NEW_YORK)),
    )
    # Five real half hours, the repeated 01:00 and 01:30 included.
    assert walls(found, NEW_YORK) == [
        "11-01 01:00-0400", "11-01 01:30-0400", "11-01 01:00-0500",
        "11-01 01:30-0500", "11-01 02:00-0500", "11-01 02:30-0500",
    ]  # fmt: skip
    assert all(b - a == 1_800_000 for a, b in zip(found, found[1:], strict=False))


def test_two_wall_times_folded_into_one_by_spring_forward_fire_once() -> None:
    timing = Timing(cron="0,30 2 * * *", timezone="Europe/Berlin")
    found = slots_between(
        timing,
        0,
        ms(datetime(2026, 3, 29, tzinfo=BERLIN)),
        ms(datetime(2026, 3, 29, 4, tzinfo=BERLIN)),
    )
    assert walls(found, BERLIN) == ["03-29 03:00+0200"]


def test_cron_in_utc_by_default() -> None:
    timing = Timing(cron="0 12 * * 1")
    start = ms(datetime(2026, 11, 23, 13, tzinfo=ZoneInfo("UTC")))  # a Monday, after noon
    assert walls([next_slot(timing, 0, start)], ZoneInfo("UTC")) == ["11-30 12:00+0000"]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"cron": "61 * * * *"}, "not a valid expression"),
        ({"cron": "0 0 30 2 *"}, "never matches a real date"),
        ({"cron": "* * *"}, "five fields"),
        ({"cron": "* * * * *", "timezone": "Mars/Base"}, "unknown timezone"),
        ({"every_ms": 10}, "every must be from 1s"),
        ({"every_ms": 5000, "timezone": "Europe/Berlin"}, "cron schedules only"),
        ({}, "exactly one of cron and every"),
        ({"cron": "* * * * *", "every_ms": 1000}, "exactly one of cron and every"),
    ],
)
def test_a_bad_timing_is_refused_naming_the_problem(fields: dict, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem):
        Timing(**fields)
