"""JSON-ready views of schedules and their firings, shared by the CLI's
--json output and the MCP tools, in the shape of `cortex.api.views`: enums
as lower-case names, times as ISO strings, durations in milliseconds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cortex.api.convert import duration_ms, spec_from_proto
from cortex.api.views import iso_time
from cortex.durations import format_duration_ms
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

__all__ = ["firing_json", "schedule_json", "schedules_summary", "timing_text"]


def timing_text(schedule: pb.Schedule) -> str:
    """When it fires, as people read it: `every 5m` or `0 3 * * * (Europe/Berlin)`."""
    if schedule.HasField("every"):
        return f"every {format_duration_ms(duration_ms(schedule.every))}"
    return f"{schedule.cron} ({schedule.timezone or 'UTC'})"


def firing_json(firing: pb.ScheduleFiring) -> dict[str, Any]:
    return {
        "slot": iso_time(firing, "slot"),
        "first_slot": iso_time(firing, "first_slot"),
        "count": firing.count,
        "action": enum_name(pb.ScheduleFiringAction, firing.action) or None,
        "reason": firing.reason or None,
        "task_id": firing.task_id or None,
        "workflow_id": firing.workflow_id or None,
        "run_state": firing.run_state or None,
        "decided_at": iso_time(firing, "decided_at"),
    }


def schedule_json(schedule: pb.Schedule) -> dict[str, Any]:
    target = schedule.WhichOneof("target")
    return {
        "id": schedule.id,
        "name": schedule.name,
        "timing": timing_text(schedule),
        "cron": schedule.cron or None,
        "timezone": schedule.timezone or None,
        "every_ms": duration_ms(schedule.every) if schedule.HasField("every") else None,
        "task": spec_from_proto(schedule.task) if target == "task" else None,
        "workflow_definition": schedule.workflow_definition or None,
        "workflow_format": enum_name(pb.DefinitionFormat, schedule.workflow_format) or None,
        "overlap": enum_name(pb.ScheduleOverlap, schedule.overlap) or None,
        "catchup_window_ms": duration_ms(schedule.catchup_window),
        "paused": schedule.paused,
        "created_at": iso_time(schedule, "create_time"),
        "updated_at": iso_time(schedule, "update_time"),
        "last_slot": iso_time(schedule, "last_slot"),
        "last_fired_at": iso_time(schedule, "last_fired_at"),
        "last_fired_slot": iso_time(schedule, "last_fired_slot"),
        "next_slot": iso_time(schedule, "next_slot"),
        "buffered_slot": iso_time(schedule, "buffered_slot"),
        "fired": schedule.fired,
        "missed": schedule.missed,
        "skipped": schedule.skipped,
        "active_runs": list(schedule.active_runs),
        "recent": [firing_json(firing) for firing in schedule.recent],
    }


def schedules_summary(schedules: Sequence[pb.Schedule]) -> dict[str, Any]:
    """What a cluster status says of the schedules: how many, how many are
    paused, and which fires next."""
    upcoming = [s for s in schedules if s.HasField("next_slot")]
    soonest = min(upcoming, key=lambda s: s.next_slot.ToNanoseconds(), default=None)
    return {
        "count": len(schedules),
        "paused": sum(1 for s in schedules if s.paused),
        "next": (
            {"name": soonest.name, "at": iso_time(soonest, "next_slot")}
            if soonest is not None
            else None
        ),
    }
