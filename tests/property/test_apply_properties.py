"""Generated entry sequences against the replicated state machine.

Random batches of valid, stale and malformed entries are applied at
increasing Raft indexes to two independent SQLite databases. Properties:
both end with the same digest and applied index, `apply_batch` never raises
and records every invalid entry as rejected, replaying applied indexes is a
no-op, and the task tables satisfy the lifecycle invariants of SPEC §4.
Purges (`TASKS_PURGE`, in batches of their own) remove only tasks in a
purgeable terminal state; tests/property/test_purge_properties.py checks
exactly what they remove.

Entries are built directly (ids, clocks and nodes come from the generator)
so both databases receive byte-identical input."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cortex.state.entries import Entry
from cortex.state.machine import StateMachine, state_digest
from cortex.state.traceparent import is_stored_form

NODE_POOL = ("n1", "n2", "n3")
GHOST_NODE = "ghost"
TASK_POOL = ("t1", "t2", "t3", "t4")
IDEMPOTENCY_KEYS = (None, "key-a", "key-b")
# A submission's trace context: valid ones, and one apply refuses (the
# payload check); absent as in entries written before tasks kept one.
TRACEPARENTS = (
    None,
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
)
NODE_STATUSES = ("active", "draining", "cordoned", "offline")
PURGEABLE = frozenset({"completed", "failed", "cancelled", "skipped"})
# Unknown to Cortex on purpose; not names the spec may add later.
UNKNOWN_TYPES = ("TASK_EXPLODE", "task_submit", "", "NODE_JOIN ")

# Hand-written payload schemas (field -> kind); "?" marks an optional field.
PAYLOAD_FIELDS: dict[str, dict[str, str]] = {
    "TASK_SUBMIT": {
        "task_id": "str",
        "spec": "dict",
        "idempotency_key": "str?",
        "traceparent": "str?",
    },
    "TASK_ASSIGN": {"assignments": "list"},
    "TASK_STARTED": {"task_id": "str", "attempt": "int", "node": "str", "pid": "int?"},
    "TASK_COMPLETE": {
        "task_id": "str",
        "attempt": "int",
        "node": "str",
        "result": "dict",
        "started_at": "int?",
    },
    "TASK_FAILED": {
        "task_id": "str",
        "attempt": "int",
        "node": "str",
        "reason": "str",
        "result": "dict?",
        "started_at": "int?",
    },
    "TASK_RETRY": {
        "task_id": "str",
        "attempt": "int",
        "reason": "str",
        "delay_ms": "int",
        "spend_attempt": "bool",
    },
    "TASK_CANCEL": {"task_id": "str", "reason": "str"},
    "TASK_DEAD_LETTER": {"task_id": "str", "attempt": "int", "reason": "str"},
    "NODE_JOIN": {
        "node_id": "str",
        "raft_address": "str",
        "grpc_address": "str",
        "labels": "dict",
        "executors": "list",
        "resources": "dict",
    },
    "NODE_STATUS": {"node_id": "str", "status": "str", "reason": "str"},
    "NODE_LEAVE": {"node_id": "str", "reason": "str"},
    "TASKS_PURGE": {"before_ms": "int", "limit": "int"},
}
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "TASK_SUBMIT": ("task_id", "spec"),
    "TASK_ASSIGN": ("assignments",),
    "TASK_STARTED": ("task_id", "attempt", "node"),
    "TASK_COMPLETE": ("task_id", "attempt", "node", "result"),
    "TASK_FAILED": ("task_id", "attempt", "node", "reason"),
    "TASK_RETRY": ("task_id", "attempt", "reason"),
    "TASK_CANCEL": ("task_id",),
    "TASK_DEAD_LETTER": ("task_id", "attempt", "reason"),
    "NODE_JOIN": ("node_id", "raft_address", "grpc_address"),
    "NODE_STATUS": ("node_id", "status"),
    "NODE_LEAVE": ("node_id",),
    "TASKS_PURGE": ("before_ms", "limit"),
}
WRONG_VALUES: dict[str, list[Any]] = {
    "str": [5, None, ["a"], {"a": 1}, 1.5, True],
    "str?": [5, ["a"], {"a": 1}, 1.5],
    "int": ["1", 1.5, None, True, [1], {}],
    "int?": ["1", 1.5, [], True],
    "dict": [[], "x", 5, None],
    "dict?": [[], "x", 5],
    "list": [{}, "x", 5, None],
    "bool": [1, "true", None, 0],
}

# Element kinds: "maybe" is well-formed (accepted or rejected by state),
# "invalid" must be rejected by its payload, "malformed" fails envelope decoding.
MAYBE, INVALID, MALFORMED = "maybe", "invalid", "malformed"


@dataclass
class Element:
    raw: Any
    kind: str
    entry_id: str | None
    type: str | None


@dataclass
class Batch:
    index: int
    data: bytes
    elements: list[Element] | None  # None: the whole batch is not a JSON list


@dataclass
class TaskRow:
    state: str
    attempt: int
    node: str | None


@dataclass
class World:
    """What the generator peeks at to aim some reports at the current attempt."""

    tasks: dict[str, TaskRow]
    nodes: list[str]
    # No entry of the batch being drawn is older than this.
    batch_start_ms: int = 0


# ---------------------------------------------------------------- generation


retry_policies = st.fixed_dictionaries(
    {
        "maxRetries": st.integers(0, 2),
        "backoffMs": st.integers(0, 5000),
        "backoffMultiplier": st.sampled_from([1.0, 1.5, 2.0, 3.0]),
        "retryable": st.booleans(),
    }
)
valid_specs = st.one_of(
    st.fixed_dictionaries(
        {"command": st.sampled_from([["true"], "echo hi", ["sh", "-c", "exit 1"]])},
        optional={
            "type": st.just("shell"),
            "priority": st.integers(0, 10),
            "timeoutMs": st.integers(1, 10**6),
            "retryPolicy": retry_policies,
            "labels": st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"])),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("noop")},
        optional={
            "retryPolicy": retry_policies,
            "constraints": st.fixed_dictionaries({"minMemoryMb": st.sampled_from([0, 256, 1024])}),
        },
    ),
)
invalid_specs = st.sampled_from(
    [
        {},
        {"command": ""},
        {"command": ["x"], "priority": 11},
        {"command": ["x"], "bogus": 1},
        {"type": "docker", "command": ["x"]},
        {"command": ["x"], "timeoutMs": -5},
        {"command": ["x"], "retryPolicy": {"maxRetries": -1}},
    ]
)
results = st.fixed_dictionaries(
    {"exit_code": st.integers(0, 3), "stdout": st.sampled_from(["", "out"]), "stderr": st.just("")}
)


def _draw_task_id(data: st.DataObject) -> str:
    return data.draw(st.sampled_from(TASK_POOL))


def _draw_report(data: st.DataObject, world: World, task_id: str) -> tuple[int, str]:
    """(attempt, node) of the task's current attempt, or a stale/wrong pair."""
    task = world.tasks.get(task_id)
    if task is not None and task.node is not None and data.draw(st.integers(0, 2)) > 0:
        return task.attempt, task.node
    return data.draw(st.integers(0, 4)), data.draw(st.sampled_from((*NODE_POOL, GHOST_NODE)))


def _draw_assignment(data: st.DataObject, world: World, target: str | None) -> dict[str, Any]:
    task_id = target or _draw_task_id(data)
    task = world.tasks.get(task_id)
    if task is not None and world.nodes and data.draw(st.integers(0, 2)) > 0:
        return {
            "task_id": task_id,
            "node": data.draw(st.sampled_from(world.nodes)),
            "attempt": task.attempt + 1,
        }
    return {
        "task_id": task_id,
        "node": data.draw(st.sampled_from((*NODE_POOL, GHOST_NODE))),
        "attempt": data.draw(st.integers(0, 4)),
    }


def _draw_payload(
    data: st.DataObject, world: World, entry_type: str, target: str | None = None
) -> dict[str, Any]:
    """A well-formed payload of `entry_type`, aimed at `target` or a random task."""
    if entry_type == "NODE_JOIN":
        node_id = data.draw(st.sampled_from(NODE_POOL))
        return {
            "node_id": node_id,
            "raft_address": f"127.0.0.1:{7100 + NODE_POOL.index(node_id)}",
            "grpc_address": f"127.0.0.1:{7200 + NODE_POOL.index(node_id)}",
            "labels": data.draw(st.sampled_from([{}, {"zone": "a"}])),
            "executors": ["shell", "noop"],
            "resources": {"cpu_cores": data.draw(st.integers(1, 8))},
        }
    if entry_type == "NODE_STATUS":
        return {
            "node_id": data.draw(st.sampled_from((*NODE_POOL, GHOST_NODE))),
            "status": data.draw(st.sampled_from((*NODE_STATUSES, "sleepy"))),
            "reason": "operator",
        }
    if entry_type == "NODE_LEAVE":
        return {
            "node_id": data.draw(st.sampled_from((*NODE_POOL, GHOST_NODE))),
            "reason": "removed by request",
        }
    if entry_type == "TASKS_PURGE":
        # Cutoffs reach back over earlier batches, never into this one.
        return {
            "before_ms": data.draw(
                st.one_of(
                    st.just(world.batch_start_ms), st.integers(1_000_000, world.batch_start_ms)
                )
            ),
            "limit": data.draw(st.integers(1, 3)),
        }
    if entry_type == "TASK_SUBMIT":
        spec = data.draw(
            st.one_of(valid_specs, invalid_specs)
            if data.draw(st.integers(0, 5)) == 0
            else valid_specs
        )
        payload = {
            "task_id": _draw_task_id(data),
            "spec": spec,
            "idempotency_key": data.draw(st.sampled_from(IDEMPOTENCY_KEYS)),
            "traceparent": data.draw(st.sampled_from(TRACEPARENTS)),
        }
        if data.draw(st.booleans()):
            del payload["traceparent"]
        return payload
    if entry_type == "TASK_ASSIGN":
        count = data.draw(st.integers(1, 3))
        return {
            "assignments": [
                _draw_assignment(data, world, target if i == 0 else None) for i in range(count)
            ]
        }
    task_id = target or _draw_task_id(data)
    if entry_type == "TASK_CANCEL":
        return {"task_id": task_id, "reason": "user"}
    attempt, node = _draw_report(data, world, task_id)
    if entry_type == "TASK_STARTED":
        return {
            "task_id": task_id,
            "attempt": attempt,
            "node": node,
            "pid": data.draw(st.one_of(st.none(), st.integers(1, 99999))),
        }
    # A start reported with the outcome (folded by the proposer), or not.
    started = data.draw(st.sampled_from([{}, {"started_at": None}, {"started_at": 900}]))
    if entry_type == "TASK_COMPLETE":
        return {
            "task_id": task_id,
            "attempt": attempt,
            "node": node,
            "result": data.draw(results),
            **started,
        }
    if entry_type == "TASK_FAILED":
        return {
            "task_id": task_id,
            "attempt": attempt,
            "node": node,
            "reason": "exit 1",
            "result": data.draw(st.one_of(st.none(), results)),
            **started,
        }
    if entry_type == "TASK_RETRY":
        return {
            "task_id": task_id,
            "attempt": attempt,
            "reason": "node lost",
            "delay_ms": data.draw(st.integers(0, 5000)),
            "spend_attempt": data.draw(st.booleans()),
        }
    if entry_type == "TASK_DEAD_LETTER":
        return {"task_id": task_id, "attempt": attempt, "reason": "gave up"}
    raise AssertionError(entry_type)


# Weighted towards the lifecycle so tasks actually progress.
VALID_TYPES = (
    ["NODE_JOIN"] * 3
    + ["TASK_SUBMIT"] * 4
    + ["TASK_ASSIGN"] * 4
    + ["TASK_STARTED"] * 3
    + ["TASK_COMPLETE"] * 3
    + ["TASK_FAILED"] * 3
    + ["TASK_RETRY", "TASK_CANCEL", "TASK_DEAD_LETTER", "NODE_STATUS", "NODE_LEAVE"]
)


NEXT_STEP = {
    "queued": ["TASK_ASSIGN"],
    "assigned": ["TASK_STARTED", "TASK_FAILED", "TASK_RETRY"],
    "running": ["TASK_COMPLETE", "TASK_FAILED", "TASK_FAILED", "TASK_CANCEL"],
    "dead_letter": ["TASK_RETRY"],
}


def _draw_entry_type(data: st.DataObject, world: World) -> tuple[str, str | None]:
    """Half the time the step that moves some task (or the cluster) forward,
    so sequences reach deep states; otherwise any type, at any task."""
    if data.draw(st.booleans()):
        if not world.nodes:
            return "NODE_JOIN", None
        movable = sorted(t for t, row in world.tasks.items() if row.state in NEXT_STEP)
        if not movable:
            return "TASK_SUBMIT", None
        task_id = data.draw(st.sampled_from(movable))
        return data.draw(st.sampled_from(NEXT_STEP[world.tasks[task_id].state])), task_id
    return data.draw(st.sampled_from(VALID_TYPES)), None


def _envelope(entry_type: Any, entry_id: str, ts: int, node: str, payload: Any) -> dict[str, Any]:
    return asdict(
        Entry(
            type=entry_type,
            id=entry_id,
            ts=ts,
            node=node,
            payload=payload,
            trace={"span_id": entry_id, "parent_span_id": None},
        )
    )


def _draw_element(
    data: st.DataObject, world: World, entry_id: str, ts: int, entry_type: str | None = None
) -> Element:
    proposer = data.draw(st.sampled_from(NODE_POOL))
    kind = data.draw(st.sampled_from([MAYBE] * 7 + [INVALID] * 2 + [MALFORMED]))
    target = None
    if entry_type is None:
        entry_type, target = _draw_entry_type(data, world)
    payload: Any = _draw_payload(data, world, entry_type, target)
    if kind == MAYBE:
        return Element(
            _envelope(entry_type, entry_id, ts, proposer, payload), MAYBE, entry_id, entry_type
        )
    if kind == INVALID:
        how = data.draw(
            st.sampled_from(
                ["unknown_type", "wrong_type", "wrong_type", "missing", "extra", "not_object"]
            )
        )
        if how == "unknown_type":
            entry_type = data.draw(st.sampled_from(UNKNOWN_TYPES))
        elif how == "wrong_type":
            name = data.draw(st.sampled_from(sorted(PAYLOAD_FIELDS[entry_type])))
            payload[name] = data.draw(
                st.sampled_from(WRONG_VALUES[PAYLOAD_FIELDS[entry_type][name]])
            )
        elif how == "missing":
            del payload[data.draw(st.sampled_from(REQUIRED_FIELDS[entry_type]))]
        elif how == "extra":
            payload["unexpected_field"] = 1
        else:
            payload = data.draw(st.sampled_from([[], ["x"], "payload", 3, None]))
        return Element(
            _envelope(entry_type, entry_id, ts, proposer, payload), INVALID, entry_id, entry_type
        )
    envelope = _envelope(entry_type, entry_id, ts, proposer, payload)
    how = data.draw(st.sampled_from(["not_object", "missing", "extra", "bad_ts", "bad_type"]))
    raw: Any
    if how == "not_object":
        raw = data.draw(st.sampled_from([1, "entry", None, [1, 2], True]))
    elif how == "missing":
        del envelope[data.draw(st.sampled_from(["type", "id", "ts", "node", "payload"]))]
        raw = envelope
    elif how == "extra":
        raw = {**envelope, "unexpected": 1}
    elif how == "bad_ts":
        raw = {**envelope, "ts": data.draw(st.sampled_from([str(ts), 1.5, None, []]))}
    else:
        raw = {**envelope, "type": data.draw(st.sampled_from([5, None, ["TASK_SUBMIT"]]))}
    return Element(raw, MALFORMED, None, None)


def _draw_batch(data: st.DataObject, world: World, index: int, counter: list[int]) -> Batch:
    # Purges are likelier once there is something to purge.
    finished = any(t.state in PURGEABLE for t in world.tasks.values())
    shapes = ["entries"] * 8 + ["garbage", "not_list"] + ["purge"] * (3 if finished else 1)
    shape = data.draw(st.sampled_from(shapes))
    if shape == "garbage":
        # '#' can never start JSON, whatever encoding json.loads detects.
        return Batch(index, b"#" + data.draw(st.binary(max_size=24)), None)
    if shape == "not_list":
        value = data.draw(st.sampled_from([{"type": "TASK_SUBMIT"}, 42, "batch", None, 1.5]))
        return Batch(index, json.dumps(value).encode(), None)
    world.batch_start_ms = 1_000_000 + index * 1000
    elements = []
    # A purge travels alone: it may remove rows that earlier entries of its
    # own batch wrote (a rejection naming a purged task), which the
    # per-entry checks count.
    purge = shape == "purge"
    for _ in range(1 if purge else data.draw(st.integers(0, 5))):
        counter[0] += 1
        ts = world.batch_start_ms + data.draw(st.integers(0, 999))
        entry_type = "TASKS_PURGE" if purge else None
        elements.append(_draw_element(data, world, f"entry-{counter[0]}", ts, entry_type))
    raw = json.dumps([el.raw for el in elements], separators=(",", ":")).encode()
    return Batch(index, raw, elements)


# ---------------------------------------------------------------- checks


def _read_world(conn: sqlite3.Connection) -> World:
    tasks = {
        row[0]: TaskRow(row[1], row[2], row[3])
        for row in conn.execute("SELECT id, state, attempt, assigned_node FROM tasks")
    }
    nodes = [row[0] for row in conn.execute("SELECT id FROM nodes ORDER BY id")]
    return World(tasks, nodes)


def _dump_tables(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """An independent canonical dump (not the code's digest) of replicated state."""
    out = {}
    for table in (
        "tasks",
        "task_events",
        "submissions",
        "nodes",
        "workflows",
        "task_dependencies",
        "raft_meta",
    ):
        out[table] = sorted(
            (tuple(row) for row in conn.execute(f"SELECT * FROM {table}")), key=repr
        )
    return out


def _check_results(
    conn: sqlite3.Connection, batch: Batch, res: list[dict[str, Any]] | None
) -> None:
    assert res is not None, f"index {batch.index} was fresh but apply_batch returned None"
    assert all(isinstance(r, dict) and isinstance(r.get("ok"), bool) for r in res), res
    rows = conn.execute(
        "SELECT entry_id, event, detail FROM task_events WHERE raft_index = ?", (batch.index,)
    ).fetchall()
    if batch.elements is None:
        assert len(res) == 1 and res[0]["ok"] is False and res[0].get("reason"), res
        assert [(r[0], r[1]) for r in rows] == [("", "rejected")], rows
        assert json.loads(rows[0][2])["reason"]
        return
    assert len(res) == len(batch.elements), (res, batch.elements)
    malformed = 0
    for element, result in zip(batch.elements, res, strict=True):
        if element.kind in (INVALID, MALFORMED):
            assert result["ok"] is False, (element, result)
        if result["ok"] is False:
            assert isinstance(result.get("reason"), str) and result["reason"], result
        if element.kind == MALFORMED:
            malformed += 1
            continue
        own = [(event, detail) for entry_id, event, detail in rows if entry_id == element.entry_id]
        rejected = [json.loads(detail) for event, detail in own if event == "rejected"]
        if result["ok"] is False:
            # Exactly one rejection row with its reason, and nothing half-applied.
            assert len(own) == 1 and len(rejected) == 1, (element, result, own)
            assert rejected[0]["reason"] == result["reason"]
        elif element.type == "TASK_ASSIGN":
            assert len(rejected) == result["rejected"], (element, result, own)
            placed = sum(1 for event, _ in own if event == "assigned")
            assert placed == result["placed"], (element, result, own)
        else:
            assert not rejected, (element, result, own)
    # A malformed entry's rejection carries its id when the id was readable.
    attributed = {el.entry_id for el in batch.elements if el.kind != MALFORMED}
    leftover = [r for r in rows if r[0] not in attributed]
    assert len(leftover) == malformed and all(r[1] == "rejected" for r in leftover), rows


def _check_purged(before: World, after: World, res: list[dict[str, Any]] | None) -> None:
    """Tasks leave only by a purge, and only from a purgeable terminal state:
    never queued, active or dead-lettered."""
    gone = set(before.tasks) - set(after.tasks)
    for task_id in gone:
        assert before.tasks[task_id].state in PURGEABLE, (task_id, before.tasks[task_id])
    purged = sum(r.get("tasks", 0) for r in res or [] if r["ok"] and "workflows" in r)
    assert purged == len(gone), (purged, gone)
    if gone:
        event("a purge removed tasks")


def _check_invariants(conn: sqlite3.Connection, last_attempts: dict[tuple[str, int], int]) -> None:
    tasks = conn.execute(
        "SELECT id, state, attempt, retries, assigned_node, result, submit_index FROM tasks"
    ).fetchall()
    task_ids = {t[0] for t in tasks}
    for task_id, state, attempt, retries, node, result, submitted in tasks:
        # By submission: a purged id may be submitted again, from attempt 0.
        key = (task_id, submitted)
        assert attempt >= last_attempts.get(key, 0), f"attempt of {task_id} went down"
        last_attempts[key] = attempt
        assert retries >= 0
        events = conn.execute(
            "SELECT event, from_state, to_state, attempt FROM task_events"
            " WHERE task_id = ? AND event != 'rejected' ORDER BY seq",
            (task_id,),
        ).fetchall()
        completions = [ev for ev in events if ev[0] == "completed"]
        assert len(completions) <= 1, f"{task_id} completed {len(completions)} times"
        assert [ev[0] for ev in events].count("submitted") == 1, events
        if state == "completed":
            assert len(completions) == 1
            assert result is not None and isinstance(json.loads(result), dict)
        if state in ("assigned", "running"):
            assert node is not None and attempt >= 1, (task_id, state, node, attempt)
        if state == "queued":
            assert node is None, (task_id, node)
        # The audit log chains: each transition starts where the last one ended,
        # ends at the task's state, and attempts along it never go down.
        current, seen_attempt = None, 0
        for _name, from_state, to_state, ev_attempt in events:
            if ev_attempt is not None:
                assert ev_attempt >= seen_attempt, (task_id, events)
                seen_attempt = ev_attempt
            if to_state is None:
                continue
            assert from_state == current, (task_id, events)
            current = to_state
        assert current == state, (task_id, state, events)
    # A task keeps the trace context it was submitted with, well-formed.
    for task_id, traceparent in conn.execute("SELECT id, traceparent FROM tasks"):
        assert traceparent is None or is_stored_form(traceparent), (task_id, traceparent)
    removed = {r[0] for r in conn.execute("SELECT id FROM nodes WHERE status = 'removed'")}
    stranded = [t[0] for t in tasks if t[1] in ("assigned", "running") and t[4] in removed]
    assert not stranded, f"tasks left on removed nodes: {stranded}"
    orphans = conn.execute(
        "SELECT DISTINCT task_id FROM task_events WHERE task_id IS NOT NULL AND event != 'rejected'"
    ).fetchall()
    assert {o[0] for o in orphans} <= task_ids
    # The counters by state, type and node are the tasks counted.
    counted = conn.execute(
        "SELECT state, type, COALESCE(assigned_node, ''), COUNT(*) FROM tasks"
        " GROUP BY state, type, COALESCE(assigned_node, '')"
    ).fetchall()
    kept = conn.execute("SELECT state, type, node, n FROM task_counts WHERE n != 0").fetchall()
    assert sorted(map(tuple, kept)) == sorted(map(tuple, counted))
    # The memory promised to each node is its active tasks' minMemoryMb summed.
    promised = conn.execute(
        "SELECT assigned_node, SUM(json_extract(constraints, '$.min_memory_mb')) FROM tasks"
        " WHERE state IN ('assigned', 'running') AND assigned_node IS NOT NULL"
        " GROUP BY assigned_node HAVING SUM(json_extract(constraints, '$.min_memory_mb')) > 0"
    ).fetchall()
    kept = conn.execute("SELECT node, mb FROM node_memory WHERE mb != 0").fetchall()
    assert sorted(map(tuple, kept)) == sorted(map(tuple, promised))


# ---------------------------------------------------------------- the property


class GuardedMachine(StateMachine):
    """Applies every entry under a savepoint of its own, never first without:
    the reference for the machine's optimistic pass, which applies a batch
    without savepoints and starts over guarded only when an entry is refused."""

    def _apply_entries(self, cur, index, items, changes, guarded, plain_json):  # type: ignore[no-untyped-def]
        return super()._apply_entries(cur, index, items, changes, True, plain_json)


# A failing run shrinks for up to Hypothesis' own 300 s cap; let it report.
@pytest.mark.timeout(600)
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_generated_batches_apply_identically_and_keep_invariants(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path_a, path_b = os.path.join(tmp, "a.db"), os.path.join(tmp, "b.db")
        machine_a, machine_b = StateMachine(path_a), StateMachine(path_b)
        path_c = os.path.join(tmp, "c.db")
        machine_c = GuardedMachine(path_c)
        peek = sqlite3.connect(path_a)
        peek_b = sqlite3.connect(path_b)
        try:
            batches: list[Batch] = []
            index, counter = 0, [0]
            last_attempts: dict[tuple[str, int], int] = {}
            for _ in range(data.draw(st.integers(1, 20), label="batches")):
                index += data.draw(st.integers(1, 3))
                world = _read_world(peek)
                batch = _draw_batch(data, world, index, counter)
                batches.append(batch)

                result_a = machine_a.apply_batch(batch.index, batch.data)
                _check_results(peek, batch, result_a)
                _check_purged(world, _read_world(peek), result_a)
                _check_invariants(peek, last_attempts)
                assert machine_a.applied_index == batch.index

                result_b = machine_b.apply_batch(batch.index, batch.data)
                assert result_b == result_a
                assert machine_c.apply_batch(batch.index, batch.data) == result_a
                assert machine_c.digest() == machine_a.digest()
                if result_a and len(result_a) > 1 and not all(r["ok"] for r in result_a):
                    event("a batch had an entry refused among others")
                # Replaying applied indexes (the newest, and an earlier one) is a no-op.
                before = machine_b.digest()
                assert machine_b.apply_batch(batch.index, batch.data) is None
                earlier = data.draw(st.sampled_from(batches))
                assert machine_b.apply_batch(earlier.index, earlier.data) is None
                assert machine_b.digest() == before
                assert machine_b.applied_index == batch.index

            # (a) two fresh databases, same input: same digest, index and content.
            assert machine_a.digest() == machine_b.digest()
            # The digest kept up by apply is the one recomputed from every row.
            assert machine_a.digest() == state_digest(peek)
            assert machine_a.applied_index == machine_b.applied_index == index
            assert _dump_tables(peek) == _dump_tables(peek_b)
            peek_c = sqlite3.connect(path_c)
            try:
                assert _dump_tables(peek) == _dump_tables(peek_c)
            finally:
                peek_c.close()

            # (c) re-applying a prefix at the same indexes changes nothing.
            digest = machine_a.digest()
            prefix = batches[: data.draw(st.integers(1, len(batches)), label="prefix")]
            for batch in prefix:
                assert machine_a.apply_batch(batch.index, batch.data) is None
            assert machine_a.digest() == digest
            assert machine_a.applied_index == index

            # ...also after a restart, as pysyncobj replays its journal from the start.
            machine_a.close()
            machine_a = StateMachine(path_a)
            assert machine_a.applied_index == index
            for batch in batches:
                assert machine_a.apply_batch(batch.index, batch.data) is None
            assert machine_a.digest() == digest

            # (d) invariants on the final database.
            _check_invariants(peek, last_attempts)
            for (state,) in peek.execute("SELECT DISTINCT state FROM tasks"):
                event(f"a task ended {state}")
            for (name,) in peek.execute("SELECT DISTINCT event FROM task_events"):
                event(f"event {name} occurred")
        finally:
            peek.close()
            peek_b.close()
            machine_a.close()
            machine_b.close()
            machine_c.close()
