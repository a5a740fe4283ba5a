from cortex.v1 import cortex_pb2 as _cortex_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
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

class AppliedIndexRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AppliedIndexResponse(_message.Message):
    __slots__ = ("applied_index",)
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    def __init__(self, applied_index: _Optional[int] = ...) -> None: ...
