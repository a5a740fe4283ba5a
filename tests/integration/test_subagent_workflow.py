"""A `subagent` task in a workflow like the design's notify-on-failure
example, on a real 2-node cluster where only one node has an agent command
(a stand-in script the test writes: it reads the prompt from stdin, as an
agent CLI would). The task runs only there, after the build failed; the
agent's final JSON line updates the workflow context, which the next task
reads."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.api.convert import struct_dict
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, wait_until

pytestmark = pytest.mark.cluster

# Reads its prompt from stdin and the workflow context from its file, says
# what it does, and reports a context update as its last line.
STAND_IN_AGENT = textwrap.dedent(
    """
    import json, os, sys
    prompt = sys.stdin.read().strip()
    context = json.load(open(os.environ["CORTEX_CONTEXT_FILE"]))
    print(f"agent got: {prompt}")
    print(f"service: {context['service']}")
    print(json.dumps({"context": {"notified": True, "notice": prompt + " for " + context["service"]}}))
    """
)

DEFINITION = {
    "name": "build-and-notify",
    "context": {"service": "api"},
    "tasks": {
        "test": {"type": "shell", "spec": {"command": "echo '0 failures'"}},
        "build": {
            "type": "shell",
            "spec": {"command": "echo compiling; exit 2"},
            "retryPolicy": {"maxRetries": 0},
            "dependsOn": ["test"],
        },
        "deploy": {
            "type": "shell",
            "spec": {"command": "echo deploying"},
            "dependsOn": ["build"],
            "condition": "parent.build.exitCode === 0 && parent.test.result.stdout.includes('0 failures')",
        },
        "notify-failure": {
            "type": "subagent",
            "spec": {"prompt": "Send a failure notification"},
            "dependsOn": ["build"],
            "condition": "parent.build.exitCode !== 0",
        },
        "after-notice": {
            "type": "shell",
            "spec": {"command": 'cat "$CORTEX_CONTEXT_FILE"'},
            "dependsOn": ["notify-failure"],
        },
    },
}


@pytest.fixture
def cluster(make_cluster, tmp_path: Path) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    agent = tmp_path / "stand_in_agent.py"
    agent.write_text(STAND_IN_AGENT)
    cluster = make_cluster(2, start=False)
    cluster.nodes[0].extra_args += ["--subagent-command", f"{sys.executable} {agent}"]
    cluster.start()
    cluster.wait_ready()
    yield cluster


def test_a_subagent_notifies_on_failure_and_its_json_updates_the_context(
    cluster: Cluster,
) -> None:
    n1, n2 = cluster.nodes
    with n2.client() as client:
        nodes = {n.id: n for n in client.list_nodes().nodes}
        assert "subagent" in nodes["n1"].executors and "subagent" not in nodes["n2"].executors
        workflow_id = client.submit_workflow(json.dumps(DEFINITION)).workflow_id

        def ended() -> pb.Workflow | None:
            workflow = client.get_workflow(workflow_id).workflow
            terminal = enum_name(pb.WorkflowState, workflow.state) in ("completed", "failed")
            return workflow if terminal else None

        workflow = wait_until(ended, 90, what="the workflow to end")
        tasks = {t.key: t for t in workflow.tasks}
        states = {key: enum_name(pb.TaskState, t.state) for key, t in tasks.items()}
        assert states == {
            "test": "completed",
            "build": "failed",
            "deploy": "skipped",
            "notify-failure": "completed",
            "after-notice": "completed",
        }, states
        assert enum_name(pb.WorkflowState, workflow.state) == "failed"  # the build failed
        notify = client.get_task_result(tasks["notify-failure"].task_id).task
        after = client.get_task_result(tasks["after-notice"].task_id).task

    assert notify.node_id == "n1"  # the only node with an agent command
    assert b"agent got: Send a failure notification\nservice: api\n" in notify.result.stdout
    notice = "Send a failure notification for api"
    assert struct_dict(workflow.context) == {"service": "api", "notified": True, "notice": notice}
    assert json.loads(after.result.stdout) == {
        "service": "api",
        "notified": True,
        "notice": notice,
    }
