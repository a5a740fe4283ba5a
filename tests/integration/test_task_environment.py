"""What a task sees of its node's environment, on a real cluster whose nodes
hold the cluster secret, the API token and an MCP token in theirs: none of
them reaches a task (nor, through its output, every reader of the API), and
only the operator's env_passthrough names join the usual allow-list. With
tracing off, TRACEPARENT is the task's own trace context."""

from __future__ import annotations

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import shell_spec

pytestmark = pytest.mark.cluster

SECRET = "env-test-cluster-secret-5b1f0c"
API_TOKEN = "env-test-api-token-93a7d2"
MCP_TOKEN = "env-test-mcp-token-47e1aa"


def test_tasks_see_no_secret_and_only_what_is_passed_through(make_cluster):
    cluster = make_cluster(
        3,
        start=False,
        extra_args=["--env-passthrough", "PASSED_THROUGH", "--env-passthrough", "APP_*"],
    )
    for node in cluster.nodes:
        node.env = {
            "CORTEX_SECRET": SECRET,
            "CORTEX_API_TOKEN": API_TOKEN,
            "CORTEX_MCP_TOKEN": MCP_TOKEN,
            "PASSED_THROUGH": f"visible-on-{node.node_id}",
            "APP_MODE": "fast",
            "APP_SECRET_COPY": SECRET,  # matches APP_*, but holds the secret
            "NOT_LISTED": "stays-on-the-node",
        }
        node.api_token = API_TOKEN
        node.start(peers=cluster.peers, secret=None)  # the secret comes from the environment
    cluster.wait_ready()

    with cluster.nodes[0].client() as client:
        outputs, contexts = {}, {}
        for node in cluster.nodes:
            spec = shell_spec(["env"], constraints=pb.Constraints(target_node=node.node_id))
            task_id = client.submit_task(spec).task.id
            task = client.get_task_result(task_id, wait=True, timeout_ms=30_000).task
            assert task.state == pb.TASK_STATE_COMPLETED, task
            assert task.node_id == node.node_id
            chunks = client.stream_task_output(task_id, timeout_s=20)
            full = b"".join(c.data.data for c in chunks if c.HasField("data"))
            assert full == task.result.stdout  # the whole output, not only its tail
            outputs[node.node_id] = full.decode()
            contexts[node.node_id] = task.traceparent

    for node_id, output in outputs.items():
        names = {line.split("=", 1)[0] for line in output.splitlines() if "=" in line}
        for value in (SECRET, API_TOKEN, MCP_TOKEN, "stays-on-the-node"):
            assert value not in output, (node_id, value)
        assert not names & {"CORTEX_SECRET", "CORTEX_API_TOKEN", "CORTEX_MCP_TOKEN",
                            "APP_SECRET_COPY", "NOT_LISTED"}, (node_id, names)  # fmt: skip
        assert f"PASSED_THROUGH=visible-on-{node_id}" in output.splitlines()
        assert "APP_MODE=fast" in output.splitlines()
        assert "PATH" in names and "CORTEX_TASK_ID" in names
        # Tracing off: the task's own trace context, so its spans join its trace.
        assert contexts[node_id] and f"TRACEPARENT={contexts[node_id]}" in output.splitlines()
