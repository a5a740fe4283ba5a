"""Schedules as every interface offers them (gRPC, MCP, CLI): validate the
timing and the target in full (the cron expression, the time zone, the task
spec or workflow definition), propose, read."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from cortex.errors import AlreadyExists, FailedPrecondition, InvalidArgument, UnknownId
from cortex.raft.proposer import Proposer
from cortex.refusals import refusal_error
from cortex.schedules.runs import RunBuilder
from cortex.schedules.slots import Timing, next_slot
from cortex.spec import TaskTypes, parse_task_spec
from cortex.state import entries as e
from cortex.state.queries import StateReader
from cortex.state.schedule_bounds import (
    DEFAULT_CATCHUP_WINDOW_MS,
    MAX_CATCHUP_WINDOW_MS,
    OVERLAP_POLICIES,
)
from cortex.state.schedule_queries import ScheduleView
from cortex.state.schedule_transitions import MAX_WORKFLOW_TEXT_BYTES
from cortex.state.spec_rules import key_problem
from cortex.workflows.definition import WorkflowDefinition, parse_definition
from cortex.workflows.operations import submit_payloads
from cortex.workflows.sandbox import ConditionSandbox


def timing_of(view: ScheduleView) -> Timing:
    """A stored timing (`{every_ms}` or `{cron, timezone}`) as a `Timing`."""
    return Timing(
        cron=view.timing.get("cron", ""),
        timezone=view.timing.get("timezone", "UTC"),
        every_ms=view.timing.get("every_ms", 0),
    )


def workflow_format(text: str, fmt: str) -> str:
    """`json` or `yaml`: as given, or JSON when the text starts an object."""
    if fmt:
        if fmt not in ("json", "yaml"):
            raise InvalidArgument(f"workflow format must be json or yaml, not {fmt!r}")
        return fmt
    return "json" if text.lstrip().startswith("{") else "yaml"


def one_part_workflow(definition: WorkflowDefinition) -> None:
    """A scheduled workflow is created by one entry, so it must fit one part."""
    probe = submit_payloads(definition, str(uuid.UUID(int=0)))
    if len(probe) > 1:
        raise InvalidArgument(
            f"workflow {definition.name!r} is too large to schedule: a scheduled workflow"
            " must fit one part (100 tasks and 256 KiB of specs)"
        )


class ScheduleOperations:
    def __init__(
        self,
        node_id: str,
        proposer: Proposer,
        reader: StateReader,
        propose_timeout_s: float,
        max_spec_bytes: int,
        sandbox: ConditionSandbox,
        task_types: TaskTypes | None = None,
    ) -> None:
        self.runs = RunBuilder(sandbox, max_spec_bytes)
        self.node_id = node_id
        self._task_types = task_types
        self._proposer = proposer
        self._reader = reader
        self._timeout = propose_timeout_s
        self._max_spec_bytes = max_spec_bytes
        self._sandbox = sandbox

    def create(
        self,
        name: str,
        timing: Timing,
        task_spec: dict[str, Any] | None = None,
        workflow_text: str | None = None,
        workflow_fmt: str = "",
        overlap: str = "skip",
        catchup_window_ms: int = DEFAULT_CATCHUP_WINDOW_MS,
        paused: bool = False,
    ) -> tuple[ScheduleView, bool]:
        """Creates the schedule, or gives back the one of this name when it
        is the same (a retried create); AlreadyExists when the name is taken
        by a different one. Returns the schedule and whether it was created."""
        problem = key_problem(name)
        if problem:
            raise InvalidArgument(f"schedule name {name!r} {problem}")
        if overlap not in OVERLAP_POLICIES:
            raise InvalidArgument(f"overlap must be one of {', '.join(OVERLAP_POLICIES)}")
        if not 0 <= catchup_window_ms <= MAX_CATCHUP_WINDOW_MS:
            raise InvalidArgument("catch-up window must be between 0 and 366 days")
        target = self._target(task_spec, workflow_text, workflow_fmt)
        stored_timing = (
            {"every_ms": timing.every_ms}
            if timing.every_ms
            else {"cron": timing.cron, "timezone": timing.timezone}
        )
        known = self._reader.find_schedule(name)
        if known is not None and known.name == name:
            return self._same_or_taken(known, stored_timing, target, overlap, catchup_window_ms)
        payload = e.ScheduleCreate(
            schedule_id=f"sch-{uuid.uuid4().hex[:16]}", name=name, timing=stored_timing,
            target=target, overlap=overlap, catchup_window_ms=catchup_window_ms, paused=paused,
        )  # fmt: skip
        result = self._propose(payload, f"schedule {name} rejected")
        if not result.get("created"):
            return self.get(name), False
        return self.get(payload.schedule_id), True

    def _same_or_taken(
        self,
        known: ScheduleView,
        timing: dict[str, Any],
        target: dict[str, Any],
        overlap: str,
        window_ms: int,
    ) -> tuple[ScheduleView, bool]:
        if (known.timing, known.target, known.overlap, known.catchup_window_ms) == (
            timing, target, overlap, window_ms,
        ):  # fmt: skip
            return self._with_next(known), False
        raise AlreadyExists(
            f"schedule name {known.name!r} is taken by schedule {known.id}, created with other"
            " settings (delete it first, or pick another name)"
        )

    def _target(
        self,
        task_spec: dict[str, Any] | None,
        workflow_text: str | None,
        workflow_fmt: str,
    ) -> dict[str, Any]:
        if (task_spec is None) == (workflow_text is None):
            raise InvalidArgument("a schedule starts either a task or a workflow")
        if task_spec is not None:
            spec = parse_task_spec(task_spec, self._max_spec_bytes, self._task_types)
            return {"task": spec.model_dump(mode="json")}
        text = workflow_text or ""
        if len(text.encode()) > MAX_WORKFLOW_TEXT_BYTES:
            raise InvalidArgument(f"workflow definition is over {MAX_WORKFLOW_TEXT_BYTES} bytes")
        fmt = workflow_format(text, workflow_fmt)
        one_part_workflow(
            parse_definition(text, fmt, self._sandbox, self._max_spec_bytes, self._task_types)
        )
        return {"workflow": text, "format": fmt}

    def _propose(self, payload: e.Payload, doing: str) -> dict[str, Any]:
        result = self._proposer.propose_one(e.Entry.create(payload, self.node_id), self._timeout)
        if not result.get("ok"):
            raise refusal_error(result, doing)
        return result

    def _with_next(self, view: ScheduleView) -> ScheduleView:
        if view.paused:
            return view
        slot = next_slot(timing_of(view), view.anchor_ms, view.last_slot_ms)
        return replace(view, next_slot_ms=slot)

    def get(self, name_or_id: str) -> ScheduleView:
        if not name_or_id:
            raise InvalidArgument("a schedule name or id is required")
        view = self._reader.find_schedule(name_or_id)
        if view is None:
            raise UnknownId(f"no schedule named {name_or_id!r}")
        return self._with_next(view)

    def list_schedules(self) -> list[ScheduleView]:
        return [self._with_next(view) for view in self._reader.schedules()]

    def pause(self, name_or_id: str) -> ScheduleView:
        return self._set_paused(name_or_id, True)

    def resume(self, name_or_id: str) -> ScheduleView:
        return self._set_paused(name_or_id, False)

    def _set_paused(self, name_or_id: str, paused: bool) -> ScheduleView:
        view = self.get(name_or_id)
        verb = "paused" if paused else "resumed"
        self._propose(e.SchedulePause(view.id, paused), f"schedule {view.name} not {verb}")
        return self.get(view.id)

    def delete(self, name_or_id: str) -> ScheduleView:
        """Deletes the schedule (the tasks it started stay); returns it as it was."""
        view = self.get(name_or_id)
        self._propose(e.ScheduleDelete(view.id), f"schedule {view.name} not deleted")
        return view

    def trigger(self, name_or_id: str) -> tuple[str, str]:
        """Starts a run now, outside the schedule's slots (its overlap policy
        does not apply); returns the run's kind and id."""
        view = self.get(name_or_id)
        now = int(time.time() * 1000)
        decision = self.runs.firing(view, now, "trigger", "started by hand")
        if decision.get("action") != "trigger":
            raise FailedPrecondition(
                f"schedule {view.name} could not start a run: {decision.get('reason')}"
            )
        result = self._propose(e.ScheduleFire(view.id, [decision]), f"schedule {view.name}")
        if not result.get("runs"):
            raise FailedPrecondition(f"schedule {view.name} started nothing")
        return view.target_kind, str(result["runs"][0])
