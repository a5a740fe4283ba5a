"""Rejection reasons are stable codes plus texts written by Cortex
(cortex/state/reasons.py), never a library's message.

One script of batches (valid entries and many kinds of invalid ones) is
applied to fresh databases. Each refusal must carry the expected code, in the
result and in its `rejected` event. Applied under two "library message"
variants (pydantic validation errors and JSON decode errors reading
differently, as they may under other versions) the two databases must end
with the same digest, and no reason may read like a library's message."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from cortex.errors import CortexError, FailedPrecondition, InvalidArgument, NotFound
from cortex.refusals import refusal_error
from cortex.state import reasons
from cortex.state.machine import StateMachine

# Phrases of pydantic, Python's TypeError, json and codec messages, and
# exception class names: none may appear in a recorded reason.
LIBRARY_PHRASES = (
    "Input should",
    "validation error",
    "Value error",
    "__init__()",
    "got an unexpected keyword",
    "missing 1 required",
    "positional argument",
    "Expecting value",
    "codec can't decode",
    "not supported between",
    "Error:",
    "ValidationError",
    "JSONDecodeError",
    "TypeError",
    "RecursionError",
    "VARIANT",
)


def envelope(entry_type: Any, payload: Any, entry_id: str, ts: int = 1_000) -> dict[str, Any]:
    return {
        "type": entry_type,
        "id": entry_id,
        "ts": ts,
        "node": "n1",
        "payload": payload,
        "v": 1,
        "trace": {"span_id": entry_id, "parent_span_id": None},
    }


def join(node_id: str) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "raft_address": f"{node_id}:1",
        "grpc_address": f"{node_id}:2",
        "executors": ["shell"],
    }


def batch(*items: Any) -> bytes:
    return json.dumps(list(items)).encode()


def wf_task(key: str, task_id: str, spec: Any, depends_on: list[str] | None = None) -> Any:
    return {"key": key, "task_id": task_id, "spec": spec, "depends_on": depends_on or []}


class Script:
    """Batches with the outcome expected of each entry ("ok" or a code) and
    the codes of the items refused inside an entry that applies."""

    def __init__(self) -> None:
        self.steps: list[tuple[bytes, list[str], list[str]]] = []
        self._ids = 0

    def raw(self, data: bytes, *expected: str) -> None:
        self.steps.append((data, list(expected), []))

    def one(
        self, entry_type: Any, payload: Any, expected: str, ts: int = 1_000, items: Any = ()
    ) -> None:
        self._ids += 1
        data = batch(envelope(entry_type, payload, f"e{self._ids}", ts))
        self.steps.append((data, [expected], list(items)))


CMD = {"command": ["true"]}
INVALID_SPECS = [
    {"command": ["x"], "priority": "5"},
    {"command": ["x"], "priority": 11},
    {"command": ["x"], "priority": True},
    {"command": ["x"], "priority": 5.0},
    {"command": ["x"], "timeoutMs": 0},
    {"command": ["x"], "timeoutMs": 5, "timeout_ms": 5},
    {"command": ""},
    {"command": ["", "x"]},
    {"command": 42},
    {"command": ["x"], "bogus": 1},
    {"command": ["x"], "retryPolicy": {"backoffMultiplier": 1.2345}},
    {"command": ["x"], "retryPolicy": {"maxRetries": -1}},
    {"command": ["x"], "retryPolicy": []},
    {"command": ["x"], "constraints": None},
    {"command": ["x"], "constraints": {"minDiskGb": "big"}},
    {"command": ["x"], "env": {"A=B": "1"}},
    {"command": ["x"], "labels": {"a": 1}},
    {"command": ["x"], "options": {"x": float("nan")}},
    {"type": "Docker", "command": ["x"]},
    {"type": "shell"},
]


def script() -> Script:
    s = Script()
    s.one("NODE_JOIN", join("n1"), "ok")
    s.one("NODE_JOIN", join("n2"), "ok")
    retry = {"maxRetries": 1, "backoffMs": 1000, "backoffMultiplier": 1.5}
    s.one("TASK_SUBMIT", {"task_id": "t1", "spec": {**CMD, "retryPolicy": retry}}, "ok")
    s.one("TASK_SUBMIT", {"task_id": "t2", "spec": {"type": "noop", "timeout_ms": 5}}, "ok")

    # The batch or envelope cannot be decoded.
    s.raw(b"\xff\xfe not json", "invalid_entry")
    s.raw(b'[{"type": "TASK_CANCEL",', "invalid_entry")
    s.raw(b"[" * 100_000, "invalid_entry")
    s.raw(b'{"type": "TASK_SUBMIT"}', "invalid_entry")
    s.raw(
        batch(
            5,
            {"type": "TASK_CANCEL"},
            {**envelope("TASK_CANCEL", {"task_id": "t9"}, "x1"), "bogus": 1},
            {**envelope("TASK_CANCEL", {"task_id": "t9"}, "x2"), "ts": "1"},
            envelope(["TASK_CANCEL"], {"task_id": "t9"}, "x3"),
            envelope("TASK_CANCEL", [], "x4"),
        ),
        *["invalid_entry"] * 6,
    )
    s.one("TASK_TELEPORT", {}, "invalid_entry")

    # Payload fields missing, unknown or of the wrong type.
    s.one("TASK_SUBMIT", {"task_id": 7, "spec": CMD}, "invalid_payload")
    s.one("TASK_SUBMIT", {"spec": CMD}, "invalid_payload")
    s.one("TASK_SUBMIT", {"task_id": "t3", "spec": CMD, "bogus": 1}, "invalid_payload")
    s.one("TASK_STARTED", {"task_id": "t1", "attempt": True, "node": "n1"}, "invalid_payload")
    s.one("TASK_STARTED", {"task_id": "t1", "attempt": "1", "node": "n1"}, "invalid_payload")
    s.one("TASK_ASSIGN", {"assignments": [{"task": "t1"}]}, "invalid_payload")
    s.one("TASK_ASSIGN", {"assignments": ["t1"]}, "invalid_payload")
    s.one(
        "TASK_ASSIGN",
        {"assignments": [{"task_id": "t1", "node": "n1", "attempt": 1.0}]},
        "invalid_payload",
    )
    s.one("NODE_JOIN", {**join("n3"), "executors": [1, "shell"]}, "invalid_payload")
    s.one("NODE_JOIN", {**join("n3"), "labels": {"zone": 1}}, "invalid_payload")
    s.one("NODE_STATUS", {"node_id": "n1", "status": "sleepy\u2028"}, "invalid_payload")
    s.one("TASKS_PURGE", {"before_ms": 10, "limit": 0}, "invalid_payload")
    s.one("TASK_RETRY", {"task_id": "t1", "attempt": 0, "reason": "x", "delay_ms": 2**63 - 1},
          "invalid_payload")  # fmt: skip
    # A clock so late that clock + back-off would not fit SQLite.
    s.one("TASK_FAILED", {"task_id": "t1", "attempt": 0, "node": "n1", "reason": "x"},
          "invalid_entry", ts=2**63 - 1)  # fmt: skip

    # Specs refused by the spec rules.
    for number, spec in enumerate(INVALID_SPECS):
        s.one("TASK_SUBMIT", {"task_id": f"bad{number}", "spec": spec}, "invalid_spec")

    # Unknown tasks and nodes, stale reports, illegal transitions.
    s.one("TASK_CANCEL", {"task_id": "nope"}, "unknown_task")
    s.one("TASK_COMPLETE", {"task_id": "nope", "attempt": 1, "node": "n1", "result": {}},
          "unknown_task")  # fmt: skip
    s.one("NODE_STATUS", {"node_id": "ghost", "status": "active"}, "unknown_node")
    s.one("TASK_STARTED", {"task_id": "t1", "attempt": 1, "node": "n1"}, "illegal_transition")
    s.one("TASK_ASSIGN", {"assignments": [
        {"task_id": "t1", "node": "n1", "attempt": 1},
        {"task_id": "t2", "node": "n1", "attempt": 5},  # stale_report
        {"task_id": "t2", "node": "ghost", "attempt": 1},  # unknown_node
        {"task_id": "t9", "node": "n1", "attempt": 1},  # unknown_task
    ]}, "ok", items=["stale_report", "unknown_node", "unknown_task"])  # fmt: skip
    s.one("TASK_STARTED", {"task_id": "t1", "attempt": 2, "node": "n1"}, "stale_report")
    s.one("TASK_STARTED", {"task_id": "t1", "attempt": 1, "node": "n2"}, "stale_report")
    s.one("TASK_FAILED", {"task_id": "t1", "attempt": 1, "node": "n1", "reason": "exit 1"}, "ok",
          ts=5_000)  # fmt: skip
    s.one("TASK_RETRY", {"task_id": "t1", "attempt": 0, "reason": "lost"}, "stale_report")
    s.one("TASK_CANCEL", {"task_id": "t2"}, "ok")
    s.one("TASK_CANCEL", {"task_id": "t2"}, "illegal_transition")
    s.one("TASK_DEAD_LETTER", {"task_id": "t2", "attempt": 0, "reason": "x"}, "illegal_transition")

    # Workflows.
    good = [wf_task("a", "w1-a", CMD), wf_task("b", "w1-b", CMD, ["a"])]
    s.one("WORKFLOW_SUBMIT", {"workflow_id": "w1", "name": "wf", "tasks": good}, "ok")
    for tasks in (
        [],
        [wf_task("a", "w2-a", CMD, ["b"]), wf_task("b", "w2-b", CMD, ["a"])],
        [wf_task("a", "w2-a", CMD, ["zz"])],
        [wf_task("a", "w2-a", CMD), wf_task("a", "w2-b", CMD)],
        [{**wf_task("a", "w2-a", CMD), "extra": 1}],
        ["a"],
        [wf_task("", "w2-a", CMD)],
    ):
        s.one("WORKFLOW_SUBMIT", {"workflow_id": "w2", "name": "wf", "tasks": tasks},
              "invalid_workflow")  # fmt: skip
    for spec in ({"priority": "high", **CMD}, {"type": "Docker"}, "not a spec"):
        s.one("WORKFLOW_SUBMIT",
              {"workflow_id": "w2", "name": "wf", "tasks": [wf_task("a", "w2-a", spec)]},
              "invalid_spec")  # fmt: skip
    s.one("WORKFLOW_SUBMIT",
          {"workflow_id": "w3", "name": "wf", "tasks": [wf_task("a", "t1", CMD)]},
          "duplicate_id")  # fmt: skip
    # An idempotency key reused for something else.
    s.one("TASK_SUBMIT", {"task_id": "k1", "spec": CMD, "idempotency_key": "key-1"}, "ok")
    s.one("TASK_SUBMIT", {"task_id": "k1", "spec": CMD, "idempotency_key": "key-1"}, "ok")
    s.one("TASK_SUBMIT", {"task_id": "k2", "spec": {"type": "noop"}, "idempotency_key": "key-1"},
          "idempotency_conflict")  # fmt: skip
    keyed = {"name": "wf", "idempotency_key": "flow-1", "definition_digest": "d1"}
    s.one("WORKFLOW_SUBMIT", {**keyed, "workflow_id": "w4", "tasks": [wf_task("a", "w4-a", CMD)]},
          "ok")  # fmt: skip
    s.one("WORKFLOW_SUBMIT", {**keyed, "workflow_id": "w5", "tasks": [wf_task("a", "w5-a", CMD)],
                              "definition_digest": "d2"}, "idempotency_conflict")  # fmt: skip
    s.one("WORKFLOW_ADVANCE", {"workflow_id": "nope", "decisions": []}, "unknown_workflow")
    s.one("WORKFLOW_ADVANCE", {"workflow_id": "w1", "decisions": [
        {"task_id": "w1-b", "key": "b", "decision": "run", "reason": ""},  # illegal_transition
        {"task_id": "w1-b", "key": "b", "decision": {"run": 1}, "reason": ""},  # invalid_payload
        "decide",  # invalid_payload
        {"task_id": "nope", "key": "b", "decision": "run", "reason": ""},  # unknown_task
    ]}, "ok", items=["illegal_transition", "invalid_payload", "invalid_payload",
                     "unknown_task"])  # fmt: skip
    s.one("WORKFLOW_CANCEL", {"workflow_id": "w1"}, "ok")
    s.one("WORKFLOW_CANCEL", {"workflow_id": "w1"}, "illegal_transition")

    # Limits per key: a placement past max-running is refused on its own.
    s.one("LIMIT_SET", {"key": "deploy", "max_running": 1}, "ok")
    s.one("LIMIT_SET", {"key": "deploy", "max_running": 0, "rate_per_min": 0}, "invalid_payload")
    s.one("LIMIT_SET", {"key": "bad key", "max_running": 1}, "invalid_payload")
    s.one("WEIGHT_SET", {"key": "tenant", "weight": 0}, "invalid_payload")
    keyed_cmd = {**CMD, "concurrencyKey": "deploy"}
    s.one("TASK_SUBMIT", {"task_id": "l1", "spec": keyed_cmd}, "ok")
    s.one("TASK_SUBMIT", {"task_id": "l2", "spec": keyed_cmd}, "ok")
    s.one("TASK_SUBMIT", {"task_id": "l3", "spec": {**CMD, "concurrencyKey": "no spaces"}},
          "invalid_spec")  # fmt: skip
    s.one("TASK_ASSIGN", {"assignments": [
        {"task_id": "l1", "node": "n1", "attempt": 1},
        {"task_id": "l2", "node": "n2", "attempt": 1},  # limit_reached
    ]}, "ok", items=["limit_reached"])  # fmt: skip

    # Schedules.
    every = {"every_ms": 1000}
    task_target = {"task": CMD}
    s.one("SCHEDULE_CREATE", {"schedule_id": "s1", "name": "nightly", "timing": every,
                              "target": task_target}, "ok")  # fmt: skip
    s.one("SCHEDULE_CREATE", {"schedule_id": "s2", "name": "nightly", "timing": every,
                              "target": task_target}, "name_taken")  # fmt: skip
    s.one("SCHEDULE_CREATE", {"schedule_id": "s2", "name": "n2", "timing": {"every_ms": 5},
                              "target": task_target}, "invalid_schedule")  # fmt: skip
    s.one("SCHEDULE_PAUSE", {"schedule_id": "nope", "paused": True}, "unknown_schedule")
    s.one("SCHEDULE_FIRE", {"schedule_id": "s1", "decisions": [
        {"slot_ms": 2000, "action": "explode"}]}, "invalid_schedule")  # fmt: skip
    s.one("SCHEDULE_FIRE", {"schedule_id": "s1", "decisions": [{"slot_ms": "x"}]},
          "invalid_payload")  # fmt: skip
    return s


def run(path: Path) -> tuple[StateMachine, list[list[dict[str, Any]]]]:
    machine = StateMachine(str(path))
    results = []
    for index, (data, _, _) in enumerate(script().steps, start=1):
        applied = machine.apply_batch(index, data)
        assert applied is not None
        results.append(applied)
    return machine, results


def rejected_details(conn: sqlite3.Connection, index: int | None = None) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT detail FROM task_events WHERE event = 'rejected'"
        " AND (? IS NULL OR raft_index = ?) ORDER BY seq",
        (index, index),
    )
    return [json.loads(row[0]) for row in rows]


@pytest.fixture
def applied(tmp_path: Path) -> Iterator[tuple[StateMachine, list[list[dict[str, Any]]]]]:
    machine, results = run(tmp_path / "state.db")
    yield machine, results
    machine.close()


def test_each_kind_of_rejection_has_its_code(applied: Any) -> None:
    machine, results = applied
    steps = script().steps
    for index, ((data, expected, items), got) in enumerate(zip(steps, results, strict=True), 1):
        codes = ["ok" if r["ok"] else r["reason"].split(": ", 1)[0] for r in got]
        assert codes == expected, (data[:120], got)
        # One event per refused entry, with the reason its proposer got, or one
        # per refused item of an entry that applied.
        events = rejected_details(machine._conn, index)
        refused = [r["reason"] for r in got if not r["ok"]]
        if refused:
            assert [d["reason"] for d in events] == refused
        assert [d["code"] for d in events] == [c for c in codes if c != "ok"] + items
    details = rejected_details(machine._conn)
    for detail in details:
        assert detail["code"] in reasons.REASON_CODES
        assert detail["reason"].startswith(detail["code"] + ": ")
        assert detail["reason"] != detail["code"] + ": "
    every_code = {d["code"] for d in details}
    assert every_code == reasons.REASON_CODES


def test_reasons_read_as_written_by_cortex(applied: Any) -> None:
    machine, results = applied
    by_reason = {d["reason"] for d in rejected_details(machine._conn)}
    for expected in (
        "invalid_entry: the batch is not valid JSON",
        "invalid_entry: the batch is not a list",
        "invalid_entry: entry is not an object",
        'invalid_entry: envelope has an unknown field "bogus"',
        "invalid_entry: envelope field ts is not a valid integer",
        'invalid_entry: unknown entry type "TASK_TELEPORT"',
        "invalid_payload: TASK_SUBMIT: missing field task_id",
        'invalid_payload: TASK_SUBMIT: unknown field "bogus"',
        "invalid_payload: TASK_STARTED: field attempt has the wrong type",
        'invalid_payload: TASK_ASSIGN: assignments[0] has an unknown field "task"',
        "invalid_payload: TASK_ASSIGN: field assignments[0].attempt has the wrong type",
        "invalid_payload: NODE_JOIN: executors must hold only strings",
        'invalid_payload: node status "sleepy\\u2028" is not one of active, cordoned,'
        " draining, offline",
        "invalid_spec: priority must be an integer",
        "invalid_spec: timeoutMs must be greater than 0",
        "invalid_spec: retryPolicy.backoffMultiplier must have at most 3 decimal places",
        "invalid_spec: options.x must be a finite number",
        "invalid_spec: workflow task a: priority must be an integer",
        "invalid_workflow: dependency cycle: a -> b -> a",
        "unknown_task: task nope does not exist",
        "stale_report: task t1: attempt 2 on n1, current is attempt 1 on n1",
        "illegal_transition: task t2 is already cancelled",
        "duplicate_id: task id t1 already exists",
        'idempotency_conflict: idempotency key "key-1" is already used by task k1, submitted'
        " with a different spec",
        'idempotency_conflict: idempotency key "flow-1" is already used by workflow w4,'
        " submitted with a different definition",
    ):
        assert expected in by_reason, expected


def test_retry_delay_of_the_script_is_integer_exact(applied: Any) -> None:
    machine, _ = applied
    (detail,) = machine._conn.execute(
        "SELECT detail FROM task_events WHERE task_id = 't1' AND event = 'retried'"
    ).fetchone()
    assert json.loads(detail)["delay_ms"] == 1000


# ------------------------------------------------- library messages do not matter


def library_variant(monkeypatch: pytest.MonkeyPatch, tag: str) -> None:
    """Makes pydantic validation errors and JSON decode errors read
    differently, as another version of either might."""
    original = BaseModel.model_validate.__func__  # type: ignore[attr-defined]

    def model_validate(cls: type[BaseModel], obj: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(cls, obj, *args, **kwargs)
        except ValidationError as err:
            raise ValidationError.from_exception_data(
                err.title,
                [{"type": "value_error", "loc": ("VARIANT",), "input": obj,
                  "ctx": {"error": ValueError(f"Input should be VARIANT {tag}")}}],
            ) from None  # fmt: skip

    monkeypatch.setattr(BaseModel, "model_validate", classmethod(model_validate))
    monkeypatch.setattr(json.JSONDecodeError, "__str__", lambda self: f"VARIANT {tag} JSON")


def test_digest_does_not_depend_on_library_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortex.spec import TaskSpec

    digests, reasons_seen = [], []
    for tag in ("A", "B"):
        with monkeypatch.context() as patch:
            library_variant(patch, tag)
            # The variant is in force: pydantic and json now say something else.
            with pytest.raises(ValidationError, match=f"VARIANT {tag}"):
                TaskSpec.model_validate({"priority": "x"})
            with pytest.raises(json.JSONDecodeError) as caught:
                json.loads("[")
            assert str(caught.value) == f"VARIANT {tag} JSON"
            machine, _ = run(tmp_path / tag / "state.db")
            try:
                digests.append(machine.digest())
                reasons_seen.append([d["reason"] for d in rejected_details(machine._conn)])
            finally:
                machine.close()
    assert digests[0] == digests[1]
    assert reasons_seen[0] == reasons_seen[1] and len(reasons_seen[0]) > 50
    for reason in reasons_seen[0]:
        for phrase in LIBRARY_PHRASES:
            assert phrase not in reason, (phrase, reason)
        assert not re.search(r"'[^']*'", reason), reason  # no Python repr quoting


def test_every_code_is_documented() -> None:
    doc = reasons.__doc__ or ""
    for code in reasons.REASON_CODES:
        assert f"`{code}`" in doc, code


@pytest.mark.parametrize(
    ("reason", "error"),
    [
        ("invalid_spec: priority must be an integer", InvalidArgument),
        ("unknown_task: task t1 does not exist", NotFound),
        ("illegal_transition: task t1 is already completed", FailedPrecondition),
        ("stale_report: task t1: attempt 1 on n1, current is attempt 2 on n2", FailedPrecondition),
        ("an unrecognised reason", CortexError),
    ],
)
def test_a_refused_proposal_becomes_the_error_its_code_names(
    reason: str, error: type[CortexError]
) -> None:
    err = refusal_error({"ok": False, "reason": reason}, "task t1 could not be cancelled")
    assert type(err) is error
    assert str(err) == f"task t1 could not be cancelled: {reason}"
