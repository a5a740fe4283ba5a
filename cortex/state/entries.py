"""Typed Raft log entries. An entry is an envelope (type, schema version, id,
proposer clock, proposer node, trace) around a typed payload. Several entries
travel together as one `Batch`, the unit pysyncobj replicates."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

SCHEMA_VERSION = 1


class EntryDecodeError(ValueError):
    """An entry's bytes or fields do not form a valid entry. Carries the
    entry's id and type when those at least were readable, for the audit row."""

    def __init__(self, message: str, entry_id: str = "", entry_type: str = "INVALID") -> None:
        super().__init__(message)
        self.entry_id = entry_id
        self.entry_type = entry_type


@dataclass(frozen=True)
class Payload:
    TYPE: ClassVar[str] = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Payload:
        try:
            payload = cls(**data)
        except TypeError as err:
            raise EntryDecodeError(f"{cls.TYPE}: {err}") from None
        for f in fields(cls):
            _check_type(cls.TYPE, f.name, getattr(payload, f.name), f.type)
        return payload


# What SQLite can store as an INTEGER.
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1

_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
}


def _check_type(entry_type: str, name: str, value: Any, annotation: Any) -> None:
    """Checks a payload field against its annotation (`str | None`, `int`,
    `dict[str, Any]` ...), so a malformed entry is rejected, not half-applied."""
    options = [part.strip() for part in str(annotation).split("|")]
    if value is None and "None" in options:
        return
    for option in options:
        accepted = _SIMPLE_TYPES.get(option.split("[")[0])
        if accepted is None:
            continue
        if isinstance(value, bool) and accepted == (int,):
            continue
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not _INT_MIN <= value <= _INT_MAX
        ):
            continue
        if isinstance(value, accepted):
            return
    raise EntryDecodeError(f"{entry_type}: field {name} has the wrong type")


@dataclass(frozen=True)
class TaskSubmit(Payload):
    TYPE: ClassVar[str] = "TASK_SUBMIT"
    task_id: str
    spec: dict[str, Any]
    idempotency_key: str | None = None
    workflow_id: str | None = None
    workflow_key: str | None = None


@dataclass(frozen=True)
class Assignment:
    task_id: str
    node: str
    attempt: int


@dataclass(frozen=True)
class TaskAssign(Payload):
    """One scheduling round's placements."""

    TYPE: ClassVar[str] = "TASK_ASSIGN"
    assignments: list[dict[str, Any]]

    def items(self) -> list[Assignment]:
        return [Assignment(**a) for a in self.assignments]


@dataclass(frozen=True)
class TaskStarted(Payload):
    TYPE: ClassVar[str] = "TASK_STARTED"
    task_id: str
    attempt: int
    node: str
    pid: int | None = None


@dataclass(frozen=True)
class TaskComplete(Payload):
    TYPE: ClassVar[str] = "TASK_COMPLETE"
    task_id: str
    attempt: int
    node: str
    result: dict[str, Any]


@dataclass(frozen=True)
class TaskFailed(Payload):
    """A failed attempt; apply decides retry or dead letter from the policy,
    unless the failure is `permanent` (no retry could succeed): then the task
    fails at once."""

    TYPE: ClassVar[str] = "TASK_FAILED"
    task_id: str
    attempt: int
    node: str
    reason: str
    result: dict[str, Any] | None = None
    permanent: bool = False


@dataclass(frozen=True)
class TaskRetry(Payload):
    """Re-queue the current attempt's task (node lost, drain, manual retry)."""

    TYPE: ClassVar[str] = "TASK_RETRY"
    task_id: str
    attempt: int
    reason: str
    delay_ms: int = 0
    spend_attempt: bool = True


@dataclass(frozen=True)
class TaskCancel(Payload):
    TYPE: ClassVar[str] = "TASK_CANCEL"
    task_id: str
    reason: str = "cancelled by request"


@dataclass(frozen=True)
class TaskDeadLetter(Payload):
    TYPE: ClassVar[str] = "TASK_DEAD_LETTER"
    task_id: str
    attempt: int
    reason: str


@dataclass(frozen=True)
class WorkflowSubmit(Payload):
    """A whole DAG, ids chosen by the proposer. `tasks` items, in definition
    order: `{key, task_id, spec, depends_on, condition}`. Tasks without
    dependencies or condition start queued, the rest pending."""

    TYPE: ClassVar[str] = "WORKFLOW_SUBMIT"
    workflow_id: str
    name: str
    tasks: list[dict[str, Any]]
    context: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None


@dataclass(frozen=True)
class WorkflowAdvance(Payload):
    """The leader's decisions for pending tasks whose dependencies are all
    terminal, in order: `{task_id, key, decision: run|skip, reason}`.
    `basis_index` is the applied index the leader decided from (audit)."""

    TYPE: ClassVar[str] = "WORKFLOW_ADVANCE"
    workflow_id: str
    decisions: list[dict[str, Any]]
    basis_index: int = 0


@dataclass(frozen=True)
class WorkflowCancel(Payload):
    TYPE: ClassVar[str] = "WORKFLOW_CANCEL"
    workflow_id: str
    reason: str = "cancelled by request"


@dataclass(frozen=True)
class TasksPurge(Payload):
    """Retention: removes at most `limit` terminal tasks (dead letters never)
    and finished workflows that ended before `before_ms`, with their events,
    plus node-level events older than that. The cutoff comes from the
    proposer's clock."""

    TYPE: ClassVar[str] = "TASKS_PURGE"
    before_ms: int
    limit: int


@dataclass(frozen=True)
class NodeJoin(Payload):
    TYPE: ClassVar[str] = "NODE_JOIN"
    node_id: str
    raft_address: str
    grpc_address: str
    labels: dict[str, str] = field(default_factory=dict)
    executors: list[str] = field(default_factory=list)
    resources: dict[str, Any] = field(default_factory=dict)
    # Where other nodes call this one (its peer listener); empty in entries
    # written before nodes had one.
    peer_address: str = ""


@dataclass(frozen=True)
class NodeStatus(Payload):
    """active / draining (with a deadline for running tasks) / cordoned / offline."""

    TYPE: ClassVar[str] = "NODE_STATUS"
    node_id: str
    status: str
    reason: str = ""
    deadline_ms: int | None = None


@dataclass(frozen=True)
class NodeLeave(Payload):
    """The node is removed from the cluster; its unfinished tasks are re-queued."""

    TYPE: ClassVar[str] = "NODE_LEAVE"
    node_id: str
    reason: str = ""


PAYLOAD_TYPES: dict[str, type[Payload]] = {
    cls.TYPE: cls
    for cls in (
        TaskSubmit,
        TaskAssign,
        TaskStarted,
        TaskComplete,
        TaskFailed,
        TaskRetry,
        TaskCancel,
        TaskDeadLetter,
        WorkflowSubmit,
        WorkflowAdvance,
        WorkflowCancel,
        TasksPurge,
        NodeJoin,
        NodeStatus,
        NodeLeave,
    )
}


@dataclass(frozen=True)
class Entry:
    """The envelope every command travels in."""

    type: str
    id: str
    ts: int
    node: str
    payload: dict[str, Any]
    v: int = SCHEMA_VERSION
    trace: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def create(
        cls, payload: Payload, node: str, parent_span_id: str | None = None, ts: int | None = None
    ) -> Entry:
        """Stamps a payload with the proposer's identity and clock."""
        return cls(
            type=payload.TYPE,
            id=str(uuid.uuid4()),
            ts=int(time.time() * 1000) if ts is None else ts,
            node=node,
            payload=asdict(payload),
            trace={"span_id": uuid.uuid4().hex[:16], "parent_span_id": parent_span_id},
        )

    def decode_payload(self) -> Payload:
        cls = PAYLOAD_TYPES.get(self.type)
        if cls is None:
            raise EntryDecodeError(f"unknown entry type {self.type!r}")
        if not isinstance(self.payload, dict):
            raise EntryDecodeError(f"{self.type}: payload is not an object")
        return cls.from_dict(self.payload)


def _check_envelope(entry: Entry) -> None:
    for name, kinds in (
        ("type", str),
        ("id", str),
        ("node", str),
        ("payload", dict),
        ("trace", dict),
    ):
        if not isinstance(getattr(entry, name), kinds):
            raise EntryDecodeError(f"envelope field {name} has the wrong type")
    for name in ("ts", "v"):
        value = getattr(entry, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT_MAX:
            raise EntryDecodeError(f"envelope field {name} is not a valid integer")


def encode_batch(entries: list[Entry]) -> bytes:
    return json.dumps([asdict(e) for e in entries], separators=(",", ":")).encode()


def decode_batch(data: bytes) -> list[Entry | EntryDecodeError]:
    """Decodes a replicated batch; an undecodable element becomes an error in
    its slot so the rest of the batch still applies."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        return [EntryDecodeError(f"batch is not valid JSON: {type(err).__name__}")]
    if not isinstance(raw, list):
        return [EntryDecodeError("batch is not a list")]
    out: list[Entry | EntryDecodeError] = []
    for item in raw:
        try:
            if not isinstance(item, dict):
                raise EntryDecodeError("entry is not an object")
            entry = Entry(**item)
            _check_envelope(entry)
            out.append(entry)
        except (TypeError, EntryDecodeError) as err:
            raw = item if isinstance(item, dict) else {}
            raw_id, raw_type = raw.get("id"), raw.get("type")
            out.append(
                EntryDecodeError(
                    f"malformed envelope: {err}",
                    raw_id if isinstance(raw_id, str) else "",
                    raw_type if isinstance(raw_type, str) else "INVALID",
                )
            )
    return out
