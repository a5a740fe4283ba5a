"""The spans a node records and the contexts it keeps, without a cluster:
submissions through the servicer (tracing off: the client's context is
kept as sent; on: a PRODUCER span, its child, is), attempts as CONSUMER
spans that are children of and linked to their task's context, spans
recorded after the fact with the span id chosen at submission, and the
workflow run span, recorded once by the node that led when its workflow
ended. Spans are read back from the JSON-lines file exporter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.api.views import task_json, workflow_json
from cortex.state import entries as e
from cortex.state.traceparent import TraceParent, is_stored_form
from cortex.tracing import NO_TRACING, Tracer, build_tracer
from cortex.tracing.spans import Attributes
from cortex.v1 import cortex_pb2 as pb
from cortex.workflows.run_spans import WorkflowRunSpans
from tests.api_harness import ApiState
from tests.workflow_sim import WorkflowLog

CLIENT = TraceParent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 1)
FLOW = (
    'name: w\ntasks:\n  a: {spec: {command: "true"}}\n  b: {spec: {type: noop}, dependsOn: [a]}\n'
)


def spans_in(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def span_file(tmp_path: Path) -> Path:
    return tmp_path / "spans.jsonl"


@pytest.fixture
def tracer(span_file: Path) -> Iterator[Tracer]:
    recording = build_tracer(f"file:{span_file}", "n1")
    yield recording
    recording.shutdown()


def _submit(api: ApiState, traceparent: str | None = None) -> pb.Task:
    metadata = (("traceparent", traceparent),) if traceparent is not None else ()
    request = pb.SubmitTaskRequest(spec=pb.TaskSpec(command=["true"]))
    return api.call("SubmitTask", request, metadata).task


# -- tracing off --------------------------------------------------------------------


def test_off_a_task_keeps_the_clients_context_as_sent(tmp_path: Path) -> None:
    api = ApiState(tmp_path)
    try:
        task = _submit(api, str(CLIENT))
        assert task.traceparent == str(CLIENT)
        assert task_json(task)["traceparent"] == str(CLIENT)
        stored = api.log.reader.get_task(task.id)
        assert stored is not None and stored.traceparent == str(CLIENT)
    finally:
        api.close()


@pytest.mark.parametrize("sent", [None, "", "garbage", str(CLIENT).upper(), f"ff{str(CLIENT)[2:]}"])
def test_off_without_a_valid_context_a_task_starts_a_trace(
    tmp_path: Path, sent: str | None
) -> None:
    api = ApiState(tmp_path)
    try:
        task = _submit(api, sent)
        assert is_stored_form(task.traceparent)
        assert TraceParent.parse(task.traceparent).trace_id != CLIENT.trace_id  # type: ignore[union-attr]
    finally:
        api.close()


def test_off_a_workflows_tasks_keep_its_runs_context(tmp_path: Path) -> None:
    api = ApiState(tmp_path)
    try:
        submitted = api.call(
            "SubmitWorkflow",
            pb.SubmitWorkflowRequest(definition=FLOW, format=pb.DEFINITION_FORMAT_YAML),
            (("traceparent", str(CLIENT)),),
        )
        workflow = api.call(
            "GetWorkflow", pb.GetWorkflowRequest(workflow_id=submitted.workflow_id)
        ).workflow
        assert workflow.traceparent == str(CLIENT)
        assert workflow_json(workflow)["traceparent"] == str(CLIENT)
        view = api.log.reader.get_workflow(submitted.workflow_id)
        assert view is not None and view.run_traceparent is not None
        run = TraceParent.parse(view.run_traceparent)
        assert run is not None and run.trace_id == CLIENT.trace_id != run.span_id
        for task in view.tasks:
            stored = api.log.reader.get_task(task.task_id)
            assert stored is not None and stored.traceparent == view.run_traceparent
    finally:
        api.close()


def test_off_an_attempt_passes_on_its_tasks_context() -> None:
    assert NO_TRACING.attempt(str(CLIENT), "t1", 1, "shell").traceparent == str(CLIENT)
    assert NO_TRACING.attempt(None, "t1", 1, "shell").traceparent is None


# -- tracing on ---------------------------------------------------------------------


def test_on_a_task_keeps_its_submit_spans_context(
    tmp_path: Path, tracer: Tracer, span_file: Path
) -> None:
    api = ApiState(tmp_path, tracer)
    try:
        task = _submit(api, str(CLIENT))
    finally:
        api.close()
    (span,) = spans_in(span_file)
    kept = TraceParent.parse(task.traceparent)
    assert kept is not None
    assert (span["name"], span["kind"]) == ("submit task", "PRODUCER")
    assert span["trace_id"] == CLIENT.trace_id == kept.trace_id
    assert span["parent_span_id"] == CLIENT.span_id and span["span_id"] == kept.span_id
    attributes = span["attributes"]
    assert attributes["messaging.system"] == "cortex"
    assert attributes["messaging.operation.type"] == "send"
    assert attributes["messaging.message.id"] == attributes["cortex.task.id"] == task.id
    assert attributes["cortex.task.created"] is True and attributes["cortex.node.id"] == "n1"
    assert span["resource"]["service.name"] == "cortex"


def test_on_a_workflow_submit_span_is_the_parent_of_its_runs_context(
    tmp_path: Path, tracer: Tracer, span_file: Path
) -> None:
    api = ApiState(tmp_path, tracer)
    try:
        submitted = api.call(
            "SubmitWorkflow", pb.SubmitWorkflowRequest(definition=FLOW), ()
        )  # no client context: a new trace
        view = api.log.reader.get_workflow(submitted.workflow_id)
    finally:
        api.close()
    (span,) = spans_in(span_file)
    assert (span["name"], span["kind"], span["parent_span_id"]) == (
        "submit workflow", "PRODUCER", None)  # fmt: skip
    assert span["attributes"]["messaging.batch.message_count"] == 2
    assert view is not None
    kept = TraceParent.parse(view.traceparent)
    assert kept is not None and kept.sampled
    assert (kept.trace_id, kept.span_id) == (span["trace_id"], span["span_id"])
    run = TraceParent.parse(view.run_traceparent)
    assert run is not None and run.trace_id == span["trace_id"] and run.span_id != span["span_id"]


def test_on_an_attempt_is_a_child_of_and_linked_to_its_tasks_context(
    tracer: Tracer, span_file: Path
) -> None:
    first = tracer.attempt(str(CLIENT), "t1", 1, "shell")
    first.end(error="exit code 1", attributes={"process.exit.code": 1})
    second = tracer.attempt(str(CLIENT), "t1", 2, "shell")
    second.end(attributes={"process.exit.code": 0})
    failed, succeeded = spans_in(span_file)
    for span, attempt in ((failed, 1), (succeeded, 2)):
        assert (span["name"], span["kind"]) == ("run task", "CONSUMER")
        assert span["trace_id"] == CLIENT.trace_id
        assert span["parent_span_id"] == CLIENT.span_id
        assert [(link["trace_id"], link["span_id"]) for link in span["links"]] == [
            (CLIENT.trace_id, CLIENT.span_id)
        ]
        assert span["attributes"]["cortex.task.attempt"] == attempt
        assert span["attributes"]["messaging.operation.type"] == "process"
        assert span["attributes"]["cortex.executor.type"] == "shell"
    assert failed["status"] == {"code": "ERROR", "description": "exit code 1"}
    assert failed["attributes"]["process.exit.code"] == 1
    assert succeeded["status"]["code"] == "UNSET"
    assert first.traceparent == f"00-{CLIENT.trace_id}-{failed['span_id']}-01"


def test_on_a_span_recorded_later_takes_the_span_id_chosen_before(
    tracer: Tracer, span_file: Path
) -> None:
    run = CLIENT.child()
    tracer.record("run workflow", str(CLIENT), 1_000_000, 5_000_000, {"k": "v"},
                  error="failed", context=str(run))  # fmt: skip
    tracer.record("loose", None, 1, 2, {})
    recorded, loose = spans_in(span_file)
    assert (recorded["trace_id"], recorded["span_id"]) == (CLIENT.trace_id, run.span_id)
    assert recorded["parent_span_id"] == CLIENT.span_id
    assert (recorded["start_time_unix_nano"], recorded["end_time_unix_nano"]) == (
        1_000_000, 5_000_000)  # fmt: skip
    assert recorded["status"]["code"] == "ERROR" and recorded["kind"] == "INTERNAL"
    assert loose["parent_span_id"] is None and loose["span_id"] != run.span_id


# -- the workflow run span ------------------------------------------------------------


class Recorder(Tracer):
    enabled = True

    def __init__(self) -> None:
        self.spans: list[tuple[str, str | None, int, int, dict[str, Any], str | None, str | None]]
        self.spans = []

    def record(
        self,
        name: str,
        parent: str | None,
        start_ns: int,
        end_ns: int,
        attributes: Attributes,
        error: str | None = None,
        context: str | None = None,
    ) -> None:
        self.spans.append((name, parent, start_ns, end_ns, dict(attributes), error, context))


def _flow(log: WorkflowLog, workflow_id: str, run: TraceParent) -> str:
    item = {"key": "a", "task_id": f"{workflow_id}-a", "spec": {"type": "noop"},
            "depends_on": [], "condition": None, "pos": 0}  # fmt: skip
    assert log.one(e.WorkflowSubmit(workflow_id, "flow", [item], traceparent=str(CLIENT),
                                    run_traceparent=str(run)))["ok"]  # fmt: skip
    return f"{workflow_id}-a"


def test_the_run_span_is_recorded_once_by_the_node_leading_when_it_ended(
    tmp_path: Path,
) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    recorder, leading = Recorder(), [True]
    spans = WorkflowRunSpans(recorder, log.reader, lambda: leading[0])
    log.machine.add_listener(spans.on_change)
    cursor = spans.round(log.reader.last_event_seq())
    try:
        run = CLIENT.child()
        log.complete(_flow(log, "led", run))
        leading[0] = False
        other = _flow(log, "followed", CLIENT.child())
        log.complete(other)
        cursor = spans.round(cursor)
        assert spans.round(cursor) == cursor  # nothing more, nothing twice
    finally:
        log.close()
    (span,) = recorder.spans
    name, parent, start_ns, end_ns, attributes, error, context = span
    workflow = log.reader.get_workflow("led")
    assert workflow is not None and workflow.completed_at is not None
    assert (name, parent, context, error) == ("run workflow", str(CLIENT), str(run), None)
    assert (start_ns, end_ns) == (workflow.created_at * 10**6, workflow.completed_at * 10**6)
    assert attributes == {"cortex.workflow.id": "led", "cortex.workflow.name": "flow",
                          "cortex.workflow.state": "completed"}  # fmt: skip


def test_a_failed_run_is_an_error_and_a_snapshot_moves_the_reading_on(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    recorder = Recorder()
    spans = WorkflowRunSpans(recorder, log.reader, lambda: True)
    log.machine.add_listener(spans.on_change)
    try:
        cursor = spans.round(0)
        log.complete(_flow(log, "broken", CLIENT.child()), exit_code=1)
        spans.on_change(log.index, [])  # as after a snapshot: nothing before it is recorded
        log.complete(_flow(log, "after", CLIENT.child()))
        spans.round(cursor)
    finally:
        log.close()
    assert [span[4]["cortex.workflow.id"] for span in recorder.spans] == ["after"]


def test_on_each_task_of_a_batch_has_a_submit_span_of_its_own(
    tmp_path: Path, tracer: Tracer, span_file: Path
) -> None:
    api = ApiState(tmp_path, tracer)
    try:
        request = pb.SubmitTasksRequest(
            tasks=[pb.SubmitTaskRequest(spec=pb.TaskSpec(type="noop")) for _ in range(3)]
        )
        results = api.call("SubmitTasks", request, (("traceparent", str(CLIENT)),)).results
    finally:
        api.close()
    spans = {span["span_id"]: span for span in spans_in(span_file)}
    assert len(spans) == 3
    for result in results:
        kept = TraceParent.parse(result.task.traceparent)
        assert kept is not None and kept.trace_id == CLIENT.trace_id
        span = spans[kept.span_id]
        assert span["parent_span_id"] == CLIENT.span_id
        assert span["attributes"]["cortex.task.id"] == result.task.id
