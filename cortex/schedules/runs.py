"""What a schedule's firing starts: its task (the schedule's spec) or its
workflow (the schedule's definition, parsed afresh), with the schedule's id,
name and the slot's time in every task's environment. The leader builds it
and the SCHEDULE_FIRE entry carries it, so apply parses nothing."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from cortex.errors import CortexError
from cortex.state.entries import as_dict, new_id
from cortex.state.schedule_queries import ScheduleView
from cortex.workflows.definition import parse_definition
from cortex.workflows.operations import submit_payloads
from cortex.workflows.sandbox import ConditionSandbox

SCHEDULE_ID_ENV = "CORTEX_SCHEDULE_ID"
SCHEDULE_NAME_ENV = "CORTEX_SCHEDULE_NAME"
SCHEDULED_TIME_ENV = "CORTEX_SCHEDULED_TIME"


def slot_time(slot_ms: int) -> str:
    """A slot as RFC 3339 UTC with milliseconds: `2026-11-24T22:30:00.000Z`."""
    moment = datetime.fromtimestamp(slot_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{slot_ms % 1000:03d}Z"


def _with_env(spec: dict[str, Any], view: ScheduleView, slot_ms: int) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    spec["env"] = {
        **spec.get("env", {}),
        SCHEDULE_ID_ENV: view.id,
        SCHEDULE_NAME_ENV: view.name,
        SCHEDULED_TIME_ENV: slot_time(slot_ms),
    }
    return spec


class RunBuilder:
    def __init__(self, sandbox: ConditionSandbox | None, max_spec_bytes: int) -> None:
        """`sandbox` checks a scheduled workflow's conditions as it is parsed."""
        self._sandbox = sandbox
        self._max_spec_bytes = max_spec_bytes

    def firing(
        self,
        view: ScheduleView,
        slot_ms: int,
        action: str = "fire",
        reason: str = "",
        cancel: Sequence[str] = (),
    ) -> dict[str, Any]:
        """One SCHEDULE_FIRE decision starting the run of `slot_ms`; a
        workflow whose definition no longer parses gives a `skipped` one."""
        decision: dict[str, Any] = {"slot_ms": slot_ms, "action": action, "reason": reason}
        if cancel:
            decision["cancel"] = list(cancel)
        if view.target_kind == "task":
            decision["task_id"] = new_id()
            decision["spec"] = _with_env(view.target["task"], view, slot_ms)
            return decision
        try:
            definition = parse_definition(
                view.target["workflow"], view.target["format"], self._sandbox,
                self._max_spec_bytes,
            )  # fmt: skip
        except CortexError as err:
            return {"slot_ms": slot_ms, "action": "skipped",
                    "reason": f"the workflow definition no longer parses: {err}"}  # fmt: skip
        payload = as_dict(submit_payloads(definition, new_id())[0])
        for item in payload["tasks"]:
            item["spec"] = _with_env(item["spec"], view, slot_ms)
        decision["workflow"] = payload
        return decision
