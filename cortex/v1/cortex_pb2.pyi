import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReadConsistency(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_CONSISTENCY_UNSPECIFIED: _ClassVar[ReadConsistency]
    READ_CONSISTENCY_STALE: _ClassVar[ReadConsistency]
    READ_CONSISTENCY_SESSION: _ClassVar[ReadConsistency]
    READ_CONSISTENCY_LINEARIZABLE: _ClassVar[ReadConsistency]

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATE_UNSPECIFIED: _ClassVar[TaskState]
    TASK_STATE_PENDING: _ClassVar[TaskState]
    TASK_STATE_QUEUED: _ClassVar[TaskState]
    TASK_STATE_ASSIGNED: _ClassVar[TaskState]
    TASK_STATE_RUNNING: _ClassVar[TaskState]
    TASK_STATE_COMPLETED: _ClassVar[TaskState]
    TASK_STATE_FAILED: _ClassVar[TaskState]
    TASK_STATE_CANCELLED: _ClassVar[TaskState]
    TASK_STATE_SKIPPED: _ClassVar[TaskState]
    TASK_STATE_DEAD_LETTER: _ClassVar[TaskState]

class WorkflowState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKFLOW_STATE_UNSPECIFIED: _ClassVar[WorkflowState]
    WORKFLOW_STATE_SUBMITTING: _ClassVar[WorkflowState]
    WORKFLOW_STATE_RUNNING: _ClassVar[WorkflowState]
    WORKFLOW_STATE_COMPLETED: _ClassVar[WorkflowState]
    WORKFLOW_STATE_FAILED: _ClassVar[WorkflowState]
    WORKFLOW_STATE_CANCELLED: _ClassVar[WorkflowState]

class NodeStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_STATUS_UNSPECIFIED: _ClassVar[NodeStatus]
    NODE_STATUS_ACTIVE: _ClassVar[NodeStatus]
    NODE_STATUS_DRAINING: _ClassVar[NodeStatus]
    NODE_STATUS_CORDONED: _ClassVar[NodeStatus]
    NODE_STATUS_OFFLINE: _ClassVar[NodeStatus]
    NODE_STATUS_REMOVED: _ClassVar[NodeStatus]

class NodeRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_ROLE_UNSPECIFIED: _ClassVar[NodeRole]
    NODE_ROLE_VOTER: _ClassVar[NodeRole]
    NODE_ROLE_OBSERVER: _ClassVar[NodeRole]

class RaftRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RAFT_ROLE_UNSPECIFIED: _ClassVar[RaftRole]
    RAFT_ROLE_FOLLOWER: _ClassVar[RaftRole]
    RAFT_ROLE_CANDIDATE: _ClassVar[RaftRole]
    RAFT_ROLE_LEADER: _ClassVar[RaftRole]
    RAFT_ROLE_OBSERVER: _ClassVar[RaftRole]

class OutputStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_STREAM_UNSPECIFIED: _ClassVar[OutputStream]
    OUTPUT_STREAM_STDOUT: _ClassVar[OutputStream]
    OUTPUT_STREAM_STDERR: _ClassVar[OutputStream]

class DefinitionFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEFINITION_FORMAT_UNSPECIFIED: _ClassVar[DefinitionFormat]
    DEFINITION_FORMAT_JSON: _ClassVar[DefinitionFormat]
    DEFINITION_FORMAT_YAML: _ClassVar[DefinitionFormat]

class ListOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LIST_ORDER_UNSPECIFIED: _ClassVar[ListOrder]
    LIST_ORDER_NEWEST_FIRST: _ClassVar[ListOrder]
    LIST_ORDER_OLDEST_FIRST: _ClassVar[ListOrder]

class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_TYPE_UNSPECIFIED: _ClassVar[EventType]
    EVENT_TYPE_SUBMITTED: _ClassVar[EventType]
    EVENT_TYPE_ASSIGNED: _ClassVar[EventType]
    EVENT_TYPE_STARTED: _ClassVar[EventType]
    EVENT_TYPE_COMPLETED: _ClassVar[EventType]
    EVENT_TYPE_FAILED: _ClassVar[EventType]
    EVENT_TYPE_RETRIED: _ClassVar[EventType]
    EVENT_TYPE_REQUEUED: _ClassVar[EventType]
    EVENT_TYPE_CANCELLED: _ClassVar[EventType]
    EVENT_TYPE_DEAD_LETTERED: _ClassVar[EventType]
    EVENT_TYPE_RELEASED: _ClassVar[EventType]
    EVENT_TYPE_SKIPPED: _ClassVar[EventType]
    EVENT_TYPE_ATTEMPT_FAILED: _ClassVar[EventType]
    EVENT_TYPE_REJECTED: _ClassVar[EventType]
    EVENT_TYPE_PURGED: _ClassVar[EventType]
    EVENT_TYPE_NODE_JOINED: _ClassVar[EventType]
    EVENT_TYPE_NODE_LEFT: _ClassVar[EventType]
    EVENT_TYPE_NODE_STATUS: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_RECEIVED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_SUBMITTED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_COMPLETED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_FAILED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_CANCELLED: _ClassVar[EventType]
    EVENT_TYPE_CONTEXT_UPDATED: _ClassVar[EventType]
    EVENT_TYPE_CONTEXT_UPDATE_REJECTED: _ClassVar[EventType]
    EVENT_TYPE_SCHEDULE_CREATED: _ClassVar[EventType]
    EVENT_TYPE_SCHEDULE_PAUSED: _ClassVar[EventType]
    EVENT_TYPE_SCHEDULE_RESUMED: _ClassVar[EventType]
    EVENT_TYPE_SCHEDULE_DELETED: _ClassVar[EventType]
    EVENT_TYPE_LIMIT_SET: _ClassVar[EventType]
    EVENT_TYPE_LIMIT_DELETED: _ClassVar[EventType]
    EVENT_TYPE_WEIGHT_SET: _ClassVar[EventType]

class ScheduleOverlap(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULE_OVERLAP_UNSPECIFIED: _ClassVar[ScheduleOverlap]
    SCHEDULE_OVERLAP_SKIP: _ClassVar[ScheduleOverlap]
    SCHEDULE_OVERLAP_BUFFER_ONE: _ClassVar[ScheduleOverlap]
    SCHEDULE_OVERLAP_ALLOW_ALL: _ClassVar[ScheduleOverlap]
    SCHEDULE_OVERLAP_CANCEL_PREVIOUS: _ClassVar[ScheduleOverlap]

class ScheduleFiringAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULE_FIRING_ACTION_UNSPECIFIED: _ClassVar[ScheduleFiringAction]
    SCHEDULE_FIRING_ACTION_FIRE: _ClassVar[ScheduleFiringAction]
    SCHEDULE_FIRING_ACTION_TRIGGER: _ClassVar[ScheduleFiringAction]
    SCHEDULE_FIRING_ACTION_MISSED: _ClassVar[ScheduleFiringAction]
    SCHEDULE_FIRING_ACTION_SKIPPED: _ClassVar[ScheduleFiringAction]
    SCHEDULE_FIRING_ACTION_BUFFERED: _ClassVar[ScheduleFiringAction]
    SCHEDULE_FIRING_ACTION_FAILED: _ClassVar[ScheduleFiringAction]
READ_CONSISTENCY_UNSPECIFIED: ReadConsistency
READ_CONSISTENCY_STALE: ReadConsistency
READ_CONSISTENCY_SESSION: ReadConsistency
READ_CONSISTENCY_LINEARIZABLE: ReadConsistency
TASK_STATE_UNSPECIFIED: TaskState
TASK_STATE_PENDING: TaskState
TASK_STATE_QUEUED: TaskState
TASK_STATE_ASSIGNED: TaskState
TASK_STATE_RUNNING: TaskState
TASK_STATE_COMPLETED: TaskState
TASK_STATE_FAILED: TaskState
TASK_STATE_CANCELLED: TaskState
TASK_STATE_SKIPPED: TaskState
TASK_STATE_DEAD_LETTER: TaskState
WORKFLOW_STATE_UNSPECIFIED: WorkflowState
WORKFLOW_STATE_SUBMITTING: WorkflowState
WORKFLOW_STATE_RUNNING: WorkflowState
WORKFLOW_STATE_COMPLETED: WorkflowState
WORKFLOW_STATE_FAILED: WorkflowState
WORKFLOW_STATE_CANCELLED: WorkflowState
NODE_STATUS_UNSPECIFIED: NodeStatus
NODE_STATUS_ACTIVE: NodeStatus
NODE_STATUS_DRAINING: NodeStatus
NODE_STATUS_CORDONED: NodeStatus
NODE_STATUS_OFFLINE: NodeStatus
NODE_STATUS_REMOVED: NodeStatus
NODE_ROLE_UNSPECIFIED: NodeRole
NODE_ROLE_VOTER: NodeRole
NODE_ROLE_OBSERVER: NodeRole
RAFT_ROLE_UNSPECIFIED: RaftRole
RAFT_ROLE_FOLLOWER: RaftRole
RAFT_ROLE_CANDIDATE: RaftRole
RAFT_ROLE_LEADER: RaftRole
RAFT_ROLE_OBSERVER: RaftRole
OUTPUT_STREAM_UNSPECIFIED: OutputStream
OUTPUT_STREAM_STDOUT: OutputStream
OUTPUT_STREAM_STDERR: OutputStream
DEFINITION_FORMAT_UNSPECIFIED: DefinitionFormat
DEFINITION_FORMAT_JSON: DefinitionFormat
DEFINITION_FORMAT_YAML: DefinitionFormat
LIST_ORDER_UNSPECIFIED: ListOrder
LIST_ORDER_NEWEST_FIRST: ListOrder
LIST_ORDER_OLDEST_FIRST: ListOrder
EVENT_TYPE_UNSPECIFIED: EventType
EVENT_TYPE_SUBMITTED: EventType
EVENT_TYPE_ASSIGNED: EventType
EVENT_TYPE_STARTED: EventType
EVENT_TYPE_COMPLETED: EventType
EVENT_TYPE_FAILED: EventType
EVENT_TYPE_RETRIED: EventType
EVENT_TYPE_REQUEUED: EventType
EVENT_TYPE_CANCELLED: EventType
EVENT_TYPE_DEAD_LETTERED: EventType
EVENT_TYPE_RELEASED: EventType
EVENT_TYPE_SKIPPED: EventType
EVENT_TYPE_ATTEMPT_FAILED: EventType
EVENT_TYPE_REJECTED: EventType
EVENT_TYPE_PURGED: EventType
EVENT_TYPE_NODE_JOINED: EventType
EVENT_TYPE_NODE_LEFT: EventType
EVENT_TYPE_NODE_STATUS: EventType
EVENT_TYPE_WORKFLOW_RECEIVED: EventType
EVENT_TYPE_WORKFLOW_SUBMITTED: EventType
EVENT_TYPE_WORKFLOW_COMPLETED: EventType
EVENT_TYPE_WORKFLOW_FAILED: EventType
EVENT_TYPE_WORKFLOW_CANCELLED: EventType
EVENT_TYPE_CONTEXT_UPDATED: EventType
EVENT_TYPE_CONTEXT_UPDATE_REJECTED: EventType
EVENT_TYPE_SCHEDULE_CREATED: EventType
EVENT_TYPE_SCHEDULE_PAUSED: EventType
EVENT_TYPE_SCHEDULE_RESUMED: EventType
EVENT_TYPE_SCHEDULE_DELETED: EventType
EVENT_TYPE_LIMIT_SET: EventType
EVENT_TYPE_LIMIT_DELETED: EventType
EVENT_TYPE_WEIGHT_SET: EventType
SCHEDULE_OVERLAP_UNSPECIFIED: ScheduleOverlap
SCHEDULE_OVERLAP_SKIP: ScheduleOverlap
SCHEDULE_OVERLAP_BUFFER_ONE: ScheduleOverlap
SCHEDULE_OVERLAP_ALLOW_ALL: ScheduleOverlap
SCHEDULE_OVERLAP_CANCEL_PREVIOUS: ScheduleOverlap
SCHEDULE_FIRING_ACTION_UNSPECIFIED: ScheduleFiringAction
SCHEDULE_FIRING_ACTION_FIRE: ScheduleFiringAction
SCHEDULE_FIRING_ACTION_TRIGGER: ScheduleFiringAction
SCHEDULE_FIRING_ACTION_MISSED: ScheduleFiringAction
SCHEDULE_FIRING_ACTION_SKIPPED: ScheduleFiringAction
SCHEDULE_FIRING_ACTION_BUFFERED: ScheduleFiringAction
SCHEDULE_FIRING_ACTION_FAILED: ScheduleFiringAction

class ReadOptions(_message.Message):
    __slots__ = ("consistency", "min_index")
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    MIN_INDEX_FIELD_NUMBER: _ClassVar[int]
    consistency: ReadConsistency
    min_index: int
    def __init__(self, consistency: _Optional[_Union[ReadConsistency, str]] = ..., min_index: _Optional[int] = ...) -> None: ...

class ResponseHeader(_message.Message):
    __slots__ = ("node_id", "applied_index", "leader_commit_index", "leader_contact_age", "consistency", "leader_id", "leader_grpc_address")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_CONTACT_AGE_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    applied_index: int
    leader_commit_index: int
    leader_contact_age: _duration_pb2.Duration
    consistency: ReadConsistency
    leader_id: str
    leader_grpc_address: str
    def __init__(self, node_id: _Optional[str] = ..., applied_index: _Optional[int] = ..., leader_commit_index: _Optional[int] = ..., leader_contact_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., consistency: _Optional[_Union[ReadConsistency, str]] = ..., leader_id: _Optional[str] = ..., leader_grpc_address: _Optional[str] = ...) -> None: ...

class TimeRange(_message.Message):
    __slots__ = ("start_time", "end_time")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_retries", "backoff", "backoff_multiplier", "retryable")
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    max_retries: int
    backoff: _duration_pb2.Duration
    backoff_multiplier: float
    retryable: bool
    def __init__(self, max_retries: _Optional[int] = ..., backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_multiplier: _Optional[float] = ..., retryable: _Optional[bool] = ...) -> None: ...

class Constraints(_message.Message):
    __slots__ = ("requires_gpu", "avoid_gaming", "min_memory_mb", "min_disk_gb", "node_labels", "target_node", "requires_capabilities", "allowed_nodes", "forbidden_nodes", "max_parallel_per_node")
    class RequiresCapabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REQUIRES_GPU_FIELD_NUMBER: _ClassVar[int]
    AVOID_GAMING_FIELD_NUMBER: _ClassVar[int]
    MIN_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    MIN_DISK_GB_FIELD_NUMBER: _ClassVar[int]
    NODE_LABELS_FIELD_NUMBER: _ClassVar[int]
    TARGET_NODE_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_NODES_FIELD_NUMBER: _ClassVar[int]
    FORBIDDEN_NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_PARALLEL_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    requires_gpu: bool
    avoid_gaming: bool
    min_memory_mb: int
    min_disk_gb: float
    node_labels: _containers.RepeatedScalarFieldContainer[str]
    target_node: str
    requires_capabilities: _containers.ScalarMap[str, str]
    allowed_nodes: _containers.RepeatedScalarFieldContainer[str]
    forbidden_nodes: _containers.RepeatedScalarFieldContainer[str]
    max_parallel_per_node: int
    def __init__(self, requires_gpu: _Optional[bool] = ..., avoid_gaming: _Optional[bool] = ..., min_memory_mb: _Optional[int] = ..., min_disk_gb: _Optional[float] = ..., node_labels: _Optional[_Iterable[str]] = ..., target_node: _Optional[str] = ..., requires_capabilities: _Optional[_Mapping[str, str]] = ..., allowed_nodes: _Optional[_Iterable[str]] = ..., forbidden_nodes: _Optional[_Iterable[str]] = ..., max_parallel_per_node: _Optional[int] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("type", "command", "shell", "env", "cwd", "timeout", "priority", "constraints", "retry_policy", "labels", "options", "concurrency_key", "fairness_key")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_KEY_FIELD_NUMBER: _ClassVar[int]
    type: str
    command: _containers.RepeatedScalarFieldContainer[str]
    shell: str
    env: _containers.ScalarMap[str, str]
    cwd: str
    timeout: _duration_pb2.Duration
    priority: int
    constraints: Constraints
    retry_policy: RetryPolicy
    labels: _containers.ScalarMap[str, str]
    options: _struct_pb2.Struct
    concurrency_key: str
    fairness_key: str
    def __init__(self, type: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., shell: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., cwd: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., priority: _Optional[int] = ..., constraints: _Optional[_Union[Constraints, _Mapping]] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., concurrency_key: _Optional[str] = ..., fairness_key: _Optional[str] = ...) -> None: ...

class TaskResult(_message.Message):
    __slots__ = ("exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "error", "timed_out")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDERR_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    error: str
    timed_out: bool
    def __init__(self, exit_code: _Optional[int] = ..., stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., stdout_truncated: _Optional[bool] = ..., stderr_truncated: _Optional[bool] = ..., error: _Optional[str] = ..., timed_out: _Optional[bool] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "state", "type", "attempt", "node_id", "priority", "spec", "result", "idempotency_key", "workflow_id", "workflow_key", "error", "create_time", "update_time", "schedule_time", "start_time", "finish_time", "pending_reasons", "submit_index", "traceparent", "concurrency_key", "fairness_key")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_KEY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASONS_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: TaskState
    type: str
    attempt: int
    node_id: str
    priority: int
    spec: TaskSpec
    result: TaskResult
    idempotency_key: str
    workflow_id: str
    workflow_key: str
    error: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    schedule_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    finish_time: _timestamp_pb2.Timestamp
    pending_reasons: _containers.RepeatedScalarFieldContainer[str]
    submit_index: int
    traceparent: str
    concurrency_key: str
    fairness_key: str
    def __init__(self, id: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., type: _Optional[str] = ..., attempt: _Optional[int] = ..., node_id: _Optional[str] = ..., priority: _Optional[int] = ..., spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., workflow_id: _Optional[str] = ..., workflow_key: _Optional[str] = ..., error: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., schedule_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_reasons: _Optional[_Iterable[str]] = ..., submit_index: _Optional[int] = ..., traceparent: _Optional[str] = ..., concurrency_key: _Optional[str] = ..., fairness_key: _Optional[str] = ...) -> None: ...

class TaskStateCount(_message.Message):
    __slots__ = ("state", "count")
    STATE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    state: TaskState
    count: int
    def __init__(self, state: _Optional[_Union[TaskState, str]] = ..., count: _Optional[int] = ...) -> None: ...

class TaskStateChange(_message.Message):
    __slots__ = ("from_state", "to_state")
    FROM_STATE_FIELD_NUMBER: _ClassVar[int]
    TO_STATE_FIELD_NUMBER: _ClassVar[int]
    from_state: TaskState
    to_state: TaskState
    def __init__(self, from_state: _Optional[_Union[TaskState, str]] = ..., to_state: _Optional[_Union[TaskState, str]] = ...) -> None: ...

class WorkflowStateChange(_message.Message):
    __slots__ = ("from_state", "to_state")
    FROM_STATE_FIELD_NUMBER: _ClassVar[int]
    TO_STATE_FIELD_NUMBER: _ClassVar[int]
    from_state: WorkflowState
    to_state: WorkflowState
    def __init__(self, from_state: _Optional[_Union[WorkflowState, str]] = ..., to_state: _Optional[_Union[WorkflowState, str]] = ...) -> None: ...

class NodeStatusChange(_message.Message):
    __slots__ = ("from_status", "to_status")
    FROM_STATUS_FIELD_NUMBER: _ClassVar[int]
    TO_STATUS_FIELD_NUMBER: _ClassVar[int]
    from_status: NodeStatus
    to_status: NodeStatus
    def __init__(self, from_status: _Optional[_Union[NodeStatus, str]] = ..., to_status: _Optional[_Union[NodeStatus, str]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "type", "task_id", "workflow_id", "node_id", "attempt", "task_change", "workflow_change", "node_change", "detail", "time", "raft_index", "entry_type")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TASK_CHANGE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_CHANGE_FIELD_NUMBER: _ClassVar[int]
    NODE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    RAFT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ENTRY_TYPE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    type: EventType
    task_id: str
    workflow_id: str
    node_id: str
    attempt: int
    task_change: TaskStateChange
    workflow_change: WorkflowStateChange
    node_change: NodeStatusChange
    detail: _struct_pb2.Struct
    time: _timestamp_pb2.Timestamp
    raft_index: int
    entry_type: str
    def __init__(self, seq: _Optional[int] = ..., type: _Optional[_Union[EventType, str]] = ..., task_id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., node_id: _Optional[str] = ..., attempt: _Optional[int] = ..., task_change: _Optional[_Union[TaskStateChange, _Mapping]] = ..., workflow_change: _Optional[_Union[WorkflowStateChange, _Mapping]] = ..., node_change: _Optional[_Union[NodeStatusChange, _Mapping]] = ..., detail: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., raft_index: _Optional[int] = ..., entry_type: _Optional[str] = ...) -> None: ...

class SubmitTaskRequest(_message.Message):
    __slots__ = ("spec", "idempotency_key")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    spec: TaskSpec
    idempotency_key: str
    def __init__(self, spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTaskResponse(_message.Message):
    __slots__ = ("task", "created", "commit_index", "header")
    TASK_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    task: Task
    created: bool
    commit_index: int
    header: ResponseHeader
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., created: _Optional[bool] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class SubmitTasksRequest(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[SubmitTaskRequest]
    def __init__(self, tasks: _Optional[_Iterable[_Union[SubmitTaskRequest, _Mapping]]] = ...) -> None: ...

class SubmitTasksResult(_message.Message):
    __slots__ = ("task", "created", "error", "error_code")
    TASK_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    task: Task
    created: bool
    error: str
    error_code: int
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., created: _Optional[bool] = ..., error: _Optional[str] = ..., error_code: _Optional[int] = ...) -> None: ...

class SubmitTasksResponse(_message.Message):
    __slots__ = ("results", "commit_index", "header")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubmitTasksResult]
    commit_index: int
    header: ResponseHeader
    def __init__(self, results: _Optional[_Iterable[_Union[SubmitTasksResult, _Mapping]]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("task_id", "include_events", "read_options")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    include_events: bool
    read_options: ReadOptions
    def __init__(self, task_id: _Optional[str] = ..., include_events: _Optional[bool] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ("task", "events", "header")
    TASK_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    task: Task
    events: _containers.RepeatedCompositeFieldContainer[Event]
    header: ResponseHeader
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class GetTaskResultRequest(_message.Message):
    __slots__ = ("task_id", "wait", "timeout", "read_options")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    wait: bool
    timeout: _duration_pb2.Duration
    read_options: ReadOptions
    def __init__(self, task_id: _Optional[str] = ..., wait: _Optional[bool] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class GetTaskResultResponse(_message.Message):
    __slots__ = ("task", "header")
    TASK_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    task: Task
    header: ResponseHeader
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("states", "type", "workflow_id", "node_id", "page_size", "page_token", "order", "read_options", "create_time_range")
    STATES_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[TaskState]
    type: str
    workflow_id: str
    node_id: str
    page_size: int
    page_token: str
    order: ListOrder
    read_options: ReadOptions
    create_time_range: TimeRange
    def __init__(self, states: _Optional[_Iterable[_Union[TaskState, str]]] = ..., type: _Optional[str] = ..., workflow_id: _Optional[str] = ..., node_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order: _Optional[_Union[ListOrder, str]] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ..., create_time_range: _Optional[_Union[TimeRange, _Mapping]] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token", "total_size", "header")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    next_page_token: str
    total_size: int
    header: ResponseHeader
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class CancelTaskRequest(_message.Message):
    __slots__ = ("task_id", "reason")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    reason: str
    def __init__(self, task_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelTaskResponse(_message.Message):
    __slots__ = ("task", "commit_index", "header")
    TASK_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    task: Task
    commit_index: int
    header: ResponseHeader
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class ListDeadLetterTasksRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order", "read_options", "create_time_range")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order: ListOrder
    read_options: ReadOptions
    create_time_range: TimeRange
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order: _Optional[_Union[ListOrder, str]] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ..., create_time_range: _Optional[_Union[TimeRange, _Mapping]] = ...) -> None: ...

class ListDeadLetterTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token", "total_size", "header")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    next_page_token: str
    total_size: int
    header: ResponseHeader
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class RetryDeadLetterTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class RetryDeadLetterTaskResponse(_message.Message):
    __slots__ = ("task", "commit_index", "header", "retry_budget", "workflow_state", "rejoined_workflow")
    TASK_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RETRY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_STATE_FIELD_NUMBER: _ClassVar[int]
    REJOINED_WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    task: Task
    commit_index: int
    header: ResponseHeader
    retry_budget: int
    workflow_state: WorkflowState
    rejoined_workflow: bool
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., retry_budget: _Optional[int] = ..., workflow_state: _Optional[_Union[WorkflowState, str]] = ..., rejoined_workflow: _Optional[bool] = ...) -> None: ...

class SubmitWorkflowRequest(_message.Message):
    __slots__ = ("definition", "format", "idempotency_key")
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    definition: str
    format: DefinitionFormat
    idempotency_key: str
    def __init__(self, definition: _Optional[str] = ..., format: _Optional[_Union[DefinitionFormat, str]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitWorkflowResponse(_message.Message):
    __slots__ = ("workflow_id", "created", "commit_index", "header")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    created: bool
    commit_index: int
    header: ResponseHeader
    def __init__(self, workflow_id: _Optional[str] = ..., created: _Optional[bool] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class WorkflowTask(_message.Message):
    __slots__ = ("key", "task_id", "type", "state", "attempt", "node_id", "depends_on", "condition", "skip_reason", "start_time", "finish_time", "exit_code")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    SKIP_REASON_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    key: str
    task_id: str
    type: str
    state: TaskState
    attempt: int
    node_id: str
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    condition: str
    skip_reason: str
    start_time: _timestamp_pb2.Timestamp
    finish_time: _timestamp_pb2.Timestamp
    exit_code: int
    def __init__(self, key: _Optional[str] = ..., task_id: _Optional[str] = ..., type: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., attempt: _Optional[int] = ..., node_id: _Optional[str] = ..., depends_on: _Optional[_Iterable[str]] = ..., condition: _Optional[str] = ..., skip_reason: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., exit_code: _Optional[int] = ...) -> None: ...

class Workflow(_message.Message):
    __slots__ = ("id", "name", "state", "context", "tasks", "create_time", "finish_time", "error", "task_counts", "submit_index", "traceparent")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNTS_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    state: WorkflowState
    context: _struct_pb2.Struct
    tasks: _containers.RepeatedCompositeFieldContainer[WorkflowTask]
    create_time: _timestamp_pb2.Timestamp
    finish_time: _timestamp_pb2.Timestamp
    error: str
    task_counts: _containers.RepeatedCompositeFieldContainer[TaskStateCount]
    submit_index: int
    traceparent: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[_Union[WorkflowState, str]] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[WorkflowTask, _Mapping]]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., task_counts: _Optional[_Iterable[_Union[TaskStateCount, _Mapping]]] = ..., submit_index: _Optional[int] = ..., traceparent: _Optional[str] = ...) -> None: ...

class GetWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "read_options")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    read_options: ReadOptions
    def __init__(self, workflow_id: _Optional[str] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class GetWorkflowResponse(_message.Message):
    __slots__ = ("workflow", "header")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    workflow: Workflow
    header: ResponseHeader
    def __init__(self, workflow: _Optional[_Union[Workflow, _Mapping]] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ("states", "page_size", "page_token", "order", "read_options", "create_time_range")
    STATES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[WorkflowState]
    page_size: int
    page_token: str
    order: ListOrder
    read_options: ReadOptions
    create_time_range: TimeRange
    def __init__(self, states: _Optional[_Iterable[_Union[WorkflowState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order: _Optional[_Union[ListOrder, str]] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ..., create_time_range: _Optional[_Union[TimeRange, _Mapping]] = ...) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ("workflows", "next_page_token", "total_size", "header")
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[Workflow]
    next_page_token: str
    total_size: int
    header: ResponseHeader
    def __init__(self, workflows: _Optional[_Iterable[_Union[Workflow, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class CancelWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "reason")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    reason: str
    def __init__(self, workflow_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelWorkflowResponse(_message.Message):
    __slots__ = ("workflow", "commit_index", "header")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    workflow: Workflow
    commit_index: int
    header: ResponseHeader
    def __init__(self, workflow: _Optional[_Union[Workflow, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class StreamTaskOutputRequest(_message.Message):
    __slots__ = ("task_id", "attempt", "from_offset", "follow", "stream", "read_options")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    attempt: int
    from_offset: int
    follow: bool
    stream: OutputStream
    read_options: ReadOptions
    def __init__(self, task_id: _Optional[str] = ..., attempt: _Optional[int] = ..., from_offset: _Optional[int] = ..., follow: _Optional[bool] = ..., stream: _Optional[_Union[OutputStream, str]] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class OutputData(_message.Message):
    __slots__ = ("stream", "offset", "data", "time")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    stream: OutputStream
    offset: int
    data: bytes
    time: _timestamp_pb2.Timestamp
    def __init__(self, stream: _Optional[_Union[OutputStream, str]] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class OutputEnd(_message.Message):
    __slots__ = ("attempt", "state", "exit_code", "error", "total_bytes", "interrupted")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    state: TaskState
    exit_code: int
    error: str
    total_bytes: int
    interrupted: bool
    def __init__(self, attempt: _Optional[int] = ..., state: _Optional[_Union[TaskState, str]] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ..., total_bytes: _Optional[int] = ..., interrupted: _Optional[bool] = ...) -> None: ...

class StreamTaskOutputResponse(_message.Message):
    __slots__ = ("attempt", "data", "end")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    data: OutputData
    end: OutputEnd
    def __init__(self, attempt: _Optional[int] = ..., data: _Optional[_Union[OutputData, _Mapping]] = ..., end: _Optional[_Union[OutputEnd, _Mapping]] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("task_id", "workflow_id", "types", "after_seq", "from_start", "follow", "read_options")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    FROM_START_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    workflow_id: str
    types: _containers.RepeatedScalarFieldContainer[EventType]
    after_seq: int
    from_start: bool
    follow: bool
    read_options: ReadOptions
    def __init__(self, task_id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., types: _Optional[_Iterable[_Union[EventType, str]]] = ..., after_seq: _Optional[int] = ..., from_start: _Optional[bool] = ..., follow: _Optional[bool] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class WatchEventsResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: Event
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class GpuInfo(_message.Message):
    __slots__ = ("name", "memory_total_mb", "memory_used_mb", "usage_percent")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_MB_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_MB_FIELD_NUMBER: _ClassVar[int]
    USAGE_PERCENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    memory_total_mb: float
    memory_used_mb: float
    usage_percent: float
    def __init__(self, name: _Optional[str] = ..., memory_total_mb: _Optional[float] = ..., memory_used_mb: _Optional[float] = ..., usage_percent: _Optional[float] = ...) -> None: ...

class NodeResources(_message.Message):
    __slots__ = ("cpu_cores", "cpu_usage_percent", "load_1m", "memory_total_mb", "memory_available_mb", "disk_total_gb", "disk_available_gb", "disk_io_util_percent", "network_bandwidth_mbps", "network_throughput_mbps", "gpu", "gaming_detected", "declared")
    CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    CPU_USAGE_PERCENT_FIELD_NUMBER: _ClassVar[int]
    LOAD_1M_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_MB_FIELD_NUMBER: _ClassVar[int]
    MEMORY_AVAILABLE_MB_FIELD_NUMBER: _ClassVar[int]
    DISK_TOTAL_GB_FIELD_NUMBER: _ClassVar[int]
    DISK_AVAILABLE_GB_FIELD_NUMBER: _ClassVar[int]
    DISK_IO_UTIL_PERCENT_FIELD_NUMBER: _ClassVar[int]
    NETWORK_BANDWIDTH_MBPS_FIELD_NUMBER: _ClassVar[int]
    NETWORK_THROUGHPUT_MBPS_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    GAMING_DETECTED_FIELD_NUMBER: _ClassVar[int]
    DECLARED_FIELD_NUMBER: _ClassVar[int]
    cpu_cores: float
    cpu_usage_percent: float
    load_1m: float
    memory_total_mb: float
    memory_available_mb: float
    disk_total_gb: float
    disk_available_gb: float
    disk_io_util_percent: float
    network_bandwidth_mbps: float
    network_throughput_mbps: float
    gpu: GpuInfo
    gaming_detected: bool
    declared: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cpu_cores: _Optional[float] = ..., cpu_usage_percent: _Optional[float] = ..., load_1m: _Optional[float] = ..., memory_total_mb: _Optional[float] = ..., memory_available_mb: _Optional[float] = ..., disk_total_gb: _Optional[float] = ..., disk_available_gb: _Optional[float] = ..., disk_io_util_percent: _Optional[float] = ..., network_bandwidth_mbps: _Optional[float] = ..., network_throughput_mbps: _Optional[float] = ..., gpu: _Optional[_Union[GpuInfo, _Mapping]] = ..., gaming_detected: _Optional[bool] = ..., declared: _Optional[_Iterable[str]] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("id", "raft_address", "grpc_address", "peer_address", "status", "role", "connected", "leader", "running_tasks", "labels", "executors", "resources", "report_age", "capabilities", "max_tasks", "status_reason", "drain_deadline", "prefetch_tasks")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class CapabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    RUNNING_TASKS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    REPORT_AGE_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    DRAIN_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    PREFETCH_TASKS_FIELD_NUMBER: _ClassVar[int]
    id: str
    raft_address: str
    grpc_address: str
    peer_address: str
    status: NodeStatus
    role: NodeRole
    connected: bool
    leader: bool
    running_tasks: int
    labels: _containers.ScalarMap[str, str]
    executors: _containers.RepeatedScalarFieldContainer[str]
    resources: NodeResources
    report_age: _duration_pb2.Duration
    capabilities: _containers.ScalarMap[str, str]
    max_tasks: int
    status_reason: str
    drain_deadline: _timestamp_pb2.Timestamp
    prefetch_tasks: int
    def __init__(self, id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., peer_address: _Optional[str] = ..., status: _Optional[_Union[NodeStatus, str]] = ..., role: _Optional[_Union[NodeRole, str]] = ..., connected: _Optional[bool] = ..., leader: _Optional[bool] = ..., running_tasks: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., executors: _Optional[_Iterable[str]] = ..., resources: _Optional[_Union[NodeResources, _Mapping]] = ..., report_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., capabilities: _Optional[_Mapping[str, str]] = ..., max_tasks: _Optional[int] = ..., status_reason: _Optional[str] = ..., drain_deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., prefetch_tasks: _Optional[int] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ("include_removed", "read_options")
    INCLUDE_REMOVED_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    include_removed: bool
    read_options: ReadOptions
    def __init__(self, include_removed: _Optional[bool] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes", "header")
    NODES_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    header: ResponseHeader
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ("node_id", "deadline")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    deadline: _duration_pb2.Duration
    def __init__(self, node_id: _Optional[str] = ..., deadline: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class DrainNodeResponse(_message.Message):
    __slots__ = ("node", "commit_index", "header")
    NODE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    node: Node
    commit_index: int
    header: ResponseHeader
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class CordonNodeRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class CordonNodeResponse(_message.Message):
    __slots__ = ("node", "commit_index", "header")
    NODE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    node: Node
    commit_index: int
    header: ResponseHeader
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class UncordonNodeRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class UncordonNodeResponse(_message.Message):
    __slots__ = ("node", "commit_index", "header")
    NODE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    node: Node
    commit_index: int
    header: ResponseHeader
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class RemoveNodeRequest(_message.Message):
    __slots__ = ("node_id", "reason")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    reason: str
    def __init__(self, node_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RemoveNodeResponse(_message.Message):
    __slots__ = ("node_id", "raft_address", "requeued_tasks", "members", "commit_index", "header")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REQUEUED_TASKS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft_address: str
    requeued_tasks: int
    members: _containers.RepeatedScalarFieldContainer[str]
    commit_index: int
    header: ResponseHeader
    def __init__(self, node_id: _Optional[str] = ..., raft_address: _Optional[str] = ..., requeued_tasks: _Optional[int] = ..., members: _Optional[_Iterable[str]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class GetClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetClusterStatusResponse(_message.Message):
    __slots__ = ("node_id", "leader_id", "leader_raft_address", "term", "raft_role", "node_role", "has_quorum", "applied_index", "commit_index", "state_digest", "nodes", "task_counts", "log_size", "raft_sync", "journal_syncs", "journal_synced_entries", "header", "raft_last_applied", "election_timeout_min", "election_timeout_max")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    RAFT_ROLE_FIELD_NUMBER: _ClassVar[int]
    NODE_ROLE_FIELD_NUMBER: _ClassVar[int]
    HAS_QUORUM_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNTS_FIELD_NUMBER: _ClassVar[int]
    LOG_SIZE_FIELD_NUMBER: _ClassVar[int]
    RAFT_SYNC_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNCS_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNCED_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RAFT_LAST_APPLIED_FIELD_NUMBER: _ClassVar[int]
    ELECTION_TIMEOUT_MIN_FIELD_NUMBER: _ClassVar[int]
    ELECTION_TIMEOUT_MAX_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    leader_id: str
    leader_raft_address: str
    term: int
    raft_role: RaftRole
    node_role: NodeRole
    has_quorum: bool
    applied_index: int
    commit_index: int
    state_digest: str
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    task_counts: _containers.RepeatedCompositeFieldContainer[TaskStateCount]
    log_size: int
    raft_sync: bool
    journal_syncs: int
    journal_synced_entries: int
    header: ResponseHeader
    raft_last_applied: int
    election_timeout_min: _duration_pb2.Duration
    election_timeout_max: _duration_pb2.Duration
    def __init__(self, node_id: _Optional[str] = ..., leader_id: _Optional[str] = ..., leader_raft_address: _Optional[str] = ..., term: _Optional[int] = ..., raft_role: _Optional[_Union[RaftRole, str]] = ..., node_role: _Optional[_Union[NodeRole, str]] = ..., has_quorum: _Optional[bool] = ..., applied_index: _Optional[int] = ..., commit_index: _Optional[int] = ..., state_digest: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., task_counts: _Optional[_Iterable[_Union[TaskStateCount, _Mapping]]] = ..., log_size: _Optional[int] = ..., raft_sync: _Optional[bool] = ..., journal_syncs: _Optional[int] = ..., journal_synced_entries: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., raft_last_applied: _Optional[int] = ..., election_timeout_min: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., election_timeout_max: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ScheduleFiring(_message.Message):
    __slots__ = ("slot", "first_slot", "count", "action", "reason", "task_id", "workflow_id", "run_state", "decided_at")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    FIRST_SLOT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_STATE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    slot: _timestamp_pb2.Timestamp
    first_slot: _timestamp_pb2.Timestamp
    count: int
    action: ScheduleFiringAction
    reason: str
    task_id: str
    workflow_id: str
    run_state: str
    decided_at: _timestamp_pb2.Timestamp
    def __init__(self, slot: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., first_slot: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ..., action: _Optional[_Union[ScheduleFiringAction, str]] = ..., reason: _Optional[str] = ..., task_id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., run_state: _Optional[str] = ..., decided_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("id", "name", "cron", "timezone", "every", "task", "workflow_definition", "workflow_format", "overlap", "catchup_window", "paused", "create_time", "update_time", "last_slot", "last_fired_at", "last_fired_slot", "next_slot", "buffered_slot", "fired", "missed", "skipped", "active_runs", "recent")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_DEFINITION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FORMAT_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SLOT_FIELD_NUMBER: _ClassVar[int]
    LAST_FIRED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_FIRED_SLOT_FIELD_NUMBER: _ClassVar[int]
    NEXT_SLOT_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_SLOT_FIELD_NUMBER: _ClassVar[int]
    FIRED_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    cron: str
    timezone: str
    every: _duration_pb2.Duration
    task: TaskSpec
    workflow_definition: str
    workflow_format: DefinitionFormat
    overlap: ScheduleOverlap
    catchup_window: _duration_pb2.Duration
    paused: bool
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    last_slot: _timestamp_pb2.Timestamp
    last_fired_at: _timestamp_pb2.Timestamp
    last_fired_slot: _timestamp_pb2.Timestamp
    next_slot: _timestamp_pb2.Timestamp
    buffered_slot: _timestamp_pb2.Timestamp
    fired: int
    missed: int
    skipped: int
    active_runs: _containers.RepeatedScalarFieldContainer[str]
    recent: _containers.RepeatedCompositeFieldContainer[ScheduleFiring]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., cron: _Optional[str] = ..., timezone: _Optional[str] = ..., every: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., task: _Optional[_Union[TaskSpec, _Mapping]] = ..., workflow_definition: _Optional[str] = ..., workflow_format: _Optional[_Union[DefinitionFormat, str]] = ..., overlap: _Optional[_Union[ScheduleOverlap, str]] = ..., catchup_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., paused: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_slot: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_fired_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_fired_slot: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_slot: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., buffered_slot: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fired: _Optional[int] = ..., missed: _Optional[int] = ..., skipped: _Optional[int] = ..., active_runs: _Optional[_Iterable[str]] = ..., recent: _Optional[_Iterable[_Union[ScheduleFiring, _Mapping]]] = ...) -> None: ...

class CreateScheduleRequest(_message.Message):
    __slots__ = ("name", "cron", "every", "timezone", "task", "workflow_definition", "workflow_format", "overlap", "catchup_window", "paused")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_DEFINITION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FORMAT_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    name: str
    cron: str
    every: _duration_pb2.Duration
    timezone: str
    task: TaskSpec
    workflow_definition: str
    workflow_format: DefinitionFormat
    overlap: ScheduleOverlap
    catchup_window: _duration_pb2.Duration
    paused: bool
    def __init__(self, name: _Optional[str] = ..., cron: _Optional[str] = ..., every: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., timezone: _Optional[str] = ..., task: _Optional[_Union[TaskSpec, _Mapping]] = ..., workflow_definition: _Optional[str] = ..., workflow_format: _Optional[_Union[DefinitionFormat, str]] = ..., overlap: _Optional[_Union[ScheduleOverlap, str]] = ..., catchup_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., paused: _Optional[bool] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("schedule", "created", "commit_index", "header")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    created: bool
    commit_index: int
    header: ResponseHeader
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., created: _Optional[bool] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("read_options",)
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    read_options: ReadOptions
    def __init__(self, read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "header")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    header: ResponseHeader
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ("schedule", "read_options")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    schedule: str
    read_options: ReadOptions
    def __init__(self, schedule: _Optional[str] = ..., read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ("schedule", "header")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    header: ResponseHeader
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: str
    def __init__(self, schedule: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ("schedule", "commit_index", "header")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    commit_index: int
    header: ResponseHeader
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: str
    def __init__(self, schedule: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ("schedule", "commit_index", "header")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    commit_index: int
    header: ResponseHeader
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: str
    def __init__(self, schedule: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ("schedule", "commit_index", "header")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    commit_index: int
    header: ResponseHeader
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class TriggerScheduleRequest(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: str
    def __init__(self, schedule: _Optional[str] = ...) -> None: ...

class TriggerScheduleResponse(_message.Message):
    __slots__ = ("task_id", "workflow_id", "commit_index", "header")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    workflow_id: str
    commit_index: int
    header: ResponseHeader
    def __init__(self, task_id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class Limit(_message.Message):
    __slots__ = ("key", "max_running", "rate_per_minute", "burst", "running", "queued", "tokens", "update_time")
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    key: str
    max_running: int
    rate_per_minute: int
    burst: int
    running: int
    queued: int
    tokens: float
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[str] = ..., max_running: _Optional[int] = ..., rate_per_minute: _Optional[int] = ..., burst: _Optional[int] = ..., running: _Optional[int] = ..., queued: _Optional[int] = ..., tokens: _Optional[float] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SetLimitRequest(_message.Message):
    __slots__ = ("key", "max_running", "rate_per_minute", "burst")
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    key: str
    max_running: int
    rate_per_minute: int
    burst: int
    def __init__(self, key: _Optional[str] = ..., max_running: _Optional[int] = ..., rate_per_minute: _Optional[int] = ..., burst: _Optional[int] = ...) -> None: ...

class SetLimitResponse(_message.Message):
    __slots__ = ("limit", "commit_index", "header")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    limit: Limit
    commit_index: int
    header: ResponseHeader
    def __init__(self, limit: _Optional[_Union[Limit, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class ListLimitsRequest(_message.Message):
    __slots__ = ("read_options",)
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    read_options: ReadOptions
    def __init__(self, read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class ListLimitsResponse(_message.Message):
    __slots__ = ("limits", "header")
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[Limit]
    header: ResponseHeader
    def __init__(self, limits: _Optional[_Iterable[_Union[Limit, _Mapping]]] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class DeleteLimitRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class DeleteLimitResponse(_message.Message):
    __slots__ = ("limit", "commit_index", "header")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    limit: Limit
    commit_index: int
    header: ResponseHeader
    def __init__(self, limit: _Optional[_Union[Limit, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class FairnessWeight(_message.Message):
    __slots__ = ("key", "weight", "queued", "active")
    KEY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    key: str
    weight: int
    queued: int
    active: int
    def __init__(self, key: _Optional[str] = ..., weight: _Optional[int] = ..., queued: _Optional[int] = ..., active: _Optional[int] = ...) -> None: ...

class SetFairnessWeightRequest(_message.Message):
    __slots__ = ("key", "weight")
    KEY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    key: str
    weight: int
    def __init__(self, key: _Optional[str] = ..., weight: _Optional[int] = ...) -> None: ...

class SetFairnessWeightResponse(_message.Message):
    __slots__ = ("weight", "commit_index", "header")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    weight: FairnessWeight
    commit_index: int
    header: ResponseHeader
    def __init__(self, weight: _Optional[_Union[FairnessWeight, _Mapping]] = ..., commit_index: _Optional[int] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class ListFairnessWeightsRequest(_message.Message):
    __slots__ = ("read_options",)
    READ_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    read_options: ReadOptions
    def __init__(self, read_options: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class ListFairnessWeightsResponse(_message.Message):
    __slots__ = ("weights", "header")
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    weights: _containers.RepeatedCompositeFieldContainer[FairnessWeight]
    header: ResponseHeader
    def __init__(self, weights: _Optional[_Iterable[_Union[FairnessWeight, _Mapping]]] = ..., header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...
