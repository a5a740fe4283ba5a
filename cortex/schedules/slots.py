"""When a schedule fires: its slots, as milliseconds since the epoch.

A slot is a moment a schedule is due. `every` schedules are due at
`anchor + k * every` (the anchor is when the schedule was created, so a
schedule keeps its phase through restarts and leader changes). Cron
schedules are due when their expression matches the wall clock of their
time zone (UTC by default), with the daylight-saving rules of Vixie cron:

- a wall time skipped when clocks go forward fires at the moment of the
  change (02:30 on a night that jumps from 02:00 to 03:00 fires at 03:00);
- a wall time repeated when clocks go back fires once, at its first
  occurrence, when the expression names the hour; an expression that runs
  every hour (`*` in the hour field) fires in both, since its slots are
  meant as elapsed time.

Pure: no clock is read; the caller says from when to when."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from cortex.errors import InvalidArgument
from cortex.state.schedule_bounds import MAX_CRON_CHARS, MAX_EVERY_MS, MIN_EVERY_MS

__all__ = [
    "MAX_CRON_CHARS",
    "MAX_EVERY_MS",
    "MAX_SLOTS_PER_CALL",
    "MIN_EVERY_MS",
    "Timing",
    "next_slot",
    "slots_between",
    "timing_problem",
]

# The most slots one call lists: a schedule far behind is caught up in steps.
MAX_SLOTS_PER_CALL = 1000
# A cron expression must match within this long (e.g. not only on 30 February).
_CRON_HORIZON = timedelta(days=5 * 366)


@dataclass(frozen=True)
class Timing:
    """`cron` (five fields, in `timezone`) or `every_ms`; exactly one is set."""

    cron: str = ""
    timezone: str = "UTC"
    every_ms: int = 0

    def __post_init__(self) -> None:
        problem = timing_problem(self)
        if problem:
            raise InvalidArgument(problem)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


def timing_problem(timing: Timing) -> str:
    """What is wrong with a timing, or "" when nothing is."""
    if bool(timing.cron) == bool(timing.every_ms):
        return "a schedule needs exactly one of cron and every"
    if timing.every_ms:
        if not MIN_EVERY_MS <= timing.every_ms <= MAX_EVERY_MS:
            return f"every must be from 1s to 366d, not {timing.every_ms} ms"
        if timing.timezone != "UTC":
            return "timezone applies to cron schedules only"
        return ""
    if len(timing.cron) > MAX_CRON_CHARS:
        return f"cron is longer than {MAX_CRON_CHARS} characters"
    if len(timing.cron.split()) != 5:
        return (
            f"cron {timing.cron!r} must have five fields (minute hour day-of-month month"
            " day-of-week)"
        )
    try:
        zone = ZoneInfo(timing.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown timezone {timing.timezone!r} (an IANA name such as Europe/Berlin)"
    if not croniter.is_valid(timing.cron):
        return f"cron {timing.cron!r} is not a valid expression"
    start = datetime(2000, 1, 1, tzinfo=zone)
    try:
        croniter(timing.cron, start, max_years_between_matches=6).get_next(datetime)
    except (CroniterBadCronError, CroniterBadDateError):
        return f"cron {timing.cron!r} never matches a real date"
    return ""


def slots_between(
    timing: Timing, anchor_ms: int, after_ms: int, until_ms: int, limit: int = MAX_SLOTS_PER_CALL
) -> list[int]:
    """The slots in (after_ms, until_ms], oldest first, at most `limit`."""
    if until_ms <= after_ms or limit <= 0:
        return []
    if timing.every_ms:
        return _every_slots(timing.every_ms, anchor_ms, after_ms, until_ms, limit)
    return _cron_slots(timing, after_ms, until_ms, limit)


def next_slot(timing: Timing, anchor_ms: int, after_ms: int) -> int:
    """The first slot after `after_ms`."""
    if timing.every_ms:
        return _every_slots(timing.every_ms, anchor_ms, after_ms, after_ms + timing.every_ms, 1)[0]
    horizon = after_ms + int(_CRON_HORIZON.total_seconds() * 1000)
    found = _cron_slots(timing, after_ms, horizon, 1)
    if not found:  # checked at creation; a match exists within the horizon
        raise InvalidArgument(f"cron {timing.cron!r} has no slot after {after_ms}")
    return found[0]


def _every_slots(
    every_ms: int, anchor_ms: int, after_ms: int, until_ms: int, limit: int
) -> list[int]:
    # The first k with anchor + k*every > after (k >= 1: the anchor itself
    # is the moment of creation, not a slot).
    k = max((after_ms - anchor_ms) // every_ms + 1, 1)
    slots: list[int] = []
    slot = anchor_ms + k * every_ms
    while slot <= until_ms and len(slots) < limit:
        slots.append(slot)
        slot += every_ms
    return slots


def _cron_slots(timing: Timing, after_ms: int, until_ms: int, limit: int) -> list[int]:
    zone = timing.zone
    hourly = timing.cron.split()[1] == "*"
    start = datetime.fromtimestamp(after_ms / 1000, UTC).astimezone(zone)
    matches = croniter(timing.cron, start, max_years_between_matches=6)
    slots: list[int] = []
    while len(slots) < limit:
        moment = matches.get_next(datetime)
        slot = int(round(moment.timestamp() * 1000))
        if slot > until_ms:
            break
        if slot <= after_ms or (not hourly and _repeated_wall_time(moment, zone)):
            continue
        if not slots or slot > slots[-1]:
            slots.append(slot)
    return slots


def _repeated_wall_time(moment: datetime, zone: ZoneInfo) -> bool:
    """Whether `moment` is the second occurrence of its wall time (clocks
    went back over it)."""
    wall = moment.replace(tzinfo=None)
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    return first.utcoffset() != second.utcoffset() and moment.utcoffset() == second.utcoffset()
