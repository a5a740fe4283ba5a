"""Building the API's request messages from plain Python values, shared by
the blocking and the asyncio client."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.json_format import ParseDict

from cortex.client.models import enum_value
from cortex.ids import new_time_local_id
from cortex.v1 import cortex_pb2 as pb

# Seconds, or a timedelta.
Seconds = float | int | timedelta
# A moment: an aware datetime (a naive one is taken as local time), or
# seconds since the epoch.
Moment = datetime | float | int


def duration(value: Seconds) -> Duration:
    message = Duration()
    if isinstance(value, timedelta):
        message.FromTimedelta(value)
    else:
        if value < 0:
            raise ValueError(f"a duration must not be negative, not {value}")
        message.FromNanoseconds(int(value * 1_000_000_000))
    return message


def new_idempotency_key() -> str:
    """A key for a submission the caller gave none: retries of the same call
    then never create a second task. Keys made close in time sit close
    together in the submissions table they key (`cortex.ids`)."""
    return f"client-{new_time_local_id()}"


def task_spec(
    command: Sequence[str] | str,
    *,
    type: str = "shell",
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: Seconds | None = None,
    priority: int | None = None,
    max_retries: int | None = None,
    backoff: Seconds | None = None,
    backoff_multiplier: float | None = None,
    retryable: bool | None = None,
    constraints: Mapping[str, Any] | pb.Constraints | None = None,
    labels: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | None = None,
    concurrency_key: str | None = None,
    fairness_key: str | None = None,
) -> pb.TaskSpec:
    """A TaskSpec: `command` is an argv list, or a string run through /bin/sh -c.
    `constraints` takes the proto's field names (`node_labels`, `min_memory_mb` ...).
    `concurrency_key`: the key whose limits the task counts against;
    `fairness_key`: the key it shares placements under (default "default")."""
    spec = pb.TaskSpec(
        type=type,
        env=dict(env or {}),
        cwd=cwd or "",
        labels=dict(labels or {}),
        concurrency_key=concurrency_key or "",
        fairness_key=fairness_key or "",
    )
    if isinstance(command, str):
        spec.shell = command
    else:
        spec.command.extend(command)
    if timeout is not None:
        spec.timeout.CopyFrom(duration(timeout))
    if priority is not None:
        spec.priority = priority
    if isinstance(constraints, pb.Constraints):
        spec.constraints.CopyFrom(constraints)
    elif constraints:
        ParseDict(dict(constraints), spec.constraints)
    policy = spec.retry_policy
    if max_retries is not None:
        policy.max_retries = max_retries
    if backoff is not None:
        policy.backoff.CopyFrom(duration(backoff))
    if backoff_multiplier is not None:
        policy.backoff_multiplier = backoff_multiplier
    if retryable is not None:
        policy.retryable = retryable
    if not policy.ListFields():
        spec.ClearField("retry_policy")
    if options:
        spec.options.update(dict(options))
    return spec


def workflow_definition(
    definition: str | Mapping[str, Any] | Path,
) -> tuple[str, pb.DefinitionFormat]:
    """The definition's text and format: a mapping is sent as JSON, a Path is
    read (YAML unless it ends in .json), a string is sent as it is."""
    if isinstance(definition, Path):
        text = definition.read_text(encoding="utf-8")
        is_json = definition.suffix.lower() == ".json"
        return text, pb.DEFINITION_FORMAT_JSON if is_json else pb.DEFINITION_FORMAT_YAML
    if isinstance(definition, str):
        return definition, pb.DEFINITION_FORMAT_UNSPECIFIED
    return json.dumps(dict(definition)), pb.DEFINITION_FORMAT_JSON


def consistency(value: str | int | None) -> pb.ReadConsistency:
    """The value named "stale", "session" or "linearizable" (or the value itself)."""
    if value is None:
        return pb.READ_CONSISTENCY_SESSION
    if isinstance(value, int):
        return value  # type: ignore[return-value]
    return enum_value(pb.ReadConsistency, value)  # type: ignore[return-value]


def states_of(enum: Any, names: Sequence[str] | None) -> list[int]:
    return [enum_value(enum, name) for name in names or ()]


def order(newest_first: bool) -> pb.ListOrder:
    return pb.LIST_ORDER_NEWEST_FIRST if newest_first else pb.LIST_ORDER_OLDEST_FIRST


def time_range(since: Moment | None = None, until: Moment | None = None) -> pb.TimeRange | None:
    """The creation window of a listing: at or after `since`, before `until`
    (None when both are open)."""
    if since is None and until is None:
        return None
    span = pb.TimeRange()
    for stamp, moment in ((span.start_time, since), (span.end_time, until)):
        if moment is None:
            continue
        seconds = moment.timestamp() if isinstance(moment, datetime) else float(moment)
        stamp.FromNanoseconds(round(seconds * 1_000_000_000))
    return span


def list_tasks(
    *,
    states: Sequence[str] = (),
    type: str = "",
    workflow_id: str = "",
    node_id: str = "",
    page_size: int = 100,
    page_token: str = "",
    newest_first: bool = True,
    since: Moment | None = None,
    until: Moment | None = None,
) -> pb.ListTasksRequest:
    return pb.ListTasksRequest(
        states=states_of(pb.TaskState, states),  # type: ignore[arg-type]
        type=type,
        workflow_id=workflow_id,
        node_id=node_id,
        page_size=page_size,
        page_token=page_token,
        order=order(newest_first),
        create_time_range=time_range(since, until),
    )


def list_dead_letter_tasks(
    *,
    page_size: int = 100,
    page_token: str = "",
    newest_first: bool = True,
    since: Moment | None = None,
    until: Moment | None = None,
) -> pb.ListDeadLetterTasksRequest:
    return pb.ListDeadLetterTasksRequest(
        page_size=page_size,
        page_token=page_token,
        order=order(newest_first),
        create_time_range=time_range(since, until),
    )


def list_workflows(
    *,
    states: Sequence[str] = (),
    page_size: int = 100,
    page_token: str = "",
    newest_first: bool = True,
    since: Moment | None = None,
    until: Moment | None = None,
) -> pb.ListWorkflowsRequest:
    return pb.ListWorkflowsRequest(
        states=states_of(pb.WorkflowState, states),  # type: ignore[arg-type]
        page_size=page_size,
        page_token=page_token,
        order=order(newest_first),
        create_time_range=time_range(since, until),
    )


def output_request(
    task_id: str, attempt: int, from_offset: int, follow: bool, stream: str | None
) -> pb.StreamTaskOutputRequest:
    return pb.StreamTaskOutputRequest(
        task_id=task_id,
        attempt=attempt,
        from_offset=from_offset,
        follow=follow,
        stream=enum_value(pb.OutputStream, stream) if stream else 0,  # type: ignore[arg-type]
    )
