"""Workflow and retry semantics on a real 3-node cluster (separate processes,
loopback TCP, real SQLite, real V8): what a condition may name, every
problem of a definition at once, dead letters failing their workflow and
retried on their own, `maxRetries: 0` failing without the dead-letter
queue, idempotency keys reused for something else, and a fan-out that
leaves no rejected entry behind."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from cortex.errors import FailedPrecondition, InvalidArgument
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.cluster import Cluster, ClusterNode, shared_cluster, shell_spec, state_rows, wait_until

pytestmark = pytest.mark.cluster

TERMINAL = (pb.WORKFLOW_STATE_COMPLETED, pb.WORKFLOW_STATE_FAILED, pb.WORKFLOW_STATE_CANCELLED)
FLAKY = {"maxRetries": 1, "backoffMs": 0}


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "semantics")


def _submit(client: Any, definition: dict[str, Any], key: str = "") -> str:
    text = json.dumps(definition)
    return client.submit_workflow(text, pb.DEFINITION_FORMAT_JSON, key).workflow_id


def _wait(client: Any, workflow_id: str, timeout: float = 60) -> pb.Workflow:
    return wait_until(
        lambda: (w := client.get_workflow(workflow_id).workflow).state in TERMINAL and w,
        timeout,
        what=f"workflow {workflow_id} to end",
    )


def _tasks(workflow: pb.Workflow) -> dict[str, pb.WorkflowTask]:
    return {t.key: t for t in workflow.tasks}


def _refused(node: ClusterNode, definition: dict[str, Any]) -> str:
    with node.client() as client, pytest.raises(InvalidArgument) as info:
        _submit(client, definition)
    return str(info.value)


def _unchanged(cluster: Cluster, node: ClusterNode, check: Any) -> None:
    """`check()` writes nothing: the node's applied index and digest stay."""
    cluster.wait_converged()
    before = node.status()
    check()
    after = node.status()
    assert (after.applied_index, after.state_digest) == (before.applied_index, before.state_digest)


def _rejected(node: ClusterNode, first_index: int) -> list[tuple[int, str]]:
    """Rejections recorded from Raft index `first_index` on, from the node's SQLite file."""
    return state_rows(
        node,
        "SELECT raft_index, detail FROM task_events WHERE event = 'rejected'"
        " AND raft_index >= ? ORDER BY seq",
        (first_index,),
    )


def test_a_condition_naming_an_unknown_task_is_refused_at_submit(cluster):
    definition = {
        "name": "typo",
        "tasks": {
            "build": {"type": "noop"},
            "deploy": {
                "type": "noop",
                "dependsOn": ["build"],
                "condition": "parent.biuld.exitCode === 0",
            },
        },
    }
    node = cluster.nodes[1]
    _unchanged(cluster, node, lambda: _refused(node, definition))
    message = _refused(node, definition)
    assert (
        "tasks.deploy.condition: parent.biuld names no task of the workflow (did you mean"
        " 'build'?)" in message
    )


def test_a_condition_naming_a_task_it_does_not_depend_on_is_refused(cluster):
    definition = {
        "name": "sibling",
        "tasks": {
            "build": {"type": "noop"},
            "lint": {"type": "noop"},
            "deploy": {
                "type": "noop",
                "dependsOn": ["build"],
                "condition": "parent.build.exitCode === 0 && parent['lint'].state === 'completed'",
            },
        },
    }
    message = _refused(cluster.nodes[0], definition)
    assert (
        "tasks.deploy.condition: parent['lint'] names task 'lint', which 'deploy' does not"
        " depend on" in message
    )
    # Upstream through another task is seen, and so accepted.
    definition["tasks"]["build"]["dependsOn"] = ["lint"]
    with cluster.nodes[0].client() as client:
        workflow = _wait(client, _submit(client, definition))
    assert workflow.state == pb.WORKFLOW_STATE_COMPLETED


def test_every_problem_of_a_definition_is_reported_at_once(cluster):
    definition = {
        "name": "many",
        "tasks": {
            "a": {"spec": {"command": "x"}, "dependsOn": "b", "extra": 1},
            "b": {"type": "weird", "dependsOn": ["zz"]},
            "c": {"type": "noop", "priority": 50, "dependsOn": ["d"]},
            "d": {"type": "noop", "dependsOn": ["c"], "condition": "parent.a.state"},
        },
    }
    node = cluster.nodes[2]
    _unchanged(cluster, node, lambda: _refused(node, definition))
    message = _refused(node, definition)
    assert message.startswith("invalid workflow definition (7 problems): ")
    for problem in (
        "tasks.a.dependsOn: Input should be a valid list",
        "tasks.a.extra: Extra inputs are not permitted",
        "tasks.b.type: unknown task type 'weird'",
        "tasks.b.dependsOn: unknown task 'zz'",
        "tasks.c.spec.priority: Input should be less than or equal to 10",
        "tasks: dependency cycle c -> d -> c",
        "tasks.d.condition: parent.a names task 'a', which 'd' does not depend on",
    ):
        assert problem in message, (problem, message)


def test_a_condition_that_throws_fails_its_task_and_the_workflow(cluster):
    definition = {
        "name": "throws",
        "tasks": {
            "build": {"type": "noop"},
            "deploy": {
                "type": "noop",
                "dependsOn": ["build"],
                # A computed key cannot be checked at submit; at run time it throws.
                "condition": "parent[workflow.context.which].exitCode === 0",
            },
            "notify": {"type": "noop", "dependsOn": ["deploy"]},
        },
    }
    with cluster.nodes[0].client() as client:
        workflow = _wait(client, _submit(client, definition))
        tasks = _tasks(workflow)
        deploy = client.get_task(tasks["deploy"].task_id).task
    assert workflow.state == pb.WORKFLOW_STATE_FAILED
    assert tasks["deploy"].state == pb.TASK_STATE_FAILED
    assert tasks["notify"].state == pb.TASK_STATE_SKIPPED
    assert deploy.error.startswith("condition threw TypeError: Cannot read properties of undefined")
    assert workflow.error.startswith(
        "tasks did not succeed: deploy failed (condition threw TypeError"
    )


def test_a_dead_lettered_task_fails_its_workflow_and_retried_runs_on_its_own(cluster):
    marker = cluster.root / "second-try"
    definition = {
        "name": "flaky",
        "tasks": {
            "flaky": {
                # Fails until the marker exists.
                "spec": {"command": f"test -e {marker}", "retryPolicy": FLAKY},
            },
            "after": {"type": "noop", "dependsOn": ["flaky"]},
        },
    }
    node = cluster.nodes[1]
    with node.client() as client:
        workflow = _wait(client, _submit(client, definition))
        tasks = _tasks(workflow)
        assert tasks["flaky"].state == pb.TASK_STATE_DEAD_LETTER
        assert tasks["after"].state == pb.TASK_STATE_SKIPPED
        assert workflow.state == pb.WORKFLOW_STATE_FAILED
        assert workflow.error == "tasks did not succeed: flaky dead_letter (exit code 1)"
        dead = {t.id for t in client.list_dead_letter_tasks(page_size=1000).tasks}
        assert tasks["flaky"].task_id in dead

        marker.write_text("")
        # Through the CLI, by a prefix of the id: it says what the retry granted.
        flaky_id = tasks["flaky"].task_id
        said = subprocess.run(
            [sys.executable, "-m", "cortex", "dlq", "retry", flaky_id[:10], "--node", node.grpc],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert said.returncode == 0, said.stderr
        assert said.stdout == (
            f"{flaky_id} queued again with a fresh retry budget (1 retry); workflow "
            f"{workflow.id} stays failed: the task runs on its own and does not change it\n"
        )
        retried = client.get_task(flaky_id).task
        assert retried.state in (pb.TASK_STATE_QUEUED, pb.TASK_STATE_ASSIGNED,
                                 pb.TASK_STATE_RUNNING, pb.TASK_STATE_COMPLETED)  # fmt: skip
        assert retried.workflow_id == workflow.id
        assert retried.spec.retry_policy.max_retries == 1  # the fresh budget
        events = client.get_task(retried.id, include_events=True).events
        detail = dict([e for e in events if e.type == pb.EVENT_TYPE_RETRIED][-1].detail)
        assert detail["from_dead_letter"] is True and detail["rejoined"] is False
        assert detail["workflow_state"] == "failed" and detail["retry_budget"] == 1
        done = client.get_task_result(retried.id, wait=True, timeout_ms=30_000).task
        assert done.state == pb.TASK_STATE_COMPLETED
        after = client.get_workflow(workflow.id).workflow
    # The workflow stays as it ended.
    assert after.state == pb.WORKFLOW_STATE_FAILED and after.error == workflow.error
    assert _tasks(after)["after"].state == pb.TASK_STATE_SKIPPED


def test_a_dead_letter_of_a_cancelled_workflow_is_not_retried(cluster):
    definition = {
        "name": "cancelled",
        "tasks": {
            "flaky": {"spec": {"command": "exit 1", "retryPolicy": FLAKY}},
            "slow": {"spec": {"command": "sleep 60"}},
        },
    }
    with cluster.nodes[2].client() as client:
        workflow_id = _submit(client, definition)
        flaky = wait_until(
            lambda: (
                (t := _tasks(client.get_workflow(workflow_id).workflow)["flaky"]).state
                == pb.TASK_STATE_DEAD_LETTER
                and t
            ),
            30,
            what="flaky dead-lettered",
        )
        client.cancel_workflow(workflow_id, "no longer needed")
        with pytest.raises(FailedPrecondition, match="which is cancelled"):
            client.retry_dead_letter_task(flaky.task_id)


def test_zero_retries_fail_a_task_without_the_dead_letter_queue(cluster):
    with cluster.nodes[0].client() as client:
        spec = shell_spec("exit 3")
        spec.retry_policy.max_retries = 0
        task_id = client.submit_task(spec).task.id
        task = client.get_task_result(task_id, wait=True, timeout_ms=30_000).task
        assert task.state == pb.TASK_STATE_FAILED and task.error == "exit code 3"
        definition = {
            "name": "no-retries",
            "tasks": {
                "once": {"spec": {"command": "exit 2", "retryPolicy": {"maxRetries": 0}}},
            },
        }
        workflow = _wait(client, _submit(client, definition))
        once = _tasks(workflow)["once"]
        dead = {t.id for t in client.list_dead_letter_tasks(page_size=1000).tasks}
    assert once.state == pb.TASK_STATE_FAILED and workflow.state == pb.WORKFLOW_STATE_FAILED
    assert task_id not in dead and once.task_id not in dead


def test_an_idempotency_key_reused_for_another_task_is_refused(cluster):
    node = cluster.nodes[1]
    with node.client() as client:
        first = client.submit_task(shell_spec("echo one"), "order-7").task
        # The same spec again: the same task.
        again = client.submit_task(shell_spec("echo one"), "order-7")
        assert again.task.id == first.id and not again.created
    with grpc.insecure_channel(node.grpc) as channel:
        stub = pb_grpc.CortexServiceStub(channel)
        request = pb.SubmitTaskRequest(spec=shell_spec("echo two"), idempotency_key="order-7")
        with pytest.raises(grpc.RpcError) as info:
            stub.SubmitTask(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert info.value.details() == (
        f"idempotency key 'order-7' is already used by task {first.id}, submitted with a"
        " different spec"
    )


def test_an_idempotency_key_reused_for_another_workflow_is_refused(cluster):
    definition = {"name": "keyed", "tasks": {"a": {"type": "noop"}}}
    node = cluster.nodes[2]
    with node.client() as client:
        workflow_id = _submit(client, definition, "flow-7")
        assert _submit(client, definition, "flow-7") == workflow_id
    changed = {"name": "keyed", "tasks": {"a": {"type": "noop"}, "b": {"type": "noop"}}}
    with grpc.insecure_channel(node.grpc) as channel:
        stub = pb_grpc.CortexServiceStub(channel)
        request = pb.SubmitWorkflowRequest(definition=json.dumps(changed), idempotency_key="flow-7")
        with pytest.raises(grpc.RpcError) as info:
            stub.SubmitWorkflow(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert f"is already used by workflow {workflow_id}" in (info.value.details() or "")


def test_a_fan_out_of_fifty_noop_tasks_leaves_no_rejected_entry(cluster):
    shards = {f"s{i:02d}": {"type": "noop", "dependsOn": ["split"]} for i in range(50)}
    definition = {
        "name": "fan",
        "tasks": {
            "split": {"type": "noop"},
            **shards,
            "join": {"type": "noop", "dependsOn": list(shards)},
        },
    }
    with cluster.nodes[0].client() as client:
        submitted = client.submit_workflow(json.dumps(definition), pb.DEFINITION_FORMAT_JSON)
        workflow = _wait(client, submitted.workflow_id)
    assert workflow.state == pb.WORKFLOW_STATE_COMPLETED
    cluster.wait_converged()
    for node in cluster.nodes:
        assert _rejected(node, submitted.commit_index) == [], node.node_id
        killed = [line for line in node.log_text().splitlines() if "killing it" in line]
        assert not [line for line in killed if "WARNING" in line], killed
