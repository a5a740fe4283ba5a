"""The public API's messages from Cortex's own state: enums from the
lower-case names SQLite keeps, times as Timestamps, spans as Durations,
free-form objects as Structs, one Event for every kind of event, filters
that refuse UNSPECIFIED, and writes that say the index they committed at.
Driven through the servicer over a real StateMachine (tests/api_harness.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import grpc
import pytest

from cortex.api.convert import spec_from_proto, spec_to_proto, task_to_proto
from cortex.proto_enums import enum_name, enum_names, enum_value
from cortex.spec import parse_task_spec
from cortex.state import entries as e
from cortex.state.queries import TaskView
from cortex.v1 import cortex_pb2 as pb
from cortex.workflows import ConditionOutcome
from tests.api_harness import Aborted, ApiState

SHELL = {"command": ["true"]}
# Every event name the state machine writes.
EVENT_NAMES = (
    "submitted", "assigned", "started", "completed", "failed", "retried", "requeued",
    "cancelled", "dead_lettered", "released", "skipped", "attempt_failed", "rejected",
    "purged", "node_joined", "node_left", "node_status", "workflow_received",
    "workflow_submitted", "workflow_completed", "workflow_failed", "workflow_cancelled",
    "context_updated", "context_update_rejected",
)  # fmt: skip


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiState]:
    state = ApiState(tmp_path)
    yield state
    state.close()


def refused(api: ApiState, method: str, request: object, stream: bool = False) -> Aborted:
    with pytest.raises(Aborted) as refusal:
        api.stream(method, request) if stream else api.call(method, request)
    return refusal.value


# -- enums ------------------------------------------------------------------------


def test_enum_names_follow_one_rule() -> None:
    assert enum_value(pb.TaskState, "dead_letter") == pb.TASK_STATE_DEAD_LETTER
    assert enum_name(pb.TaskState, pb.TASK_STATE_QUEUED) == "queued"
    assert enum_value(pb.NodeStatus, "draining") == pb.NODE_STATUS_DRAINING
    assert enum_value(pb.OutputStream, "stderr") == pb.OUTPUT_STREAM_STDERR
    assert enum_value(pb.RaftRole, "leader") == pb.RAFT_ROLE_LEADER
    for enum in (pb.TaskState, pb.WorkflowState, pb.NodeStatus, pb.EventType, pb.RaftRole):
        for name in enum_names(enum):
            assert enum_name(enum, enum_value(enum, name)) == name
    assert enum_value(pb.EventType, "something_newer") == pb.EVENT_TYPE_UNSPECIFIED
    assert enum_value(pb.TaskState, None) == enum_value(pb.TaskState, "") == 0
    assert enum_name(pb.TaskState, 0) == enum_name(pb.TaskState, 99) == ""
    unknown = [name for name in EVENT_NAMES if not enum_value(pb.EventType, name)]
    assert unknown == []


# -- specs and tasks --------------------------------------------------------------


def test_a_spec_travels_with_durations_and_a_struct_of_options() -> None:
    message = pb.TaskSpec(
        type="noop",
        timeout=timedelta(seconds=1.5),
        priority=7,
        retry_policy=pb.RetryPolicy(max_retries=2, backoff=timedelta(milliseconds=250)),
        options={"duration_ms": 5, "exit_code": 3},
        constraints=pb.Constraints(node_labels=["zone=a"], min_memory_mb=64),
    )
    spec = spec_from_proto(message)
    assert spec["timeoutMs"] == 1500 and spec["retryPolicy"] == {"maxRetries": 2, "backoffMs": 250}
    # Numbers with no fraction come back whole: noop takes only integers.
    assert spec["options"] == {"duration_ms": 5, "exit_code": 3}
    assert type(spec["options"]["duration_ms"]) is int
    stored = parse_task_spec(spec).model_dump(mode="json")
    back = spec_to_proto(stored)
    assert back.timeout.ToMilliseconds() == 1500 and back.priority == 7
    assert back.retry_policy.backoff.ToMilliseconds() == 250
    assert back.retry_policy.max_retries == 2 and back.retry_policy.backoff_multiplier == 2.0
    assert dict(back.options) == {"duration_ms": 5.0, "exit_code": 3.0}
    assert list(back.constraints.node_labels) == ["zone=a"]
    assert spec_from_proto(back)["options"] == {"duration_ms": 5, "exit_code": 3}
    unset = spec_to_proto(parse_task_spec({"command": "true"}).model_dump(mode="json"))
    assert not unset.HasField("timeout") and not unset.HasField("options")
    assert unset.shell == "true"


def test_a_spec_with_every_field_comes_back_as_it_was_sent() -> None:
    sent = pb.TaskSpec(
        type="noop",
        command=["echo", "hi"],
        env={"A": "1", "B": "2"},
        cwd="/tmp",
        timeout=timedelta(seconds=3),
        priority=9,
        labels={"team": "data"},
        constraints=pb.Constraints(
            requires_gpu=True,
            avoid_gaming=True,
            min_memory_mb=512,
            min_disk_gb=1.5,
            node_labels=["zone=a", "ssd"],
            target_node="n2",
            requires_capabilities={"cuda": "12"},
            allowed_nodes=["n1", "n2"],
            forbidden_nodes=["n3"],
            max_parallel_per_node=4,
        ),
        retry_policy=pb.RetryPolicy(
            max_retries=5,
            backoff=timedelta(milliseconds=750),
            backoff_multiplier=1.5,
            retryable=False,
        ),
        options={"duration_ms": 5},
        concurrency_key="db",
        fairness_key="tenant-7",
    )
    stored = parse_task_spec(spec_from_proto(sent)).model_dump(mode="json")
    assert spec_to_proto(stored) == sent
    shell = pb.TaskSpec(type="shell", shell="echo hi | wc -c", priority=5)
    back = spec_to_proto(parse_task_spec(spec_from_proto(shell)).model_dump(mode="json"))
    assert back.shell == "echo hi | wc -c" and not back.command


def test_a_task_reads_the_same_whatever_order_its_columns_come_in(api: ApiState) -> None:
    api.log.one(e.TaskSubmit("t1", SHELL, idempotency_key="k1"))
    api.log.one(e.TaskAssign([{"task_id": "t1", "node": "n1", "attempt": 1}]))
    api.log.one(e.TaskComplete("t1", 1, "n1", {"exit_code": 0, "stdout": "hi"}))
    conn = sqlite3.connect(api.log.machine.path)
    conn.row_factory = sqlite3.Row
    columns = [row[1] for row in conn.execute("PRAGMA table_info(tasks)")]
    forward = conn.execute("SELECT * FROM tasks WHERE id = 't1'").fetchone()
    backward = conn.execute(
        f"SELECT {', '.join(reversed(columns))} FROM tasks WHERE id = 't1'"
    ).fetchone()
    conn.close()
    view = TaskView.from_row(forward)
    assert TaskView.from_row(backward) == view
    assert (view.id, view.state, view.node, view.idempotency_key) == ("t1", "completed", "n1", "k1")
    assert view.result is not None and view.result["stdout"] == "hi"
    assert view.spec["command"] == ["true"] and view.attempt == 1


def test_a_task_carries_its_times_and_state(api: ApiState) -> None:
    api.log.one(e.TaskSubmit("t1", SHELL))
    api.log.one(e.TaskAssign([{"task_id": "t1", "node": "n1", "attempt": 1}]))
    task = api.log.reader.get_task("t1")
    assert task is not None
    message = task_to_proto(task)
    assert message.state == pb.TASK_STATE_ASSIGNED and message.node_id == "n1"
    assert message.create_time.ToMilliseconds() == task.created_at
    assert message.update_time.ToMilliseconds() == task.updated_at
    assert not message.HasField("start_time") and not message.HasField("finish_time")
    assert not message.HasField("result") and not message.HasField("schedule_time")
    api.log.one(e.TaskStarted("t1", 1, "n1"))
    api.log.one(e.TaskComplete("t1", 1, "n1", {"exit_code": 0, "stdout": "hi"}))
    done = api.log.reader.get_task("t1")
    assert done is not None and done.started_at and done.completed_at
    message = task_to_proto(done)
    assert message.start_time.ToMilliseconds() == done.started_at
    assert message.finish_time.ToMilliseconds() == done.completed_at
    assert message.result.stdout == b"hi" and message.state == pb.TASK_STATE_COMPLETED


# -- events -----------------------------------------------------------------------


def test_every_event_is_one_message_with_the_change_it_made(api: ApiState) -> None:
    api.log.one(e.TaskSubmit("t1", SHELL))
    api.log.one(e.NodeStatus("n2", "cordoned", "by hand"))
    api.log.one(e.TaskCancel("t1", "no longer needed"))
    got = api.call("GetTask", pb.GetTaskRequest(task_id="t1", include_events=True))
    assert got.task.state == pb.TASK_STATE_CANCELLED
    submitted, cancelled = got.events
    assert (
        submitted.type == pb.EVENT_TYPE_SUBMITTED
        and submitted.WhichOneof("change") == "task_change"
    )
    assert submitted.task_change.from_state == pb.TASK_STATE_UNSPECIFIED
    assert submitted.task_change.to_state == pb.TASK_STATE_QUEUED
    assert cancelled.task_change.to_state == pb.TASK_STATE_CANCELLED
    assert dict(cancelled.detail) == {"reason": "no longer needed"}
    assert cancelled.time.ToMilliseconds() > 0 and cancelled.entry_type == "TASK_CANCEL"
    assert got.header.node_id == "n1" and got.header.applied_index == api.log.index
    assert got.header.consistency == pb.READ_CONSISTENCY_SESSION

    watched = api.stream("WatchEvents", pb.WatchEventsRequest(
        from_start=True, types=[pb.EVENT_TYPE_NODE_STATUS]))  # fmt: skip
    (event,) = [w.event for w in watched]
    assert event.WhichOneof("change") == "node_change" and event.node_id == "n2"
    assert event.node_change.from_status == pb.NODE_STATUS_ACTIVE
    assert event.node_change.to_status == pb.NODE_STATUS_CORDONED
    joined = api.stream("WatchEvents", pb.WatchEventsRequest(
        from_start=True, types=[pb.EVENT_TYPE_NODE_JOINED]))  # fmt: skip
    assert len(joined) == 3 and joined[0].event.WhichOneof("change") is None

    # An attempt that failed moved nothing by itself; the retry did.
    api.log.one(e.TaskSubmit("t2", SHELL))
    api.log.one(e.TaskAssign([{"task_id": "t2", "node": "n1", "attempt": 1}]))
    api.log.one(e.TaskStarted("t2", 1, "n1"))
    api.log.one(e.TaskFailed("t2", 1, "n1", "exit code 1"))
    events = api.call("GetTask", pb.GetTaskRequest(task_id="t2", include_events=True)).events
    by_type = {event.type: event for event in events}
    assert by_type[pb.EVENT_TYPE_ATTEMPT_FAILED].WhichOneof("change") is None
    retried = by_type[pb.EVENT_TYPE_RETRIED].task_change
    assert (retried.from_state, retried.to_state) == (pb.TASK_STATE_RUNNING, pb.TASK_STATE_QUEUED)
    assert by_type[pb.EVENT_TYPE_ATTEMPT_FAILED].detail["reason"] == "exit code 1"


def test_workflow_events_and_tasks(api: ApiState) -> None:
    definition = (
        "name: pair\ncontext: {stage: 1}\ntasks:\n"
        '  a: {spec: {command: "true"}}\n'
        '  b: {spec: {command: "true"}, dependsOn: [a], condition: "false"}\n'
    )
    workflow_id, ids = api.log.submit(definition)
    api.log.one(e.TaskAssign([{"task_id": ids["a"], "node": "n1", "attempt": 1}]))
    api.log.one(e.TaskStarted(ids["a"], 1, "n1"))
    api.log.one(e.TaskComplete(ids["a"], 1, "n1", {"exit_code": 0}))
    api.log.settle(workflow_id, lambda items: [ConditionOutcome(False) for _ in items])
    got = api.call("GetWorkflow", pb.GetWorkflowRequest(workflow_id=workflow_id)).workflow
    assert got.state == pb.WORKFLOW_STATE_COMPLETED and dict(got.context) == {"stage": 1.0}
    a, b = got.tasks
    assert a.HasField("exit_code") and a.exit_code == 0 and a.start_time.ToMilliseconds() > 0
    assert b.state == pb.TASK_STATE_SKIPPED and not b.HasField("exit_code") and b.skip_reason
    assert got.finish_time.ToMilliseconds() > 0 and got.submit_index > 0
    counts = {c.state: c.count for c in got.task_counts}
    assert counts == {pb.TASK_STATE_COMPLETED: 1, pb.TASK_STATE_SKIPPED: 1}
    watched = api.stream("WatchEvents", pb.WatchEventsRequest(
        workflow_id=workflow_id, from_start=True,
        types=[pb.EVENT_TYPE_WORKFLOW_COMPLETED, pb.EVENT_TYPE_SKIPPED]))  # fmt: skip
    skipped, completed = (w.event for w in watched)
    assert skipped.task_change.to_state == pb.TASK_STATE_SKIPPED
    assert completed.workflow_id == workflow_id and not completed.task_id
    assert completed.workflow_change.from_state == pb.WORKFLOW_STATE_RUNNING
    assert completed.workflow_change.to_state == pb.WORKFLOW_STATE_COMPLETED


# -- filters ----------------------------------------------------------------------


def test_filters_refuse_unspecified_naming_the_field(api: ApiState) -> None:
    bad = refused(api, "ListTasks", pb.ListTasksRequest(states=[pb.TASK_STATE_UNSPECIFIED]))
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and bad.message.startswith("states:")
    bad = refused(api, "ListWorkflows", pb.ListWorkflowsRequest(states=[0]))  # type: ignore[list-item]
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and bad.message.startswith("states:")
    unspecified = pb.WatchEventsRequest(types=[0])  # type: ignore[list-item]
    bad = refused(api, "WatchEvents", unspecified, stream=True)
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and bad.message.startswith("types:")
    bad = refused(api, "ListTasks", pb.ListTasksRequest(order=7))  # type: ignore[arg-type]
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and "order" in bad.message
    api.log.one(e.TaskSubmit("t1", SHELL))
    queued = api.call("ListTasks", pb.ListTasksRequest(states=[pb.TASK_STATE_QUEUED]))
    assert [t.id for t in queued.tasks] == ["t1"]
    assert not api.call("ListTasks", pb.ListTasksRequest(states=[pb.TASK_STATE_RUNNING])).tasks


# -- writes -----------------------------------------------------------------------


def test_writes_say_the_index_they_committed_at(api: ApiState) -> None:
    submitted = api.call("SubmitTask", pb.SubmitTaskRequest(
        spec=pb.TaskSpec(command=["true"]), idempotency_key="k1"))  # fmt: skip
    assert submitted.created and submitted.task.state == pb.TASK_STATE_QUEUED
    assert submitted.commit_index == api.log.index == submitted.task.submit_index
    assert submitted.header.applied_index >= submitted.commit_index
    assert submitted.header.consistency == pb.READ_CONSISTENCY_UNSPECIFIED
    task_id = submitted.task.id
    again = api.call("SubmitTask", pb.SubmitTaskRequest(
        spec=pb.TaskSpec(command=["true"]), idempotency_key="k1"))  # fmt: skip
    assert not again.created and again.task.id == task_id
    assert again.commit_index == submitted.commit_index

    api.log.one(e.TaskSubmit("other", SHELL))
    cancelled = api.call("CancelTask", pb.CancelTaskRequest(task_id=task_id))
    assert cancelled.task.state == pb.TASK_STATE_CANCELLED
    assert (
        cancelled.commit_index == api.log.index and cancelled.header.applied_index == api.log.index
    )

    api.log.one(e.TaskDeadLetter("other", 0, "out of retries"))
    retried = api.call("RetryDeadLetterTask", pb.RetryDeadLetterTaskRequest(task_id="other"))
    assert retried.task.state == pb.TASK_STATE_QUEUED and retried.commit_index == api.log.index

    flow = api.call("SubmitWorkflow", pb.SubmitWorkflowRequest(
        definition='name: w\ntasks:\n  a: {spec: {command: "true"}}\n',
        format=pb.DEFINITION_FORMAT_YAML))  # fmt: skip
    assert flow.created and flow.commit_index == api.log.index
    stop = api.call("CancelWorkflow", pb.CancelWorkflowRequest(workflow_id=flow.workflow_id))
    assert stop.workflow.state == pb.WORKFLOW_STATE_CANCELLED
    assert stop.commit_index == api.log.index
    unknown = pb.SubmitWorkflowRequest(definition="x", format=9)  # type: ignore[arg-type]
    bad = refused(api, "SubmitWorkflow", unknown)
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and "format" in bad.message


def test_a_result_wait_takes_a_duration(api: ApiState) -> None:
    api.log.one(e.TaskSubmit("t1", SHELL))
    got = api.call("GetTaskResult", pb.GetTaskResultRequest(
        task_id="t1", wait=True, timeout=timedelta(milliseconds=50)))  # fmt: skip
    assert got.task.state == pb.TASK_STATE_QUEUED  # not terminal: returned as it is
    too_long = pb.GetTaskResultRequest(task_id="t1", wait=True, timeout=timedelta(hours=1))
    bad = refused(api, "GetTaskResult", too_long)
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and "timeout" in bad.message
