from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetryPolicy(_message.Message):
    __slots__ = ("max_retries", "backoff_ms", "backoff_multiplier", "retryable")
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    max_retries: int
    backoff_ms: int
    backoff_multiplier: float
    retryable: bool
    def __init__(self, max_retries: _Optional[int] = ..., backoff_ms: _Optional[int] = ..., backoff_multiplier: _Optional[float] = ..., retryable: _Optional[bool] = ...) -> None: ...

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
    __slots__ = ("type", "command", "shell", "env", "cwd", "timeout_ms", "priority", "constraints", "retry_policy", "labels", "options_json")
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
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    type: str
    command: _containers.RepeatedScalarFieldContainer[str]
    shell: str
    env: _containers.ScalarMap[str, str]
    cwd: str
    timeout_ms: int
    priority: int
    constraints: Constraints
    retry_policy: RetryPolicy
    labels: _containers.ScalarMap[str, str]
    options_json: str
    def __init__(self, type: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., shell: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., cwd: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., priority: _Optional[int] = ..., constraints: _Optional[_Union[Constraints, _Mapping]] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., options_json: _Optional[str] = ...) -> None: ...

class SubmitTaskRequest(_message.Message):
    __slots__ = ("spec", "idempotency_key")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    spec: TaskSpec
    idempotency_key: str
    def __init__(self, spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTaskResponse(_message.Message):
    __slots__ = ("task_id", "created", "raft_index")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RAFT_INDEX_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    created: bool
    raft_index: int
    def __init__(self, task_id: _Optional[str] = ..., created: _Optional[bool] = ..., raft_index: _Optional[int] = ...) -> None: ...

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

class TaskEvent(_message.Message):
    __slots__ = ("seq", "event", "from_state", "to_state", "node", "attempt", "detail_json", "ts_ms", "raft_index")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    FROM_STATE_FIELD_NUMBER: _ClassVar[int]
    TO_STATE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_JSON_FIELD_NUMBER: _ClassVar[int]
    TS_MS_FIELD_NUMBER: _ClassVar[int]
    RAFT_INDEX_FIELD_NUMBER: _ClassVar[int]
    seq: int
    event: str
    from_state: str
    to_state: str
    node: str
    attempt: int
    detail_json: str
    ts_ms: int
    raft_index: int
    def __init__(self, seq: _Optional[int] = ..., event: _Optional[str] = ..., from_state: _Optional[str] = ..., to_state: _Optional[str] = ..., node: _Optional[str] = ..., attempt: _Optional[int] = ..., detail_json: _Optional[str] = ..., ts_ms: _Optional[int] = ..., raft_index: _Optional[int] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "state", "type", "attempt", "node", "priority", "spec", "result", "has_result", "idempotency_key", "workflow_id", "workflow_key", "error", "created_at_ms", "updated_at_ms", "scheduled_after_ms", "pending_reasons", "events")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    HAS_RESULT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_KEY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASONS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: str
    type: str
    attempt: int
    node: str
    priority: int
    spec: TaskSpec
    result: TaskResult
    has_result: bool
    idempotency_key: str
    workflow_id: str
    workflow_key: str
    error: str
    created_at_ms: int
    updated_at_ms: int
    scheduled_after_ms: int
    pending_reasons: _containers.RepeatedScalarFieldContainer[str]
    events: _containers.RepeatedCompositeFieldContainer[TaskEvent]
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ..., type: _Optional[str] = ..., attempt: _Optional[int] = ..., node: _Optional[str] = ..., priority: _Optional[int] = ..., spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ..., has_result: _Optional[bool] = ..., idempotency_key: _Optional[str] = ..., workflow_id: _Optional[str] = ..., workflow_key: _Optional[str] = ..., error: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., scheduled_after_ms: _Optional[int] = ..., pending_reasons: _Optional[_Iterable[str]] = ..., events: _Optional[_Iterable[_Union[TaskEvent, _Mapping]]] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("task_id", "include_events")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    include_events: bool
    def __init__(self, task_id: _Optional[str] = ..., include_events: _Optional[bool] = ...) -> None: ...

class GetTaskResultRequest(_message.Message):
    __slots__ = ("task_id", "wait", "timeout_ms")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    wait: bool
    timeout_ms: int
    def __init__(self, task_id: _Optional[str] = ..., wait: _Optional[bool] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("states", "type", "workflow_id", "node", "page_size", "page_token")
    STATES_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[str]
    type: str
    workflow_id: str
    node: str
    page_size: int
    page_token: str
    def __init__(self, states: _Optional[_Iterable[str]] = ..., type: _Optional[str] = ..., workflow_id: _Optional[str] = ..., node: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token", "total")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    next_page_token: str
    total: int
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class CancelTaskRequest(_message.Message):
    __slots__ = ("task_id", "reason")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    reason: str
    def __init__(self, task_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

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

class NodeInfo(_message.Message):
    __slots__ = ("node_id", "raft_address", "grpc_address", "status", "connected", "is_leader", "running_tasks", "labels", "executors", "resources", "has_resources", "report_age_ms", "capabilities", "max_tasks", "status_reason", "drain_deadline_ms", "peer_address")
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
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    RUNNING_TASKS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    HAS_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    REPORT_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    DRAIN_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft_address: str
    grpc_address: str
    status: str
    connected: bool
    is_leader: bool
    running_tasks: int
    labels: _containers.ScalarMap[str, str]
    executors: _containers.RepeatedScalarFieldContainer[str]
    resources: NodeResources
    has_resources: bool
    report_age_ms: int
    capabilities: _containers.ScalarMap[str, str]
    max_tasks: int
    status_reason: str
    drain_deadline_ms: int
    peer_address: str
    def __init__(self, node_id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., status: _Optional[str] = ..., connected: _Optional[bool] = ..., is_leader: _Optional[bool] = ..., running_tasks: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., executors: _Optional[_Iterable[str]] = ..., resources: _Optional[_Union[NodeResources, _Mapping]] = ..., has_resources: _Optional[bool] = ..., report_age_ms: _Optional[int] = ..., capabilities: _Optional[_Mapping[str, str]] = ..., max_tasks: _Optional[int] = ..., status_reason: _Optional[str] = ..., drain_deadline_ms: _Optional[int] = ..., peer_address: _Optional[str] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ("include_removed",)
    INCLUDE_REMOVED_FIELD_NUMBER: _ClassVar[int]
    include_removed: bool
    def __init__(self, include_removed: _Optional[bool] = ...) -> None: ...

class ListDeadLetterTasksRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class RetryDeadLetterTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ("node_id", "deadline_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    deadline_ms: int
    def __init__(self, node_id: _Optional[str] = ..., deadline_ms: _Optional[int] = ...) -> None: ...

class NodeRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class RemoveNodeRequest(_message.Message):
    __slots__ = ("node_id", "reason")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    reason: str
    def __init__(self, node_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RemoveNodeResponse(_message.Message):
    __slots__ = ("node_id", "raft_address", "requeued_tasks", "members")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REQUEUED_TASKS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft_address: str
    requeued_tasks: int
    members: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_id: _Optional[str] = ..., raft_address: _Optional[str] = ..., requeued_tasks: _Optional[int] = ..., members: _Optional[_Iterable[str]] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ...) -> None: ...

class ClusterStatusResponse(_message.Message):
    __slots__ = ("node_id", "leader", "leader_node_id", "term", "last_applied", "commit_index", "state_digest", "has_quorum", "raft_state", "nodes", "task_counts", "log_size", "applied_index", "raft_sync", "journal_syncs", "journal_synced_entries")
    class TaskCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LAST_APPLIED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    HAS_QUORUM_FIELD_NUMBER: _ClassVar[int]
    RAFT_STATE_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNTS_FIELD_NUMBER: _ClassVar[int]
    LOG_SIZE_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    RAFT_SYNC_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNCS_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNCED_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    leader: str
    leader_node_id: str
    term: int
    last_applied: int
    commit_index: int
    state_digest: str
    has_quorum: bool
    raft_state: str
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    task_counts: _containers.ScalarMap[str, int]
    log_size: int
    applied_index: int
    raft_sync: bool
    journal_syncs: int
    journal_synced_entries: int
    def __init__(self, node_id: _Optional[str] = ..., leader: _Optional[str] = ..., leader_node_id: _Optional[str] = ..., term: _Optional[int] = ..., last_applied: _Optional[int] = ..., commit_index: _Optional[int] = ..., state_digest: _Optional[str] = ..., has_quorum: _Optional[bool] = ..., raft_state: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., task_counts: _Optional[_Mapping[str, int]] = ..., log_size: _Optional[int] = ..., applied_index: _Optional[int] = ..., raft_sync: _Optional[bool] = ..., journal_syncs: _Optional[int] = ..., journal_synced_entries: _Optional[int] = ...) -> None: ...

class JoinChallengeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JoinChallengeResponse(_message.Message):
    __slots__ = ("nonce", "ttl_ms")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    nonce: str
    ttl_ms: int
    def __init__(self, nonce: _Optional[str] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class JoinClusterRequest(_message.Message):
    __slots__ = ("node_id", "raft_address", "grpc_address", "proof", "peer_address", "nonce")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft_address: str
    grpc_address: str
    proof: str
    peer_address: str
    nonce: str
    def __init__(self, node_id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., proof: _Optional[str] = ..., peer_address: _Optional[str] = ..., nonce: _Optional[str] = ...) -> None: ...

class JoinClusterResponse(_message.Message):
    __slots__ = ("raft_members", "leader")
    RAFT_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    raft_members: _containers.RepeatedScalarFieldContainer[str]
    leader: str
    def __init__(self, raft_members: _Optional[_Iterable[str]] = ..., leader: _Optional[str] = ...) -> None: ...

class SubmitWorkflowRequest(_message.Message):
    __slots__ = ("definition", "format", "idempotency_key")
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    definition: str
    format: str
    idempotency_key: str
    def __init__(self, definition: _Optional[str] = ..., format: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitWorkflowResponse(_message.Message):
    __slots__ = ("workflow_id", "created")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    created: bool
    def __init__(self, workflow_id: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class WorkflowTask(_message.Message):
    __slots__ = ("key", "task_id", "type", "state", "attempt", "node", "depends_on", "condition", "skip_reason", "started_at_ms", "finished_at_ms", "has_result", "exit_code")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    SKIP_REASON_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    HAS_RESULT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    key: str
    task_id: str
    type: str
    state: str
    attempt: int
    node: str
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    condition: str
    skip_reason: str
    started_at_ms: int
    finished_at_ms: int
    has_result: bool
    exit_code: int
    def __init__(self, key: _Optional[str] = ..., task_id: _Optional[str] = ..., type: _Optional[str] = ..., state: _Optional[str] = ..., attempt: _Optional[int] = ..., node: _Optional[str] = ..., depends_on: _Optional[_Iterable[str]] = ..., condition: _Optional[str] = ..., skip_reason: _Optional[str] = ..., started_at_ms: _Optional[int] = ..., finished_at_ms: _Optional[int] = ..., has_result: _Optional[bool] = ..., exit_code: _Optional[int] = ...) -> None: ...

class Workflow(_message.Message):
    __slots__ = ("id", "name", "state", "context_json", "tasks", "created_at_ms", "completed_at_ms", "error", "task_counts")
    class TaskCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    state: str
    context_json: str
    tasks: _containers.RepeatedCompositeFieldContainer[WorkflowTask]
    created_at_ms: int
    completed_at_ms: int
    error: str
    task_counts: _containers.ScalarMap[str, int]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[str] = ..., context_json: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[WorkflowTask, _Mapping]]] = ..., created_at_ms: _Optional[int] = ..., completed_at_ms: _Optional[int] = ..., error: _Optional[str] = ..., task_counts: _Optional[_Mapping[str, int]] = ...) -> None: ...

class GetWorkflowStatusRequest(_message.Message):
    __slots__ = ("workflow_id",)
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    def __init__(self, workflow_id: _Optional[str] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ("states", "page_size", "page_token")
    STATES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    def __init__(self, states: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ("workflows", "next_page_token", "total")
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[Workflow]
    next_page_token: str
    total: int
    def __init__(self, workflows: _Optional[_Iterable[_Union[Workflow, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class CancelWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "reason")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    reason: str
    def __init__(self, workflow_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class StreamTaskOutputRequest(_message.Message):
    __slots__ = ("task_id", "attempt", "from_offset", "follow", "stream")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    attempt: int
    from_offset: int
    follow: bool
    stream: str
    def __init__(self, task_id: _Optional[str] = ..., attempt: _Optional[int] = ..., from_offset: _Optional[int] = ..., follow: _Optional[bool] = ..., stream: _Optional[str] = ...) -> None: ...

class OutputData(_message.Message):
    __slots__ = ("stream", "offset", "data", "ts_ms")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TS_MS_FIELD_NUMBER: _ClassVar[int]
    stream: str
    offset: int
    data: bytes
    ts_ms: int
    def __init__(self, stream: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., ts_ms: _Optional[int] = ...) -> None: ...

class OutputEnd(_message.Message):
    __slots__ = ("attempt", "state", "exit_code", "error", "total_bytes", "interrupted")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    state: str
    exit_code: int
    error: str
    total_bytes: int
    interrupted: bool
    def __init__(self, attempt: _Optional[int] = ..., state: _Optional[str] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ..., total_bytes: _Optional[int] = ..., interrupted: _Optional[bool] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("attempt", "data", "end")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    data: OutputData
    end: OutputEnd
    def __init__(self, attempt: _Optional[int] = ..., data: _Optional[_Union[OutputData, _Mapping]] = ..., end: _Optional[_Union[OutputEnd, _Mapping]] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("task_id", "workflow_id", "events", "after_seq", "from_start", "follow")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    FROM_START_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    workflow_id: str
    events: _containers.RepeatedScalarFieldContainer[str]
    after_seq: int
    from_start: bool
    follow: bool
    def __init__(self, task_id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., events: _Optional[_Iterable[str]] = ..., after_seq: _Optional[int] = ..., from_start: _Optional[bool] = ..., follow: _Optional[bool] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "event", "task_id", "workflow_id", "from_state", "to_state", "node", "attempt", "detail_json", "ts_ms", "raft_index", "entry_type")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_STATE_FIELD_NUMBER: _ClassVar[int]
    TO_STATE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_JSON_FIELD_NUMBER: _ClassVar[int]
    TS_MS_FIELD_NUMBER: _ClassVar[int]
    RAFT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ENTRY_TYPE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    event: str
    task_id: str
    workflow_id: str
    from_state: str
    to_state: str
    node: str
    attempt: int
    detail_json: str
    ts_ms: int
    raft_index: int
    entry_type: str
    def __init__(self, seq: _Optional[int] = ..., event: _Optional[str] = ..., task_id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., from_state: _Optional[str] = ..., to_state: _Optional[str] = ..., node: _Optional[str] = ..., attempt: _Optional[int] = ..., detail_json: _Optional[str] = ..., ts_ms: _Optional[int] = ..., raft_index: _Optional[int] = ..., entry_type: _Optional[str] = ...) -> None: ...
