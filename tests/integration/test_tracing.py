"""OpenTelemetry traces across a real 3-node cluster whose every node writes
its spans to a file of its own (`--otel-exporter file:PATH`): a task
submitted to one node with a client's traceparent and run on another, its
first attempt failing and its retry succeeding, is one trace (the submit
span on the first node; each attempt's span on the second, a child of the
submit span and linked to it); the task's process sees TRACEPARENT in that
trace; `cortex task get --json` shows the task's context. A workflow's run
is one span, recorded once, the parent of its attempts and conditions."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration

from cortex.state.traceparent import TraceParent
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, serve_cluster, shell_spec, wait_until

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
CLIENT = TraceParent("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 1)


@pytest.fixture(scope="module")
def traced(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    """A cluster whose nodes each write their spans to `spans/<node>.jsonl`."""
    root = tmp_path_factory.mktemp("tracing")
    cluster = Cluster(root, 3)
    for node in cluster.nodes:
        node.extra_args += ["--otel-exporter", f"file:{root / 'spans' / node.node_id}.jsonl"]
    yield from serve_cluster(cluster, request)


def spans_of(cluster: Cluster, trace_id: str) -> list[dict[str, Any]]:
    """Every span of the trace written so far, each with the node whose file
    held it (`node`)."""
    found = []
    for node in cluster.nodes:
        path = cluster.root / "spans" / f"{node.node_id}.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if not line.endswith("}"):
                continue  # a line still being written
            span = json.loads(line)
            if span["trace_id"] == trace_id:
                found.append({**span, "node": node.node_id})
    return found


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [span for span in spans if span["name"] == name]


def links(span: dict[str, Any]) -> list[tuple[str, str]]:
    return [(link["trace_id"], link["span_id"]) for link in span["links"]]


def test_a_retried_task_is_one_trace_from_its_submission_through_every_attempt(
    traced: Cluster, tmp_path: Path
) -> None:
    submitter, runner = traced.nodes[0], traced.nodes[1]
    marker, seen = tmp_path / "first-attempt-ran", tmp_path / "seen"
    # Fails while the marker is absent (creating it), then succeeds.
    command = (
        f'echo "$CORTEX_ATTEMPT $TRACEPARENT" >> {seen}; '
        f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 3"
    )
    spec = shell_spec(
        command,
        constraints=pb.Constraints(target_node=runner.node_id),
        retry_policy=pb.RetryPolicy(max_retries=2, backoff=Duration(nanos=100_000_000)),
    )
    with submitter.client() as client:
        task_id = client.submit_task(spec, traceparent=str(CLIENT)).task.id
        task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
    assert task.state == pb.TASK_STATE_COMPLETED, task
    assert (task.attempt, task.node_id) == (2, runner.node_id)
    kept = TraceParent.parse(task.traceparent)
    assert kept is not None and kept.trace_id == CLIENT.trace_id

    def all_three() -> list[dict[str, Any]] | None:
        spans = spans_of(traced, CLIENT.trace_id)
        mine = [s for s in spans if s["attributes"].get("cortex.task.id") == task_id]
        return mine if len(mine) >= 3 else None

    spans = wait_until(all_three, 30, what="the submit span and both attempts' spans")
    (submit,) = named(spans, "submit task")
    attempts = sorted(
        named(spans, "run task"), key=lambda s: s["attributes"]["cortex.task.attempt"]
    )
    assert len(spans) == 3 and len(attempts) == 2

    assert (submit["node"], submit["kind"]) == (submitter.node_id, "PRODUCER")
    assert submit["parent_span_id"] == CLIENT.span_id
    assert submit["span_id"] == kept.span_id  # the task keeps its submit span's context
    assert submit["attributes"]["cortex.node.id"] == submitter.node_id

    for number, attempt in enumerate(attempts, start=1):
        assert (attempt["node"], attempt["kind"]) == (runner.node_id, "CONSUMER")
        assert attempt["parent_span_id"] == submit["span_id"]
        assert links(attempt) == [(CLIENT.trace_id, submit["span_id"])]
        assert attempt["attributes"]["cortex.task.attempt"] == number
        assert attempt["attributes"]["cortex.node.id"] == runner.node_id
        assert attempt["attributes"]["cortex.executor.type"] == "shell"
        assert attempt["attributes"]["messaging.operation.type"] == "process"
    failed, succeeded = attempts
    assert failed["status"]["code"] == "ERROR" and "exit code 3" in failed["status"]["description"]
    assert failed["attributes"]["process.exit.code"] == 3
    assert succeeded["status"]["code"] == "UNSET"
    assert succeeded["attributes"]["process.exit.code"] == 0
    assert succeeded["start_time_unix_nano"] >= failed["end_time_unix_nano"]

    # Each attempt's process saw its own span's context.
    lines = seen.read_text().split("\n")
    assert lines[:2] == [
        f"1 00-{CLIENT.trace_id}-{failed['span_id']}-01",
        f"2 00-{CLIENT.trace_id}-{succeeded['span_id']}-01",
    ]

    shown = subprocess.run(
        [sys.executable, "-m", "cortex.cli.main", "--node", traced.nodes[2].grpc,
         "task", "get", task_id, "--json"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["traceparent"] == task.traceparent


def test_a_workflow_run_is_one_span_parent_of_its_attempts_and_conditions(
    traced: Cluster,
) -> None:
    definition = (
        "name: traced\n"
        "tasks:\n"
        '  build: {spec: {command: "true"}}\n'
        "  report: {spec: {type: noop}, dependsOn: [build],"
        " condition: 'parent.build.exitCode === 0'}\n"
    )
    client_context = CLIENT.child()
    submitter = traced.nodes[2]
    with submitter.client() as client:
        workflow_id = client.submit_workflow(
            definition, pb.DEFINITION_FORMAT_YAML, traceparent=str(client_context)
        ).workflow_id
        workflow = wait_until(
            lambda: (
                (w := client.get_workflow(workflow_id).workflow).state
                == pb.WORKFLOW_STATE_COMPLETED
                and w
            ),
            60,
            what="the workflow to complete",
        )
        build = client.get_task(next(t.task_id for t in workflow.tasks if t.key == "build")).task
    run = TraceParent.parse(build.traceparent)
    assert run is not None and run.trace_id == CLIENT.trace_id

    def whole() -> list[dict[str, Any]] | None:
        spans = [
            s
            for s in spans_of(traced, CLIENT.trace_id)
            if s["attributes"].get("cortex.workflow.id") == workflow_id
            or s["parent_span_id"] == run.span_id
        ]
        names = [s["name"] for s in spans]
        wanted = ("submit workflow", "run workflow", "evaluate condition")
        return spans if all(n in names for n in wanted) and names.count("run task") >= 2 else None

    spans = wait_until(whole, 30, what="the workflow's spans")
    (submit,) = named(spans, "submit workflow")
    assert submit["node"] == submitter.node_id and submit["kind"] == "PRODUCER"
    assert submit["parent_span_id"] == client_context.span_id
    assert workflow.traceparent == f"00-{CLIENT.trace_id}-{submit['span_id']}-01"

    (whole_run,) = named(spans, "run workflow")  # once, by the leader of the moment
    assert whole_run["span_id"] == run.span_id
    assert whole_run["parent_span_id"] == submit["span_id"]
    assert whole_run["attributes"]["cortex.workflow.state"] == "completed"
    assert whole_run["start_time_unix_nano"] == workflow.create_time.ToNanoseconds()
    assert whole_run["end_time_unix_nano"] == workflow.finish_time.ToNanoseconds()

    for span in named(spans, "run task") + named(spans, "evaluate condition"):
        assert span["parent_span_id"] == run.span_id, span
    (condition, *_) = named(spans, "evaluate condition")
    assert condition["attributes"]["cortex.workflow.task_key"] == "report"
    assert condition["attributes"]["cortex.condition.outcome"] == "true"
