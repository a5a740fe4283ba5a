"""Why `apply` refused an entry: the stable reason codes, and the exception
that carries one.

A refusal is replicated state. It is recorded as a `rejected` event whose
detail holds `code` and `reason` (`"code: text"`), and both go into the
state digest; the proposer gets `{"ok": False, "reason": "code: text"}`. So
the code comes from the list below and the text is written by this project
from the entry and the database alone: never a library's message (pydantic,
a Python `TypeError`, `json`) nor a `repr`, which could read differently on
a node running other versions and fork the cluster.

| code | the entry ... |
|---|---|
| `invalid_entry` | batch or envelope cannot be decoded, or its type is unknown |
| `invalid_payload` | has a payload field missing, unknown, of the wrong type or out of range |
| `invalid_spec` | carries a task spec that breaks `cortex.state.spec_rules` |
| `invalid_workflow` | carries a malformed DAG: no tasks, a bad or duplicate key, an unknown dependency, a cycle, an oversized context |
| `unknown_task` | names a task that does not exist |
| `unknown_node` | names a node that never joined |
| `unknown_workflow` | names a workflow that does not exist |
| `duplicate_id` | would create a task whose id is taken |
| `stale_report` | names an attempt or node that is not the task's current one (fencing) |
| `illegal_transition` | asks for a change the task, workflow or node's state does not allow |
| `idempotency_conflict` | reuses an idempotency key taken by a task or workflow submitted with a different spec or definition |
| `limit_reached` | would assign a task past its concurrency key's max-running count or rate |
| `unknown_schedule` | names a schedule that does not exist |
| `invalid_schedule` | carries a malformed schedule (timing, overlap, window, target) or slot decision |
| `name_taken` | would create a schedule under a name another one has |

Programs match on the code (`detail.code`, or the reason up to the first
colon); the text is for people and may be reworded between releases.

Anything else that goes wrong while applying (a full disk, an I/O error, a
bug) is not a property of the entry and is never recorded: the node stops
before its applied index moves (see `cortex.failstop`)."""

from __future__ import annotations

import json
from typing import Final, Literal, get_args

ReasonCode = Literal[
    "invalid_entry",
    "invalid_payload",
    "invalid_spec",
    "invalid_workflow",
    "unknown_task",
    "unknown_node",
    "unknown_workflow",
    "duplicate_id",
    "stale_report",
    "illegal_transition",
    "idempotency_conflict",
    "limit_reached",
    "unknown_schedule",
    "invalid_schedule",
    "name_taken",
]

INVALID_ENTRY: Final = "invalid_entry"
INVALID_PAYLOAD: Final = "invalid_payload"
INVALID_SPEC: Final = "invalid_spec"
INVALID_WORKFLOW: Final = "invalid_workflow"
UNKNOWN_TASK: Final = "unknown_task"
UNKNOWN_NODE: Final = "unknown_node"
UNKNOWN_WORKFLOW: Final = "unknown_workflow"
DUPLICATE_ID: Final = "duplicate_id"
STALE_REPORT: Final = "stale_report"
ILLEGAL_TRANSITION: Final = "illegal_transition"
IDEMPOTENCY_CONFLICT: Final = "idempotency_conflict"
LIMIT_REACHED: Final = "limit_reached"
UNKNOWN_SCHEDULE: Final = "unknown_schedule"
INVALID_SCHEDULE: Final = "invalid_schedule"
NAME_TAKEN: Final = "name_taken"

REASON_CODES: frozenset[str] = frozenset(get_args(ReasonCode))

# Longest piece of entry-supplied text quoted into a reason.
_QUOTE_CHARS = 100


class Rejected(Exception):
    """The entry is refused: `code` (one of `REASON_CODES`) says why to a
    program, `text` to a person. `str()` is the recorded reason."""

    def __init__(self, code: ReasonCode, text: str) -> None:
        super().__init__(f"{code}: {text}")
        self.code: ReasonCode = code
        self.text = text

    @property
    def reason(self) -> str:
        return f"{self.code}: {self.text}"


def quoted(value: str) -> str:
    """Entry-supplied text for a reason: cut to 100 characters and written as
    an ASCII JSON string. Unlike `repr`, the escaping does not depend on the
    Unicode tables of the Python that runs it."""
    return json.dumps(value[:_QUOTE_CHARS], ensure_ascii=True)


def reason_code(reason: str) -> str:
    """The code of a recorded reason (`"code: text"`), or "" for one that has
    none (written before reasons had codes)."""
    code = reason.split(":", 1)[0]
    return code if code in REASON_CODES else ""
