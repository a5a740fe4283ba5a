"""Translation between protobuf messages and Cortex's own types: task specs,
tasks and events, and the well-known types every message uses (times as
Timestamps, spans as Durations, free-form objects as Structs, enums from and
to the lower-case names kept in SQLite)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from cortex.errors import InvalidArgument
from cortex.proto_enums import UNSPECIFIED, Enum, enum_name, enum_names, enum_value
from cortex.state.paging import CreatedWindow
from cortex.state.task_states import TERMINAL_STATES
from cortex.v1 import cortex_pb2 as pb

if TYPE_CHECKING:
    # Types only: the client imports this module, and the read queries
    # would load much of apply with them.
    from cortex.state.queries import EventView, TaskView

_CONSTRAINT_FIELDS = {
    "requires_gpu": "requiresGpu",
    "avoid_gaming": "avoidGaming",
    "min_memory_mb": "minMemoryMb",
    "min_disk_gb": "minDiskGb",
    "node_labels": "nodeLabels",
    "target_node": "targetNode",
    "requires_capabilities": "requiresCapabilities",
    "allowed_nodes": "allowedNodes",
    "forbidden_nodes": "forbiddenNodes",
    "max_parallel_per_node": "maxParallelPerNode",
}
_RETRY_FIELDS = {
    "max_retries": "maxRetries",
    "backoff_multiplier": "backoffMultiplier",
    "retryable": "retryable",
}


# -- well-known types -------------------------------------------------------------


def timestamp(ms: int | None) -> Timestamp | None:
    """Milliseconds since the epoch as a Timestamp; None (unset) for 0 or None."""
    if not ms:
        return None
    stamp = Timestamp()
    set_time(stamp, ms)
    return stamp


def set_time(field: Timestamp, ms: int | None) -> None:
    """Sets a message's Timestamp field (in place: one made apart is copied
    in) to milliseconds since the epoch; leaves it unset for 0 or None."""
    if ms:
        field.FromMilliseconds(ms)


def duration(ms: int | float | None) -> Duration | None:
    """Milliseconds as a Duration; None (unset) for None."""
    if ms is None:
        return None
    span = Duration()
    set_duration(span, ms)
    return span


def set_duration(field: Duration, ms: int | float | None) -> None:
    """Sets a message's Duration field in place to milliseconds; leaves it
    unset for None."""
    if ms is not None:
        field.FromNanoseconds(int(ms * 1_000_000))


def duration_ms(span: Duration) -> int:
    return int(span.ToMilliseconds())


def struct(value: dict[str, Any] | None) -> Struct | None:
    """A JSON object as a Struct; None (unset) for None."""
    if value is None:
        return None
    message = Struct()
    message.update(value)
    return message


def _whole_numbers(value: Any) -> Any:
    """Struct keeps every number as a double: 5.0 comes back as 5."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def struct_dict(message: Struct) -> dict[str, Any]:
    """A Struct as a JSON object, numbers with no fraction as ints."""
    return dict(_whole_numbers(MessageToDict(message)))


def names_filter(enum: type[Enum], values: Iterable[int], field: str) -> list[str]:
    """The lower-case names of a repeated enum filter; an UNSPECIFIED or
    unknown value is refused, naming the field."""
    names = []
    for value in values:
        name = enum_name(enum, value)
        if not name:
            known = ", ".join(enum_names(enum))
            raise InvalidArgument(
                f"{field}: {value} ({_label(enum, value)}) is not a value to filter by"
                f" (known: {known})"
            )
        names.append(name)
    return list(dict.fromkeys(names))


def _label(enum: Any, value: int) -> str:
    return str(enum.Name(value)) if value in enum.values() else "unknown"


def known_value(enum: type[Enum], value: int, field: str) -> int:
    """`value` when the enum has it, else InvalidArgument naming the field."""
    wrapper: Any = enum
    if value not in wrapper.values():
        raise InvalidArgument(f"{field}: unknown value {value}")
    return value


def newest_first(order: int, field: str = "order") -> bool:
    """Whether a ListOrder asks for newest first (the default)."""
    return known_value(pb.ListOrder, order, field) != pb.LIST_ORDER_OLDEST_FIRST


def _ceil_ms(stamp: Timestamp) -> int:
    """A Timestamp in whole milliseconds, rounded up: created_at (whole ms)
    >= the stamp exactly when it is >= this."""
    return -(-(stamp.seconds * 1_000_000_000 + stamp.nanos) // 1_000_000)


def created_window(span: pb.TimeRange, field: str = "create_time_range") -> CreatedWindow:
    """The creation window a listing's TimeRange asks for; an end not after
    the start is refused, naming the field."""
    start = _ceil_ms(span.start_time) if span.HasField("start_time") else None
    end = _ceil_ms(span.end_time) if span.HasField("end_time") else None
    if start is not None and end is not None and end <= start:
        raise InvalidArgument(f"{field}: end_time must be after start_time")
    return CreatedWindow(start, end)


# -- task specs -------------------------------------------------------------------


def spec_from_proto(message: pb.TaskSpec) -> dict[str, Any]:
    """A plain-data spec for `parse_task_spec`; only fields the caller set."""
    spec: dict[str, Any] = {"type": message.type or "shell"}
    if message.command and message.shell:
        raise InvalidArgument("spec: give either command (argv) or shell (a string), not both")
    if message.command:
        spec["command"] = list(message.command)
    elif message.shell:
        spec["command"] = message.shell
    elif spec["type"] == "shell":
        raise InvalidArgument("spec.command: command is empty")
    if message.env:
        spec["env"] = dict(message.env)
    if message.cwd:
        spec["cwd"] = message.cwd
    if message.HasField("timeout"):
        spec["timeoutMs"] = duration_ms(message.timeout)
    if message.HasField("priority"):
        spec["priority"] = message.priority
    if message.labels:
        spec["labels"] = dict(message.labels)
    if message.HasField("constraints"):
        constraints: dict[str, Any] = {}
        for name, alias in _CONSTRAINT_FIELDS.items():
            value = getattr(message.constraints, name)
            if name == "requires_capabilities":
                value = dict(value)
            elif name.endswith("nodes") or name == "node_labels":
                value = list(value)
            if value:
                constraints[alias] = value
        spec["constraints"] = constraints
    if message.HasField("retry_policy"):
        policy = message.retry_policy
        retry = {
            alias: getattr(policy, name)
            for name, alias in _RETRY_FIELDS.items()
            if policy.HasField(name)
        }
        if policy.HasField("backoff"):
            retry["backoffMs"] = duration_ms(policy.backoff)
        spec["retryPolicy"] = retry
    if message.HasField("options"):
        spec["options"] = struct_dict(message.options)
    if message.concurrency_key:
        spec["concurrencyKey"] = message.concurrency_key
    if message.fairness_key:
        spec["fairnessKey"] = message.fairness_key
    return spec


def spec_to_proto(spec: dict[str, Any]) -> pb.TaskSpec:
    message = pb.TaskSpec(
        type=spec.get("type", "shell"),
        cwd=spec.get("cwd") or "",
        priority=spec.get("priority", 5),
        concurrency_key=spec.get("concurrency_key") or "",
        fairness_key=spec.get("fairness_key") or "",
    )
    command = spec.get("command")
    if isinstance(command, str):
        message.shell = command
    elif command:
        message.command.extend(command)
    if env := spec.get("env"):
        message.env.update(env)
    set_duration(message.timeout, spec.get("timeout_ms"))
    if labels := spec.get("labels"):
        message.labels.update(labels)
    constraints = spec.get("constraints") or {}
    for name in _CONSTRAINT_FIELDS:
        value = constraints.get(name)
        if value in (None, [], {}, False, 0):
            continue
        field = getattr(message.constraints, name)
        if isinstance(value, list):
            field.extend(value)
        elif isinstance(value, dict):
            field.update(value)
        else:
            setattr(message.constraints, name, value)
    policy = spec.get("retry_policy") or {}
    for name in _RETRY_FIELDS:
        if name in policy:
            setattr(message.retry_policy, name, policy[name])
    set_duration(message.retry_policy.backoff, policy.get("backoff_ms"))
    if options := spec.get("options"):
        message.options.update(options)
    return message


# -- tasks and events -------------------------------------------------------------


def result_to_proto(result: dict[str, Any]) -> pb.TaskResult:
    return pb.TaskResult(
        exit_code=int(result.get("exit_code") or 0),
        stdout=str(result.get("stdout") or "").encode(),
        stderr=str(result.get("stderr") or "").encode(),
        stdout_truncated=bool(result.get("stdout_truncated")),
        stderr_truncated=bool(result.get("stderr_truncated")),
        error=str(result.get("error") or ""),
        timed_out=bool(result.get("timed_out")),
    )


def task_to_proto(task: TaskView, reasons: list[str] | None = None) -> pb.Task:
    message = pb.Task(
        id=task.id,
        state=enum_value(pb.TaskState, task.state),
        type=task.type,
        attempt=task.attempt,
        node_id=task.node or "",
        priority=task.priority,
        spec=spec_to_proto(task.spec),
        idempotency_key=task.idempotency_key or "",
        workflow_id=task.workflow_id or "",
        workflow_key=task.workflow_key or "",
        error=task.error or "",
        pending_reasons=reasons or [],
        submit_index=task.submit_index,
        traceparent=task.traceparent or "",
        concurrency_key=task.concurrency_key or "",
        fairness_key=task.fairness_key,
    )
    # Times set in place: a listing page converts many tasks.
    set_time(message.create_time, task.created_at)
    set_time(message.update_time, task.updated_at)
    if task.state == "queued":
        set_time(message.schedule_time, task.scheduled_after)
    # An assigned task's current attempt has not started: the time kept is
    # the previous attempt's.
    if task.state != "assigned":
        set_time(message.start_time, task.started_at)
    if task.state in TERMINAL_STATES:
        set_time(message.finish_time, task.completed_at)
    if task.result is not None:
        message.result.CopyFrom(result_to_proto(task.result))
    return message


def _change(event: EventView) -> tuple[str, Any] | None:
    """The oneof `change` of an event that changed a state: which field, and
    its message (none for an event that moved nothing, e.g. attempt_failed)."""
    if not event.to_state:
        return None
    if event.event.startswith("node_"):
        return "node_change", pb.NodeStatusChange(
            from_status=enum_value(pb.NodeStatus, event.from_state),
            to_status=enum_value(pb.NodeStatus, event.to_state),
        )
    if event.event.startswith("workflow_"):
        return "workflow_change", pb.WorkflowStateChange(
            from_state=enum_value(pb.WorkflowState, event.from_state),
            to_state=enum_value(pb.WorkflowState, event.to_state),
        )
    if event.task_id:
        return "task_change", pb.TaskStateChange(
            from_state=enum_value(pb.TaskState, event.from_state),
            to_state=enum_value(pb.TaskState, event.to_state),
        )
    return None


def event_to_proto(event: EventView) -> pb.Event:
    message = pb.Event(
        seq=event.seq,
        type=enum_value(pb.EventType, event.event),
        task_id=event.task_id or "",
        workflow_id=event.workflow_id or "",
        node_id=event.node or "",
        attempt=event.attempt or 0,
        detail=struct(event.detail),
        time=timestamp(event.ts),
        raft_index=event.raft_index,
        entry_type=event.entry_type or "",
    )
    change = _change(event)
    if change is not None:
        getattr(message, change[0]).CopyFrom(change[1])
    return message


def state_counts(counts: dict[str, int]) -> list[pb.TaskStateCount]:
    """Task counts per state, in the enum's order (states it lacks left out)."""
    known = [(enum_value(pb.TaskState, state), count) for state, count in counts.items()]
    return [
        pb.TaskStateCount(state=state, count=count)
        for state, count in sorted(known)
        if state != UNSPECIFIED
    ]
