"""Workflows on real 3-node clusters (separate processes, loopback TCP, real
SQLite, real V8): the build-and-deploy example both ways through the CLI,
fan-out/fan-in, context passing, hostile conditions, validation that writes
nothing, cancellation, and a leader killed mid-workflow."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.errors import FailedPrecondition, InvalidArgument, NotFound
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, shared_cluster, wait_until

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "configs" / "workflows" / "build-and-deploy.yaml"
FAST = ["--failure-timeout", "3", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]
TERMINAL = (pb.WORKFLOW_STATE_COMPLETED, pb.WORKFLOW_STATE_FAILED, pb.WORKFLOW_STATE_CANCELLED)
COMPLETED, SKIPPED = pb.TASK_STATE_COMPLETED, pb.TASK_STATE_SKIPPED


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "workflows")


def _submit(client: Any, definition: dict[str, Any]) -> str:
    return client.submit_workflow(json.dumps(definition), pb.DEFINITION_FORMAT_JSON).workflow_id


def _workflow(client: Any, workflow_id: str) -> pb.Workflow:
    return client.get_workflow(workflow_id).workflow


def _wait(client: Any, workflow_id: str, timeout: float = 60) -> pb.Workflow:
    return wait_until(
        lambda: (w := _workflow(client, workflow_id)).state in TERMINAL and w,
        timeout,
        what=f"workflow {workflow_id} to end",
    )


def _tasks(workflow: pb.Workflow) -> dict[str, pb.WorkflowTask]:
    return {t.key: t for t in workflow.tasks}


def _events(client: Any, task_id: str) -> list[pb.Event]:
    return list(client.get_task(task_id, include_events=True).events)


def _cli(node: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cortex.cli.main", "--node", node, *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )  # fmt: skip


def test_invalid_definitions_are_refused_and_write_nothing(cluster):
    node = cluster.nodes[1]
    cluster.wait_converged()
    before = node.status()
    bad = {
        "unknown dependency": (
            "name: w\ntasks:\n  build: {spec: {command: x}}\n"
            "  deploy: {spec: {command: x}, dependsOn: [biuld]}\n",
            "tasks.deploy.dependsOn: unknown task 'biuld'",
        ),
        "cycle": (
            "name: w\ntasks:\n  a: {spec: {command: x}, dependsOn: [b]}\n"
            "  b: {spec: {command: x}, dependsOn: [a]}\n",
            "dependency cycle a -> b -> a",
        ),
        "duplicate key": (
            '{"name": "w", "tasks": {"a": {"spec": {"command": "x"}}, "a": {"spec": {"command": "y"}}}}',
            "duplicate key 'a'",
        ),
        "invalid key": ('{"name": "w", "tasks": {"a b": {"spec": {"command": "x"}}}}', "invalid key 'a b'"),
        "condition": (
            "name: w\ntasks:\n  a: {spec: {command: x}}\n"
            "  b: {spec: {command: x}, dependsOn: [a], condition: 'parent.a.exitCode ==='}\n",
            "tasks.b.condition: does not parse: SyntaxError",
        ),
        "return": (
            "name: w\ntasks:\n  a: {spec: {command: x}}\n"
            "  b: {spec: {command: x}, dependsOn: [a], condition: 'return parent.a.exitCode === 0'}\n",
            "tasks.b.condition: does not parse: SyntaxError: Illegal return statement",
        ),
        "large yaml": (
            "name: w\ntasks:\n" + "".join(f"  t{i}: {{type: noop}}\n" for i in range(20_000)),
            "bytes for YAML (send it as JSON",
        ),
        "task type": ("name: w\ntasks:\n  a: {type: claude_relay, spec: {prompt: hi}}\n", "unknown task type 'claude_relay'"),
        "field type": ("name: w\ntasks:\n  a: {spec: {command: x}, dependsOn: a}\n", "tasks.a.dependsOn"),
        "not a mapping": ("- just\n- a list\n", "must be an object"),
    }  # fmt: skip
    with node.client() as client:
        for problem, (text, expected) in bad.items():
            with pytest.raises(InvalidArgument) as info:
                client.submit_workflow(text)
            assert expected in str(info.value), (problem, str(info.value))
    after = node.status()
    assert (after.applied_index, after.state_digest) == (before.applied_index, before.state_digest)


def test_build_and_deploy_runs_both_ways_through_the_cli(cluster):
    node = cluster.nodes[0].grpc
    success = _cli(node, "workflow", "submit", str(EXAMPLE), "--wait", "--json")
    assert success.returncode == 0, success.stderr
    done = json.loads(success.stdout)
    states = {t["key"]: t["state"] for t in done["tasks"]}
    assert done["state"] == "completed"
    assert states == {"lint": "completed", "test": "completed", "build": "completed",
                      "deploy": "completed", "notify-failure": "skipped"}  # fmt: skip
    assert done["context"] == {"fail_build": False, "artifact": "app-1.2.tar.gz", "version": "1.2"}
    skipped = next(t for t in done["tasks"] if t["key"] == "notify-failure")
    assert skipped["skip_reason"] == "condition is false"
    deploy = next(t for t in done["tasks"] if t["key"] == "deploy")
    with cluster.nodes[2].client() as client:
        deployed = client.get_task(deploy["task_id"]).task
        assert deployed.result.stdout == b"deploying app-1.2.tar.gz\n"

    failure = _cli(
        node, "workflow", "submit", str(EXAMPLE), "--wait", "--json", "--set", "fail_build=true"
    )
    assert failure.returncode == 1, failure.stderr
    failed = json.loads(failure.stdout)
    states = {t["key"]: t["state"] for t in failed["tasks"]}
    assert failed["state"] == "failed" and "build failed" in failed["error"]
    assert states == {"lint": "completed", "test": "completed", "build": "failed",
                      "deploy": "skipped", "notify-failure": "completed"}  # fmt: skip
    deploy = next(t for t in failed["tasks"] if t["key"] == "deploy")
    assert deploy["skip_reason"] == "condition is false"

    tree = _cli(node, "workflow", "status", failed["id"])
    assert tree.returncode == 0, tree.stderr
    for text in ("build-and-deploy", "failed", "notify-failure", "deploy", "skipped"):
        assert text in tree.stdout
    listing = _cli(node, "workflow", "list", "--json")
    listed = {w["id"]: w for w in json.loads(listing.stdout)["workflows"]}
    assert {done["id"], failed["id"]} <= set(listed)
    assert listed[failed["id"]]["task_counts"] == {"completed": 3, "failed": 1, "skipped": 1}
    assert listed[done["id"]]["task_counts"] == {"completed": 4, "skipped": 1}
    table = _cli(node, "workflow", "list")
    assert table.returncode == 0 and "3 completed" in table.stdout, table.stdout


def test_fan_out_fan_in_joins_once_after_all_fifty(cluster):
    shards = {f"shard-{i:02d}": {"spec": {"command": "sleep 0.2"}, "dependsOn": ["split"]}
              for i in range(50)}  # fmt: skip
    definition = {
        "name": "fan",
        "tasks": {
            "split": {"spec": {"command": "true"}},
            **shards,
            "join": {"spec": {"command": "echo joined"}, "dependsOn": list(shards)},
        },
    }
    with cluster.nodes[2].client() as client:
        workflow = _wait(client, _submit(client, definition))
        assert workflow.state == pb.WORKFLOW_STATE_COMPLETED, workflow
        tasks = _tasks(workflow)
        finished = {}
        for key in shards:
            completed = [
                ev
                for ev in _events(client, tasks[key].task_id)
                if ev.type == pb.EVENT_TYPE_COMPLETED
            ]
            assert len(completed) == 1
            finished[key] = completed[0].raft_index
        join_events = _events(client, tasks["join"].task_id)
    assigned = [ev for ev in join_events if ev.type == pb.EVENT_TYPE_ASSIGNED]
    started = [ev for ev in join_events if ev.type == pb.EVENT_TYPE_STARTED]
    released = [ev for ev in join_events if ev.type == pb.EVENT_TYPE_RELEASED]
    assert len(assigned) == 1 and len(started) == 1 and len(released) == 1
    assert tasks["join"].attempt == 1
    assert released[0].raft_index > max(finished.values())
    assert started[0].raft_index > max(finished.values())
    used = {tasks[key].node_id for key in shards}
    assert used == {n.node_id for n in cluster.nodes}, used


def test_context_flows_into_conditions_and_commands(cluster):
    definition = {
        "name": "context",
        "context": {"stage": "test"},
        "tasks": {
            "a": {"spec": {"command": 'printf \'{"version": "1.2"}\' > "$CORTEX_CONTEXT_FILE"'}},
            "b": {
                "dependsOn": ["a"],
                "condition": 'workflow.context.version === "1.2"',
                "spec": {
                    "command": 'cat "$CORTEX_CONTEXT_FILE"; '
                    'echo "$CORTEX_WORKFLOW_ID/$CORTEX_TASK_KEY" >&2'
                },
            },
            "c": {
                "dependsOn": ["a"],
                "condition": 'workflow.context.version === "2.0"',
                "type": "noop",
            },
        },
    }
    with cluster.nodes[0].client() as client:
        workflow = _wait(client, _submit(client, definition))
        tasks = _tasks(workflow)
        b = client.get_task(tasks["b"].task_id).task
    assert workflow.state == pb.WORKFLOW_STATE_COMPLETED
    assert dict(workflow.context) == {"stage": "test", "version": "1.2"}
    assert tasks["b"].state == COMPLETED and tasks["c"].state == SKIPPED
    assert tasks["b"].HasField("exit_code") and not tasks["c"].HasField("exit_code")
    assert json.loads(b.result.stdout) == {"stage": "test", "version": "1.2"}
    assert b.result.stderr.decode().strip() == f"{workflow.id}/b"


def test_hostile_conditions_fail_their_tasks_quickly_and_the_cluster_carries_on(cluster):
    hostile = {
        "loop": "while(true){}",
        "memory": "let a = []; while (true) a.push(new Array(1e6).fill(1))",
        "buffer": "new Uint8Array(new ArrayBuffer(256 * 1024 * 1024)).fill(1).length > 0",
        "promise": "Promise.resolve(true)",
        "string": "'yes'",
        "require": "require('fs')",
        "exit": "process.exit()",
        "escape": "this.constructor.constructor('return process')()",
    }
    definition = {
        "name": "hostile",
        "tasks": {
            "root": {"spec": {"command": "true"}},
            **{
                key: {"dependsOn": ["root"], "condition": c, "type": "noop"}
                for key, c in hostile.items()
            },
        },
    }
    leader = cluster.leader()
    with leader.client() as client:
        workflow = _wait(client, _submit(client, definition))
        tasks = _tasks(workflow)
        root_done = next(
            ev
            for ev in _events(client, tasks["root"].task_id)
            if ev.type == pb.EVENT_TYPE_COMPLETED
        )
        delays, errors = {}, {}
        for key in hostile:
            failed = next(
                ev for ev in _events(client, tasks[key].task_id) if ev.type == pb.EVENT_TYPE_FAILED
            )
            delays[key] = failed.time.ToMilliseconds() - root_done.time.ToMilliseconds()
            errors[key] = client.get_task(tasks[key].task_id).task.error
        print(f"condition decided after the root completed (ms): {delays}")
        # A condition that does not come to a boolean fails its task, and so
        # the workflow: it never counts as completed.
        assert all(tasks[key].state == pb.TASK_STATE_FAILED for key in hostile), workflow
        assert workflow.state == pb.WORKFLOW_STATE_FAILED
        assert "timed out after 100 ms" in errors["loop"]
        # Over the memory cap, or out of time first on a busy machine.
        reason = errors["memory"]
        assert "memory limit" in reason or "timed out after 100 ms" in reason, reason
        assert errors["buffer"] == "condition threw ReferenceError: Uint8Array is not defined"
        assert errors["promise"] == "condition returned a Promise, not a boolean"
        assert errors["string"] == "condition returned a string, not a boolean"
        assert "require is not defined" in errors["require"]
        assert "process is not defined" in errors["exit"]
        assert "process is not defined" in errors["escape"]
        assert max(delays.values()) < 1500, delays
        # The leader still schedules and decides.
        after = client.submit_task(pb.TaskSpec(shell="echo still here")).task.id
        result = client.get_task_result(after, wait=True, timeout_ms=30_000)
        assert result.task.state == COMPLETED
        again = _wait(client, _submit(client, {"name": "after", "tasks": {
            "x": {"type": "noop"}, "y": {"type": "noop", "dependsOn": ["x"], "condition": "true"}}}))  # fmt: skip
        assert again.state == pb.WORKFLOW_STATE_COMPLETED
    assert leader.alive
    cluster.wait_converged()


def test_cancel_and_lookup_errors(cluster):
    definition = {
        "name": "long",
        "tasks": {
            "slow": {"spec": {"command": "sleep 60"}},
            "after": {"spec": {"command": "true"}, "dependsOn": ["slow"]},
        },
    }
    with cluster.nodes[1].client() as client:
        workflow_id = _submit(client, definition)
        wait_until(
            lambda: _tasks(_workflow(client, workflow_id))["slow"].state == pb.TASK_STATE_RUNNING,
            30,
            what="slow task running",
        )
        cancelled = client.cancel_workflow(workflow_id, "changed my mind")
        assert cancelled.commit_index and cancelled.header.applied_index >= cancelled.commit_index
        cancelled_workflow = cancelled.workflow
        assert cancelled_workflow.state == pb.WORKFLOW_STATE_CANCELLED
        assert cancelled_workflow.error == "changed my mind"
        assert {t.state for t in cancelled_workflow.tasks} == {pb.TASK_STATE_CANCELLED}
        with pytest.raises(FailedPrecondition, match="already cancelled"):
            client.cancel_workflow(workflow_id)
        with pytest.raises(NotFound):
            client.get_workflow("no-such-workflow")
        with pytest.raises(InvalidArgument, match="states"):
            client.list_workflows(states=[pb.WORKFLOW_STATE_UNSPECIFIED])
        listed = client.list_workflows(states=[pb.WORKFLOW_STATE_CANCELLED])
        assert workflow_id in [w.id for w in listed.workflows]
        again = client.submit_workflow(
            json.dumps(definition), pb.DEFINITION_FORMAT_JSON, "same-key"
        )
        assert (
            client.submit_workflow(
                json.dumps(definition), pb.DEFINITION_FORMAT_UNSPECIFIED, "same-key"
            ).workflow_id
            == again.workflow_id
        )
        client.cancel_workflow(again.workflow_id)


def test_a_leader_killed_mid_workflow_does_not_lose_or_repeat_decisions(make_cluster):
    cluster = make_cluster(3, extra_args=FAST)
    leader = cluster.leader()
    survivor = cluster.followers()[0]
    mids = {f"mid-{i}": {"spec": {"command": "sleep 2", "retryPolicy": {"backoffMs": 200}},
                         "dependsOn": ["start"]} for i in range(4)}  # fmt: skip
    definition = {
        "name": "failover",
        "tasks": {
            "start": {"spec": {"command": "true"}},
            **mids,
            "ok": {"dependsOn": list(mids), "spec": {"command": "true"},
                   "condition": "Object.values(parent).every(p => p.state === 'completed')"},
            "never": {"dependsOn": list(mids), "spec": {"command": "true"},
                      "condition": "parent['mid-1'].exitCode !== 0"},
            "after-never": {"dependsOn": ["never"], "spec": {"command": "true"}},
            "final": {"dependsOn": ["ok"], "spec": {"command": "echo done"}},
        },
    }  # fmt: skip
    with survivor.client() as client:
        workflow_id = _submit(client, definition)
        wait_until(
            lambda: any(t.state == pb.TASK_STATE_RUNNING
                        for t in _workflow(client, workflow_id).tasks if t.key.startswith("mid-")),
            30, what="the middle tasks running",
        )  # fmt: skip
        killed_at = int(time.time() * 1000)
        leader.kill9()
        workflow = _wait(client, workflow_id, timeout=90)
        tasks = _tasks(workflow)
        decided = (pb.EVENT_TYPE_RELEASED, pb.EVENT_TYPE_SKIPPED)
        decisions = {key: [ev for ev in _events(client, t.task_id) if ev.type in decided]
                     for key, t in tasks.items()}  # fmt: skip
    assert workflow.state == pb.WORKFLOW_STATE_COMPLETED, workflow
    states = {key: t.state for key, t in tasks.items()}
    assert states == {"start": COMPLETED, **{k: COMPLETED for k in mids}, "ok": COMPLETED,
                      "never": SKIPPED, "after-never": SKIPPED, "final": COMPLETED}  # fmt: skip
    assert all(len(decisions[key]) == 1 for key in tasks if key != "start"), decisions
    # The joins were decided by the new leader, after the old one died.
    for key in ("ok", "never", "after-never", "final"):
        assert decisions[key][0].time.ToMilliseconds() >= killed_at, key
    cluster.wait_converged()
