"""Typed Raft log entries. An entry is an envelope (type, schema version, id,
proposer clock, proposer node, trace) around a typed payload. Several entries
travel together as one `Batch`, the unit pysyncobj replicates."""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
import time
from dataclasses import MISSING, dataclass, field, fields, replace
from itertools import accumulate
from typing import Any, ClassVar

from cortex.ids import OS_RANDOMNESS, time_local
from cortex.state.backoff import MAX_BACKOFF_MS
from cortex.state.reasons import (
    INVALID_ENTRY,
    INVALID_PAYLOAD,
    ReasonCode,
    Rejected,
    quoted,
)
from cortex.state.schedule_bounds import DEFAULT_CATCHUP_WINDOW_MS
from cortex.state.traceparent import is_stored_form

SCHEMA_VERSION = 1


class EntryDecodeError(Rejected):
    """An entry's bytes or fields do not form a valid entry (`invalid_entry`
    for the batch or envelope, `invalid_payload` for the payload). Carries
    the entry's id and type when those at least were readable, for the audit
    row. Its text is written here from explicit checks of keys and types,
    never from the exception a failed construction would raise."""

    def __init__(
        self, code: ReasonCode, text: str, entry_id: str = "", entry_type: str = "INVALID"
    ) -> None:
        super().__init__(code, text)
        self.entry_id = entry_id
        self.entry_type = entry_type


@dataclass(frozen=True)
class Payload:
    TYPE: ClassVar[str] = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Payload:
        """Checks the keys and each field's type before building the payload,
        so nothing here raises anything but `EntryDecodeError`."""
        if not _plain_fields(data, cls):
            cls._check_fields(data)
        payload = cls(**data)
        payload.check()
        return payload

    @classmethod
    def _check_fields(cls, data: dict[str, Any]) -> None:
        """Raises `EntryDecodeError` naming the first field that is unknown,
        missing or of the wrong type."""
        table = _fields_of(cls)
        unknown = sorted(str(key) for key in data if key not in table)
        if unknown:
            raise EntryDecodeError(
                INVALID_PAYLOAD, f"{cls.TYPE}: unknown field {quoted(unknown[0])}"
            )
        for name, (annotation, required) in table.items():
            if name in data:
                _check_type(cls.TYPE, name, data[name], annotation)
            elif required:
                raise EntryDecodeError(INVALID_PAYLOAD, f"{cls.TYPE}: missing field {name}")

    def check(self) -> None:
        """Checks beyond the field types (items of lists, values of maps);
        raises `EntryDecodeError`."""


# What SQLite can store as an INTEGER.
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
# Latest proposer clock (ms) an entry may carry: far beyond any real clock,
# and low enough that the clock plus any delay apply adds still fits SQLite.
MAX_TS_MS = 2**62
# Longest delay (ms) a TASK_RETRY may ask for: the longest back-off.
MAX_RETRY_DELAY_MS = MAX_BACKOFF_MS

_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
}


_FIELD_TABLES: dict[type, dict[str, tuple[str, bool]]] = {}


def _fields_of(cls: type[Any]) -> dict[str, tuple[str, bool]]:
    """A dataclass's fields in order: name -> (annotation, required)."""
    table = _FIELD_TABLES.get(cls)
    if table is None:
        table = _FIELD_TABLES[cls] = {
            f.name: (str(f.type), f.default is MISSING and f.default_factory is MISSING)
            for f in fields(cls)
        }
    return table


_EXACT_TABLES: dict[type, tuple[dict[str, frozenset[type]], frozenset[str]]] = {}


def _exact_fields_of(cls: type[Any]) -> tuple[dict[str, frozenset[type]], frozenset[str]]:
    """A dataclass's fields by name with the exact types of value each
    accepts (`NoneType` among them when it takes None), and the names of its
    required fields."""
    found = _EXACT_TABLES.get(cls)
    if found is None:
        table = _fields_of(cls)
        exact: dict[str, frozenset[type]] = {}
        for name, (annotation, _) in table.items():
            allows_none, options = _accepted_types(annotation)
            kinds = {kind for option in options for kind in option}
            exact[name] = frozenset(kinds | {type(None)} if allows_none else kinds)
        required = frozenset(name for name, (_, needed) in table.items() if needed)
        found = _EXACT_TABLES[cls] = (exact, required)
    return found


def _plain_fields(data: dict[str, Any], cls: type[Any]) -> bool:
    """Whether `data` certainly passes the checks against the fields of the
    dataclass `cls` (`Payload._check_fields`, `_check_record`): known keys
    only, every required one, each value exactly of a type its field takes
    (as decoded JSON always is) and integers in SQLite's range. A quick test
    of the common case; on False the full checks run and name the problem."""
    exact, required = _exact_fields_of(cls)
    if not (data.keys() <= exact.keys() and data.keys() >= required):
        return False
    for name, value in data.items():
        kind = type(value)
        if kind not in exact[name] or (kind is int and not _INT_MIN <= value <= _INT_MAX):
            return False
    return True


@functools.cache
def _accepted_types(annotation: str) -> tuple[bool, tuple[tuple[type, ...], ...]]:
    """What an annotation such as `str | None` or `dict[str, Any]` accepts:
    whether None, and the types of each other option."""
    options = [part.strip() for part in annotation.split("|")]
    simple = [_SIMPLE_TYPES.get(option.split("[")[0]) for option in options]
    return "None" in options, tuple(accepted for accepted in simple if accepted is not None)


def _check_type(entry_type: str, name: str, value: Any, annotation: str) -> None:
    """Checks a payload field against its annotation (`str | None`, `int`,
    `dict[str, Any]` ...), so a malformed entry is rejected, not half-applied."""
    allows_none, options = _accepted_types(annotation)
    if value is None and allows_none:
        return
    for accepted in options:
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
    raise EntryDecodeError(INVALID_PAYLOAD, f"{entry_type}: field {name} has the wrong type")


def _check_record(entry_type: str, where: str, raw: Any, cls: type[Any]) -> None:
    """An item of a payload list that must hold the fields of the dataclass
    `cls` (those without a default at least, and no others), each of its type."""
    if not isinstance(raw, dict):
        raise EntryDecodeError(INVALID_PAYLOAD, f"{entry_type}: {where} is not an object")
    if _plain_fields(raw, cls):
        return
    table = _fields_of(cls)
    unknown = sorted(str(key) for key in raw if key not in table)
    if unknown:
        raise EntryDecodeError(
            INVALID_PAYLOAD, f"{entry_type}: {where} has an unknown field {quoted(unknown[0])}"
        )
    for name, (annotation, required) in table.items():
        if name in raw:
            _check_type(entry_type, f"{where}.{name}", raw[name], annotation)
        elif required:
            raise EntryDecodeError(INVALID_PAYLOAD, f"{entry_type}: {where} has no {name}")


def _check_strings(entry_type: str, name: str, values: Any) -> None:
    if not all(isinstance(value, str) for value in values):
        raise EntryDecodeError(INVALID_PAYLOAD, f"{entry_type}: {name} must hold only strings")


def _check_traceparent(entry_type: str, name: str, value: str | None) -> None:
    if value is not None and not is_stored_form(value):
        raise EntryDecodeError(INVALID_PAYLOAD, f"{entry_type}: {name} is not a traceparent")


@dataclass(frozen=True)
class TaskSubmit(Payload):
    """`traceparent`: the submission's trace context (W3C), kept with the
    task; None in entries written before tasks had one."""

    TYPE: ClassVar[str] = "TASK_SUBMIT"
    task_id: str
    spec: dict[str, Any]
    idempotency_key: str | None = None
    workflow_id: str | None = None
    workflow_key: str | None = None
    traceparent: str | None = None

    def check(self) -> None:
        _check_traceparent(self.TYPE, "traceparent", self.traceparent)


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

    def check(self) -> None:
        for number, raw in enumerate(self.assignments):
            _check_record(self.TYPE, f"assignments[{number}]", raw, Assignment)

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
    """An attempt's success. `started_at` is set when the node reports the
    attempt's start with its outcome instead of in a TASK_STARTED of its own
    (`fold_starts`): apply then records the start first, as that entry would
    have."""

    TYPE: ClassVar[str] = "TASK_COMPLETE"
    task_id: str
    attempt: int
    node: str
    result: dict[str, Any]
    started_at: int | None = None

    def check(self) -> None:
        _check_started_at(self.TYPE, self.started_at)


def _check_started_at(entry_type: str, started_at: int | None) -> None:
    if started_at is not None and not 0 <= started_at <= MAX_TS_MS:
        raise EntryDecodeError(INVALID_PAYLOAD, f"{entry_type}: started_at is out of range")


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
    # As TASK_COMPLETE's.
    started_at: int | None = None

    def check(self) -> None:
        _check_started_at(self.TYPE, self.started_at)


@dataclass(frozen=True)
class TaskRetry(Payload):
    """Re-queue the current attempt's task (node lost, drain, manual retry)."""

    TYPE: ClassVar[str] = "TASK_RETRY"
    task_id: str
    attempt: int
    reason: str
    delay_ms: int = 0
    spend_attempt: bool = True

    def check(self) -> None:
        if not 0 <= self.delay_ms <= MAX_RETRY_DELAY_MS:
            raise EntryDecodeError(
                INVALID_PAYLOAD,
                f"{self.TYPE}: delay_ms {self.delay_ms} is not between 0 and {MAX_RETRY_DELAY_MS}",
            )


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
    """A DAG, ids chosen by the proposer. `tasks` items: `{key, task_id,
    spec, depends_on, condition, pos}` (`pos`: the task's place in the
    definition). Tasks without dependencies or condition start queued, the
    rest pending. A workflow of more than `tasks` (`total_tasks` larger) is
    `submitting` until WORKFLOW_TASKS entries bring the rest; nothing of it
    runs before, so no single entry has to carry (and apply) all of it.
    `definition_digest` identifies the whole definition: a later submit
    under the same idempotency key must carry the same one (empty in
    entries written before digests: not compared). `traceparent` is the
    submission's trace context, `run_traceparent` the context of the
    workflow's run, a child of it, which all its tasks (of every part) keep
    (both None in entries written before workflows had them)."""

    TYPE: ClassVar[str] = "WORKFLOW_SUBMIT"
    workflow_id: str
    name: str
    tasks: list[dict[str, Any]]
    context: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    total_tasks: int = 0
    definition_digest: str = ""
    traceparent: str | None = None
    run_traceparent: str | None = None

    def check(self) -> None:
        _check_traceparent(self.TYPE, "traceparent", self.traceparent)
        _check_traceparent(self.TYPE, "run_traceparent", self.run_traceparent)


@dataclass(frozen=True)
class WorkflowTasks(Payload):
    """Part `part` (1, 2, ...) of a workflow submitted in parts, after its
    WORKFLOW_SUBMIT (part 0). A task may depend only on tasks of earlier parts
    or of its own. The part that brings the last task starts the workflow; a
    part applied again is a no-op."""

    TYPE: ClassVar[str] = "WORKFLOW_TASKS"
    workflow_id: str
    part: int
    tasks: list[dict[str, Any]]


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
    # The Raft index of the removal this join undoes (a machine coming back
    # with an empty data dir), 0 for none: a join proposed before the node
    # knew of its removal must not bring it back.
    rejoin_after: int = 0
    # "voter", or "observer": replicates the log without a vote, runs no
    # tasks and has no Raft address. Entries from before observers are voters.
    role: str = "voter"

    def check(self) -> None:
        _check_strings(self.TYPE, "labels", self.labels.values())
        _check_strings(self.TYPE, "executors", self.executors)


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


@dataclass(frozen=True)
class ReadBarrier(Payload):
    """Changes nothing: its commit shows that the leader that proposed it still
    led with a quorum, and every entry before it is committed (a linearizable
    read waits until its node applied this far)."""

    TYPE: ClassVar[str] = "READ_BARRIER"


@dataclass(frozen=True)
class LimitSet(Payload):
    """A concurrency key's limits, replacing any it had: at most
    `max_running` of its tasks assigned or running (0: no such limit), and
    starts no faster than `rate_per_min` per minute with bursts of `burst`
    (0: no rate). The token bucket carries over (capped at the new burst)."""

    TYPE: ClassVar[str] = "LIMIT_SET"
    key: str
    max_running: int = 0
    rate_per_min: int = 0
    burst: int = 1


@dataclass(frozen=True)
class LimitDelete(Payload):
    TYPE: ClassVar[str] = "LIMIT_DELETE"
    key: str


@dataclass(frozen=True)
class WeightSet(Payload):
    """A fairness key's weight (1 is every key's default: setting 1 forgets
    the key)."""

    TYPE: ClassVar[str] = "WEIGHT_SET"
    key: str
    weight: int


@dataclass(frozen=True)
class ScheduleCreate(Payload):
    """A schedule, ids chosen by the proposer. `timing`: `{cron, timezone}`
    or `{every_ms}`. `target`: `{"task": spec}` (canonical task spec) or
    `{"workflow": definition text, "format": "yaml"|"json"}`. Slots count
    from the entry's time."""

    TYPE: ClassVar[str] = "SCHEDULE_CREATE"
    schedule_id: str
    name: str
    timing: dict[str, Any]
    target: dict[str, Any]
    overlap: str = "skip"
    catchup_window_ms: int = DEFAULT_CATCHUP_WINDOW_MS
    paused: bool = False


@dataclass(frozen=True)
class SchedulePause(Payload):
    """Pauses or resumes a schedule. A resumed schedule fires from the
    entry's time on: slots that fell in the pause are neither fired nor
    missed."""

    TYPE: ClassVar[str] = "SCHEDULE_PAUSE"
    schedule_id: str
    paused: bool


@dataclass(frozen=True)
class ScheduleDelete(Payload):
    """Removes a schedule and its firing history; tasks it started stay."""

    TYPE: ClassVar[str] = "SCHEDULE_DELETE"
    schedule_id: str


@dataclass(frozen=True)
class SlotDecision:
    """One decision of a SCHEDULE_FIRE. `action`: fire, missed, skipped,
    buffered, or trigger (a run asked for by hand, outside the slots).
    `count` slots from `first_slot_ms` to `slot_ms` (missed slots of an
    outage travel as one). A firing names its run: `task_id` (with the task
    spec in `spec`) or `workflow` (a WORKFLOW_SUBMIT payload). `cancel`: runs
    of earlier firings to cancel (`cancel_previous`)."""

    slot_ms: int
    action: str
    reason: str = ""
    count: int = 1
    first_slot_ms: int = 0
    task_id: str | None = None
    spec: dict[str, Any] | None = None
    workflow: dict[str, Any] | None = None
    cancel: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScheduleFire(Payload):
    """The leader's decisions for a schedule's due slots, oldest first. A
    slot at or before the newest one decided (other than a buffered one
    firing) was decided already, by this leader or an earlier one, and is
    left alone, so a decision proposed twice applies once."""

    TYPE: ClassVar[str] = "SCHEDULE_FIRE"
    schedule_id: str
    decisions: list[dict[str, Any]]

    def check(self) -> None:
        for number, raw in enumerate(self.decisions):
            _check_record(self.TYPE, f"decisions[{number}]", raw, SlotDecision)
            _check_strings(self.TYPE, f"decisions[{number}].cancel", raw.get("cancel", []))

    def items(self) -> list[SlotDecision]:
        return [SlotDecision(**raw) for raw in self.decisions]


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
        WorkflowTasks,
        WorkflowAdvance,
        WorkflowCancel,
        TasksPurge,
        NodeJoin,
        NodeStatus,
        NodeLeave,
        ReadBarrier,
        LimitSet,
        LimitDelete,
        WeightSet,
        ScheduleCreate,
        SchedulePause,
        ScheduleDelete,
        ScheduleFire,
    )
}


# Where entries' and new ids' randomness comes from (a simulation seeds it).
randomness = OS_RANDOMNESS


def new_id() -> str:
    """A fresh id for something an entry creates (a task, a workflow): ids made
    close in time sit close together in an index (`cortex.ids`). Made from the
    clock and randomness entries are stamped with (a simulation seeds both)."""
    return str(time_local(time.time(), randomness.uuid4().int))


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
        """Stamps a payload with the proposer's identity and clock. The span id
        is the id's last 64 random bits (one random draw per entry)."""
        unique = randomness.uuid4()
        return cls(
            type=payload.TYPE,
            id=str(unique),
            ts=int(time.time() * 1000) if ts is None else ts,
            node=node,
            payload=as_dict(payload),
            trace={"span_id": unique.hex[16:], "parent_span_id": parent_span_id},
        )

    def decode_payload(self) -> Payload:
        cls = PAYLOAD_TYPES.get(self.type)
        if cls is None:
            raise EntryDecodeError(INVALID_ENTRY, f"unknown entry type {quoted(self.type)}")
        if not isinstance(self.payload, dict):
            raise EntryDecodeError(INVALID_PAYLOAD, f"{self.type}: payload is not an object")
        return cls.from_dict(self.payload)


_ENVELOPE_TYPES: dict[str, type] = {
    "type": str,
    "id": str,
    "ts": int,
    "node": str,
    "payload": dict,
    "v": int,
    "trace": dict,
}
_ENVELOPE_MAX = {"ts": MAX_TS_MS, "v": _INT_MAX}
_ENVELOPE_REQUIRED = ("type", "id", "ts", "node", "payload")
_ENVELOPE_REQUIRED_KEYS = frozenset(_ENVELOPE_REQUIRED)


def _plain_envelope(raw: dict[str, Any]) -> bool:
    """Whether an envelope certainly passes `_check_envelope`: known keys
    only, every required one, each value exactly of its type and integers in
    range. A quick test of the common case."""
    if not (raw.keys() <= _ENVELOPE_TYPES.keys() and raw.keys() >= _ENVELOPE_REQUIRED_KEYS):
        return False
    for name, value in raw.items():
        kind = type(value)
        if kind is not _ENVELOPE_TYPES[name] or (
            kind is int and not 0 <= value <= _ENVELOPE_MAX[name]
        ):
            return False
    return True


def _entry_from(raw: Any) -> Entry:
    """An envelope from decoded JSON, its keys and types checked one by one."""
    if type(raw) is not dict or not _plain_envelope(raw):
        _check_envelope(raw)
    return Entry(**raw)


def _check_envelope(raw: Any) -> None:
    """Raises `EntryDecodeError` naming the first thing wrong with an envelope."""
    if not isinstance(raw, dict):
        raise EntryDecodeError(INVALID_ENTRY, "entry is not an object")
    unknown = sorted(str(key) for key in raw if key not in _ENVELOPE_TYPES)
    if unknown:
        raise EntryDecodeError(INVALID_ENTRY, f"envelope has an unknown field {quoted(unknown[0])}")
    for name in _ENVELOPE_REQUIRED:
        if name not in raw:
            raise EntryDecodeError(INVALID_ENTRY, f"envelope has no {name}")
    for name, kind in _ENVELOPE_TYPES.items():
        if name not in raw:
            continue
        value = raw[name]
        if kind is int:
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 <= value <= _ENVELOPE_MAX[name]
            ):
                raise EntryDecodeError(
                    INVALID_ENTRY, f"envelope field {name} is not a valid integer"
                )
        elif not isinstance(value, kind):
            raise EntryDecodeError(INVALID_ENTRY, f"envelope field {name} has the wrong type")


_OUTCOME_TYPES = frozenset({TaskComplete.TYPE, TaskFailed.TYPE})
# Entries that change no task but the ones they name: a start may move past
# them to its outcome when they name other tasks. Any other entry (a failure
# that may end a workflow, a cancel, a node's removal ...) stops the fold.
_NAMING_TYPES = frozenset({TaskStarted.TYPE, TaskComplete.TYPE, TaskSubmit.TYPE})


def _named_tasks(entry: Entry) -> list[str] | None:
    """The tasks an entry changes when it changes no other, or None."""
    payload = entry.payload
    if entry.type in _NAMING_TYPES:
        named = [payload.get("task_id")]
    elif entry.type == TaskAssign.TYPE and isinstance(payload.get("assignments"), list):
        named = [
            item.get("task_id") if isinstance(item, dict) else None
            for item in payload["assignments"]
        ]
    else:
        return None
    ids = [task_id for task_id in named if isinstance(task_id, str)]
    return ids if len(ids) == len(named) else None


def _attempt_of(entry: Entry) -> tuple[str, int, str] | None:
    """The attempt a report is about, when its fields are of their types and
    it comes from the node it names."""
    payload = entry.payload
    task_id, attempt = payload.get("task_id"), payload.get("attempt")
    if isinstance(task_id, str) and type(attempt) is int and payload.get("node") == entry.node:
        return task_id, attempt, entry.node
    return None


def fold_starts(entries: list[Entry]) -> tuple[list[Entry], list[int]]:
    """Folds each TASK_STARTED into its attempt's outcome (TASK_COMPLETE or
    TASK_FAILED from the same node) later in the same batch: the outcome
    carries the start's time as `started_at`, and apply records the start
    from it as the TASK_STARTED would have, in one task update instead of
    two. A quick attempt's start and end often leave together, and this
    saves every node one entry. A start moves only past entries that change
    other tasks alone, so it applies in the order it was proposed in.
    Returns the entries to propose and, for each entry given, the position
    of the one that now carries it."""
    unchanged = entries, list(range(len(entries)))
    if not any(entry.type == TaskStarted.TYPE for entry in entries):
        return unchanged
    starts: dict[tuple[str, int, str], int] = {}
    naming: dict[str, list[int]] = {}
    walls = []
    for position, entry in enumerate(entries):
        payload = entry.payload
        named = _named_tasks(entry)
        walls.append(named is None)
        for task_id in named or ():
            naming.setdefault(task_id, []).append(position)
        attempt = _attempt_of(entry) if entry.type == TaskStarted.TYPE else None
        if attempt is not None and payload.get("pid") is None:
            starts[attempt] = position
    walls_before = [0, *accumulate(walls)]
    folded: dict[int, int] = {}
    replaced: dict[int, Entry] = {}
    for position, entry in enumerate(entries):
        payload = entry.payload
        if entry.type not in _OUTCOME_TYPES or payload.get("started_at") is not None:
            continue
        key = _attempt_of(entry)
        start = starts.get(key) if key is not None else None
        if key is None or start is None or start > position:
            continue
        mentions = naming.get(key[0], [])
        between = bisect.bisect_right(mentions, start) < bisect.bisect_left(mentions, position)
        if between or walls_before[position] > walls_before[start + 1]:
            continue
        del starts[key]
        folded[start] = position
        replaced[position] = replace(entry, payload={**payload, "started_at": entries[start].ts})
    if not folded:
        return unchanged
    kept: list[Entry] = []
    where: dict[int, int] = {}
    for position, entry in enumerate(entries):
        if position in folded:
            continue
        where[position] = len(kept)
        kept.append(replaced.get(position, entry))
    return kept, [where[folded.get(position, position)] for position in range(len(entries))]


def encode_batch(entries: list[Entry]) -> bytes:
    return json.dumps([as_dict(e) for e in entries], separators=(",", ":")).encode()


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def as_dict(obj: Any) -> dict[str, Any]:
    """A payload's or envelope's fields by name. Their values are JSON data
    already (no nested dataclasses), so unlike `dataclasses.asdict` nothing
    is copied: encoding a large workflow costs one pass, not two."""
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = _FIELD_NAMES[type(obj)] = tuple(f.name for f in fields(obj))
    return {name: getattr(obj, name) for name in names}


# What `json` decodes depends on the Python version and settings: how deep
# it can nest (recursion limits) and how many digits an integer may have
# (`sys.set_int_max_str_digits`, 640 at the least). A batch beyond these
# limits, far inside what any supported Python takes, is refused before
# decoding, the same way on every node.
MAX_NESTING = 512
MAX_NUMBER_DIGITS = 256
# A string, or an unterminated one up to the end: possessive, so every quote
# starts a match that succeeds and the scan stays linear on hostile bytes.
_JSON_STRING = re.compile(rb'"[^"\\]*+(?:\\(?:.|\Z)[^"\\]*+)*+(?:"|\Z)', re.DOTALL)
# Outside strings, each byte as a number's shape: every digit a 0, `E` an
# `e` and `-` a `+`. Run-of-digits and exponent tests then become substring
# searches, several times faster than the patterns they stand for.
_NUMBER_SHAPE = bytes.maketrans(b"123456789E-", b"000000000e+")
# A number of more than MAX_NUMBER_DIGITS digits: `[0-9]{257}`.
_LONG_NUMBER = b"0" * (MAX_NUMBER_DIGITS + 1)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEP = [1 if byte in b"[{" else -1 for byte in range(256)]


def _outside_strings(data: bytes) -> bytes:
    """`data` without its JSON strings. Without a backslash a string is just
    what lies between two quotes, and splitting on quotes removes exactly
    what the string pattern would, several times faster."""
    if b"\\" in data:
        return _JSON_STRING.sub(b"", data)
    return b"".join(data.split(b'"')[::2])


def batch_nesting(data: bytes) -> int:
    """How deep arrays and objects nest in `data`, counted on the bytes
    (brackets inside strings aside), without decoding them."""
    return _nesting(_outside_strings(data))


def _nesting(outside_strings: bytes) -> int:
    brackets = outside_strings.translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=0))


# An escaped UTF-16 surrogate, the only way an ASCII batch spells one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _strings_plain(data: bytes) -> bool:
    """Whether no string of the batch can hold a lone surrogate, for certain:
    all ASCII, and no escape of one (conservative, as `plain` is)."""
    return data.isascii() and (b"\\" not in data or _SURROGATE_ESCAPE.search(data) is None)


def _beyond_limits(data: bytes) -> tuple[str | None, bool]:
    """What puts the batch beyond the decoder's limits, or None; and whether
    every value in it is plain JSON for certain (no number that decodes to
    NaN or infinity, no lone surrogate), so apply can skip looking for them
    value by value. The second is conservative: False only means "look"."""
    outside_strings = _outside_strings(data)
    if _nesting(outside_strings) > MAX_NESTING:
        return f"the batch nests deeper than {MAX_NESTING} levels", False
    shapes = outside_strings.translate(_NUMBER_SHAPE)
    if _LONG_NUMBER in shapes:
        return f"the batch has a number of more than {MAX_NUMBER_DIGITS} digits", False
    # What could make a decoded number NaN or infinite: the literals (their
    # capitals), or an exponent of three digits or more (`[eE][+-]?[0-9]{3}`).
    plain = (
        b"N" not in outside_strings
        and b"I" not in outside_strings
        and b"e000" not in shapes
        and b"e+000" not in shapes
        and _strings_plain(data)
    )
    return None, plain


def decode_batch(data: bytes) -> list[Entry | EntryDecodeError]:
    """Decodes a replicated batch; an undecodable element becomes an error in
    its slot so the rest of the batch still applies."""
    return decode_batch_scanned(data)[0]


def decode_batch_scanned(data: bytes) -> tuple[list[Entry | EntryDecodeError], bool]:
    """`decode_batch`, and whether every value in the batch is plain JSON for
    certain (see `_beyond_limits`).

    Most batches are judged without finding where their strings lie
    (`_surely_within_limits`), which `_beyond_limits` spends most of its
    time on, and decoded with json's hooks noting whether any number is NaN
    or infinite (`_NotFinite`). Every verdict is `_beyond_limits`'s: what the
    quick test passes, it passes too, unless the batch is not valid JSON,
    and such a batch is decoded again the way every batch was, scanned
    first."""
    if not _surely_within_limits(data):
        return _decode_scanned_first(data)
    numbers = _NotFinite()
    try:
        raw = json.loads(data, parse_float=numbers.number, parse_constant=numbers.constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _decode_scanned_first(data)
    return _entries_of(raw, not numbers.seen and _strings_plain(data))


def _surely_within_limits(data: bytes) -> bool:
    """Whether the batch is within the decoder's limits, judged on all its
    bytes, strings and all: no more opening brackets than `MAX_NESTING` (so
    nothing nests deeper) and no run of more than `MAX_NUMBER_DIGITS`
    digits. `_beyond_limits` finds no problem where this finds none, if the
    batch is valid JSON: its brackets are some of these, and in valid JSON a
    string is never next to a digit, so taking the strings out joins no two
    runs of digits into a longer one."""
    openers = data.count(b"[") + data.count(b"{")
    return openers <= MAX_NESTING and _LONG_NUMBER not in data.translate(_NUMBER_SHAPE)


class _NotFinite:
    """json's hooks for number and constant tokens: they decode them as json
    does by itself, noting whether any is NaN or an infinity (the constants,
    and numbers such as 1e999)."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False

    def number(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            self.seen = True
        return value

    def constant(self, name: str) -> float:
        # NaN, Infinity or -Infinity: float spells them as json does.
        self.seen = True
        return float(name)


def _decode_scanned_first(data: bytes) -> tuple[list[Entry | EntryDecodeError], bool]:
    """The batch judged by `_beyond_limits` before it is decoded."""
    problem, plain = _beyond_limits(data)
    if problem:
        return [EntryDecodeError(INVALID_ENTRY, problem)], False
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        # Which of these a bad batch raises, and its message, vary between
        # Python versions: none of it goes into the reason.
        return [EntryDecodeError(INVALID_ENTRY, "the batch is not valid JSON")], False
    return _entries_of(raw, plain)


def _entries_of(raw: Any, plain: bool) -> tuple[list[Entry | EntryDecodeError], bool]:
    """The decoded batch's entries, each decoded on its own, and `plain`."""
    if not isinstance(raw, list):
        return [EntryDecodeError(INVALID_ENTRY, "the batch is not a list")], False
    out: list[Entry | EntryDecodeError] = []
    for item in raw:
        try:
            out.append(_entry_from(item))
        except EntryDecodeError as err:
            fields_ = item if isinstance(item, dict) else {}
            raw_id, raw_type = fields_.get("id"), fields_.get("type")
            out.append(
                EntryDecodeError(
                    err.code,
                    err.text,
                    raw_id if isinstance(raw_id, str) else "",
                    raw_type if isinstance(raw_type, str) else "INVALID",
                )
            )
    return out, plain
