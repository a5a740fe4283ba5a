"""Schedules between the API's messages and Cortex's own types: a
CreateScheduleRequest as what `ScheduleOperations.create` takes (its timing
checked by `Timing`), a ScheduleView as a Schedule with its recent firings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cortex.api.convert import (
    duration,
    duration_ms,
    known_value,
    spec_from_proto,
    spec_to_proto,
    timestamp,
)
from cortex.errors import InvalidArgument
from cortex.proto_enums import enum_name, enum_value
from cortex.schedules.slots import Timing
from cortex.state.schedule_bounds import (
    DEFAULT_CATCHUP_WINDOW_MS,
    MAX_CATCHUP_WINDOW_MS,
    MIN_EVERY_MS,
)
from cortex.state.schedule_queries import FiringView, ScheduleView
from cortex.v1 import cortex_pb2 as pb


@dataclass(frozen=True)
class NewSchedule:
    """A CreateScheduleRequest, checked as far as the API can: a task spec
    or a workflow definition (exactly one), the rest as the operations take it."""

    name: str
    timing: Timing
    task_spec: dict[str, Any] | None
    workflow_text: str | None
    workflow_format: str
    overlap: str
    catchup_window_ms: int
    paused: bool


def _timing(request: pb.CreateScheduleRequest) -> Timing:
    timezone = request.timezone or "UTC"
    if request.WhichOneof("timing") == "every":
        every_ms = duration_ms(request.every)
        if every_ms <= 0:
            raise InvalidArgument(f"every must be at least {MIN_EVERY_MS // 1000}s")
        return Timing(timezone=timezone, every_ms=every_ms)
    return Timing(cron=request.cron, timezone=timezone)


def _catchup_window_ms(request: pb.CreateScheduleRequest) -> int:
    if not request.HasField("catchup_window"):
        return DEFAULT_CATCHUP_WINDOW_MS
    window_ms = duration_ms(request.catchup_window)
    if not 0 <= window_ms <= MAX_CATCHUP_WINDOW_MS:
        raise InvalidArgument("catchup_window must be between 0 and 366 days")
    return window_ms


def new_schedule(request: pb.CreateScheduleRequest) -> NewSchedule:
    """Raises InvalidArgument naming the field at fault: no timing or an
    invalid one, no target, an unknown overlap, a catch-up window out of range."""
    if request.WhichOneof("timing") is None:
        raise InvalidArgument("exactly one of cron and every is required")
    target = request.WhichOneof("target")
    if target is None:
        raise InvalidArgument("exactly one of task and workflow_definition is required")
    known_value(pb.ScheduleOverlap, request.overlap, "overlap")
    known_value(pb.DefinitionFormat, request.workflow_format, "workflow_format")
    return NewSchedule(
        name=request.name,
        timing=_timing(request),
        task_spec=spec_from_proto(request.task) if target == "task" else None,
        workflow_text=request.workflow_definition if target == "workflow_definition" else None,
        workflow_format=enum_name(pb.DefinitionFormat, request.workflow_format),
        overlap=enum_name(pb.ScheduleOverlap, request.overlap) or "skip",
        catchup_window_ms=_catchup_window_ms(request),
        paused=request.paused,
    )


def firing_to_proto(firing: FiringView) -> pb.ScheduleFiring:
    return pb.ScheduleFiring(
        slot=timestamp(firing.slot_ms),
        first_slot=timestamp(firing.first_slot_ms),
        count=firing.count,
        action=enum_value(pb.ScheduleFiringAction, firing.action),
        reason=firing.reason,
        task_id=(firing.run_id or "") if firing.run_kind == "task" else "",
        workflow_id=(firing.run_id or "") if firing.run_kind == "workflow" else "",
        run_state=firing.run_state or "",
        decided_at=timestamp(firing.decided_at),
    )


def schedule_to_proto(view: ScheduleView) -> pb.Schedule:
    cron = view.timing.get("cron", "")
    message = pb.Schedule(
        id=view.id,
        name=view.name,
        cron=cron,
        timezone=view.timing.get("timezone", "UTC") if cron else "",
        every=duration(view.timing["every_ms"]) if "every_ms" in view.timing else None,
        workflow_format=enum_value(pb.DefinitionFormat, view.target.get("format", "")),
        overlap=enum_value(pb.ScheduleOverlap, view.overlap),
        catchup_window=duration(view.catchup_window_ms),
        paused=view.paused,
        create_time=timestamp(view.created_at),
        update_time=timestamp(view.updated_at),
        last_slot=timestamp(view.last_slot_ms),
        last_fired_at=timestamp(view.last_fired_at),
        last_fired_slot=timestamp(view.last_fired_slot_ms),
        next_slot=timestamp(view.next_slot_ms),
        buffered_slot=timestamp(view.buffered_slot_ms),
        fired=view.fired,
        missed=view.missed,
        skipped=view.skipped,
        active_runs=list(view.active_runs),
        recent=[firing_to_proto(firing) for firing in view.recent],
    )
    if view.target_kind == "task":
        message.task.CopyFrom(spec_to_proto(view.target["task"]))
    else:
        message.workflow_definition = view.target.get("workflow", "")
    return message
