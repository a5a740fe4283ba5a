"""What the client hands back: plain, typed, immutable views of the API's
messages, with states as lower-case names ("queued", "dead_letter") and
times as aware datetimes. Each keeps the message it came from as `proto`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from cortex.proto_enums import enum_name, enum_names
from cortex.proto_enums import enum_value as proto_enum_value
from cortex.state.task_states import TERMINAL_STATES
from cortex.v1 import cortex_pb2 as pb

TERMINAL_WORKFLOW_STATES = frozenset({"completed", "failed", "cancelled"})


def enum_value(enum: Any, name: str) -> int:
    """The value of a lower-case name (TASK_STATE_DEAD_LETTER for
    "dead_letter"); ValueError naming the choices for a name it lacks."""
    value = int(proto_enum_value(enum, name))
    if value == 0:
        choices = ", ".join(enum_names(enum))
        raise ValueError(f"unknown value {name!r}; expected one of {choices}")
    return value


def _time(message: Message, name: str) -> datetime | None:
    if not message.HasField(name):
        return None
    stamp: Timestamp = getattr(message, name)
    return stamp.ToDatetime(tzinfo=UTC)


def _duration(message: Message, name: str) -> timedelta | None:
    if not message.HasField(name):
        return None
    value: Duration = getattr(message, name)
    return value.ToTimedelta()


def _struct(message: Message, name: str) -> dict[str, Any]:
    return MessageToDict(getattr(message, name)) if message.HasField(name) else {}


@dataclass(frozen=True)
class TaskResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    error: str

    @classmethod
    def from_proto(cls, message: pb.TaskResult) -> TaskResult:
        return cls(
            exit_code=message.exit_code,
            stdout=message.stdout,
            stderr=message.stderr,
            stdout_truncated=message.stdout_truncated,
            stderr_truncated=message.stderr_truncated,
            timed_out=message.timed_out,
            error=message.error,
        )


@dataclass(frozen=True)
class Task:
    id: str
    state: str
    type: str
    attempt: int
    node_id: str
    priority: int
    result: TaskResult | None
    error: str
    idempotency_key: str
    workflow_id: str
    workflow_key: str
    create_time: datetime | None
    start_time: datetime | None
    finish_time: datetime | None
    pending_reasons: list[str]
    # The concurrency key its limits count against ("" for none) and the
    # fairness key its placements count against.
    concurrency_key: str
    fairness_key: str
    proto: pb.Task = field(repr=False, compare=False)

    @property
    def done(self) -> bool:
        """Whether the task is terminal."""
        return self.state in TERMINAL_STATES

    @classmethod
    def from_proto(cls, message: pb.Task) -> Task:
        return cls(
            id=message.id,
            state=enum_name(pb.TaskState, message.state),
            type=message.type,
            attempt=message.attempt,
            node_id=message.node_id,
            priority=message.priority,
            result=TaskResult.from_proto(message.result) if message.HasField("result") else None,
            error=message.error,
            idempotency_key=message.idempotency_key,
            workflow_id=message.workflow_id,
            workflow_key=message.workflow_key,
            create_time=_time(message, "create_time"),
            start_time=_time(message, "start_time"),
            finish_time=_time(message, "finish_time"),
            pending_reasons=list(message.pending_reasons),
            concurrency_key=message.concurrency_key,
            fairness_key=message.fairness_key,
            proto=message,
        )


@dataclass(frozen=True)
class WorkflowTask:
    key: str
    task_id: str
    state: str
    attempt: int
    node_id: str
    depends_on: list[str]
    condition: str
    skip_reason: str
    exit_code: int | None

    @classmethod
    def from_proto(cls, message: pb.WorkflowTask) -> WorkflowTask:
        return cls(
            key=message.key,
            task_id=message.task_id,
            state=enum_name(pb.TaskState, message.state),
            attempt=message.attempt,
            node_id=message.node_id,
            depends_on=list(message.depends_on),
            condition=message.condition,
            skip_reason=message.skip_reason,
            exit_code=message.exit_code if message.HasField("exit_code") else None,
        )


@dataclass(frozen=True)
class Workflow:
    id: str
    name: str
    state: str
    tasks: list[WorkflowTask]
    context: dict[str, Any]
    error: str
    create_time: datetime | None
    finish_time: datetime | None
    proto: pb.Workflow = field(repr=False, compare=False)

    @property
    def done(self) -> bool:
        """Whether the workflow is terminal."""
        return self.state in TERMINAL_WORKFLOW_STATES

    def task(self, key: str) -> WorkflowTask:
        """The workflow's task with this key (KeyError when none)."""
        for task in self.tasks:
            if task.key == key:
                return task
        raise KeyError(key)

    @classmethod
    def from_proto(cls, message: pb.Workflow) -> Workflow:
        return cls(
            id=message.id,
            name=message.name,
            state=enum_name(pb.WorkflowState, message.state),
            tasks=[WorkflowTask.from_proto(t) for t in message.tasks],
            context=_struct(message, "context"),
            error=message.error,
            create_time=_time(message, "create_time"),
            finish_time=_time(message, "finish_time"),
            proto=message,
        )


@dataclass(frozen=True)
class OutputChunk:
    """A piece of an attempt's output."""

    attempt: int
    stream: str
    offset: int
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class OutputEnd:
    """The end of an attempt's output: the last item a stream yields."""

    attempt: int
    state: str
    exit_code: int | None
    error: str
    total_bytes: int
    interrupted: bool


def output_item(message: pb.StreamTaskOutputResponse) -> OutputChunk | OutputEnd:
    if message.HasField("end"):
        end = message.end
        return OutputEnd(
            attempt=end.attempt,
            state=enum_name(pb.TaskState, end.state),
            exit_code=end.exit_code if end.HasField("exit_code") else None,
            error=end.error,
            total_bytes=end.total_bytes,
            interrupted=end.interrupted,
        )
    data = message.data
    return OutputChunk(
        attempt=message.attempt,
        stream=enum_name(pb.OutputStream, data.stream),
        offset=data.offset,
        data=data.data,
    )


@dataclass(frozen=True)
class Page:
    """One page of a listing and the token of the next ("" on the last)."""

    items: list[Any]
    next_page_token: str
    total_size: int

    @classmethod
    def of_tasks(cls, response: Any) -> Page:
        """A page of ListTasks or ListDeadLetterTasks."""
        tasks = [Task.from_proto(t) for t in response.tasks]
        return cls(tasks, response.next_page_token, response.total_size)

    @classmethod
    def of_workflows(cls, response: pb.ListWorkflowsResponse) -> Page:
        workflows = [Workflow.from_proto(w) for w in response.workflows]
        return cls(workflows, response.next_page_token, response.total_size)


@dataclass(frozen=True)
class Node:
    id: str
    status: str
    role: str
    leader: bool
    connected: bool
    grpc_address: str
    running_tasks: int
    labels: dict[str, str]
    report_age: timedelta | None
    proto: pb.Node = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: pb.Node) -> Node:
        return cls(
            id=message.id,
            status=enum_name(pb.NodeStatus, message.status),
            role=enum_name(pb.NodeRole, message.role),
            leader=message.leader,
            connected=message.connected,
            grpc_address=message.grpc_address,
            running_tasks=message.running_tasks,
            labels=dict(message.labels),
            report_age=_duration(message, "report_age"),
            proto=message,
        )
