from cortex.v1 import cortex_pb2 as _cortex_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HeartbeatRequest(_message.Message):
    __slots__ = ("node_id", "resources", "capabilities", "running_tasks", "sent_at_ms", "proof", "boot_id", "seq")
    class CapabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    RUNNING_TASKS_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    resources: _cortex_pb2.NodeResources
    capabilities: _containers.ScalarMap[str, str]
    running_tasks: int
    sent_at_ms: int
    proof: str
    boot_id: str
    seq: int
    def __init__(self, node_id: _Optional[str] = ..., resources: _Optional[_Union[_cortex_pb2.NodeResources, _Mapping]] = ..., capabilities: _Optional[_Mapping[str, str]] = ..., running_tasks: _Optional[int] = ..., sent_at_ms: _Optional[int] = ..., proof: _Optional[str] = ..., boot_id: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RelayTaskOutputRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _cortex_pb2.StreamTaskOutputRequest
    def __init__(self, request: _Optional[_Union[_cortex_pb2.StreamTaskOutputRequest, _Mapping]] = ...) -> None: ...

class RelayTaskOutputResponse(_message.Message):
    __slots__ = ("chunk",)
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    chunk: _cortex_pb2.StreamTaskOutputResponse
    def __init__(self, chunk: _Optional[_Union[_cortex_pb2.StreamTaskOutputResponse, _Mapping]] = ...) -> None: ...

class GetAppliedIndexRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAppliedIndexResponse(_message.Message):
    __slots__ = ("applied_index",)
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    def __init__(self, applied_index: _Optional[int] = ...) -> None: ...

class GetNodeStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNodeStateResponse(_message.Message):
    __slots__ = ("applied_index", "state_digest", "commit_index", "term", "raft_state")
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    RAFT_STATE_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    state_digest: str
    commit_index: int
    term: int
    raft_state: str
    def __init__(self, applied_index: _Optional[int] = ..., state_digest: _Optional[str] = ..., commit_index: _Optional[int] = ..., term: _Optional[int] = ..., raft_state: _Optional[str] = ...) -> None: ...

class ReadIndexRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReadIndexResponse(_message.Message):
    __slots__ = ("read_index",)
    READ_INDEX_FIELD_NUMBER: _ClassVar[int]
    read_index: int
    def __init__(self, read_index: _Optional[int] = ...) -> None: ...

class PassRemovalRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _cortex_pb2.RemoveNodeRequest
    def __init__(self, request: _Optional[_Union[_cortex_pb2.RemoveNodeRequest, _Mapping]] = ...) -> None: ...

class PassRemovalResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _cortex_pb2.RemoveNodeResponse
    def __init__(self, response: _Optional[_Union[_cortex_pb2.RemoveNodeResponse, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("node_id", "raft_address", "grpc_address", "proof", "peer_address", "nonce", "role")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft_address: str
    grpc_address: str
    proof: str
    peer_address: str
    nonce: str
    role: _cortex_pb2.NodeRole
    def __init__(self, node_id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., proof: _Optional[str] = ..., peer_address: _Optional[str] = ..., nonce: _Optional[str] = ..., role: _Optional[_Union[_cortex_pb2.NodeRole, str]] = ...) -> None: ...

class JoinClusterResponse(_message.Message):
    __slots__ = ("raft_members", "leader")
    RAFT_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    raft_members: _containers.RepeatedScalarFieldContainer[str]
    leader: str
    def __init__(self, raft_members: _Optional[_Iterable[str]] = ..., leader: _Optional[str] = ...) -> None: ...
