"""An executor whose fingerprint found nothing when its node started is
looked at again while the node runs: once it answers, the node registers it
(NODE_JOIN), advertises its capabilities and runs its tasks. Here the
subagent executor's command is installed only after a real node started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import struct_pb2

from cortex.executors.discovery import UNAVAILABLE_PREFIX
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import ClusterNode, wait_until

pytestmark = pytest.mark.cluster


def _registered(node: ClusterNode) -> pb.Node:
    with node.client() as client:
        return {n.id: n for n in client.list_nodes().nodes}[node.node_id]


def test_an_agent_cli_installed_after_the_start_is_registered_and_runs(
    make_cluster: Any, tmp_path: Path
) -> None:
    agent = tmp_path / "bin" / "late-agent"  # not installed yet
    cluster = make_cluster(1, start=False)
    (node,) = cluster.nodes
    node.extra_args += ["--subagent-command", str(agent)]
    cluster.start()
    cluster.wait_ready()
    before = _registered(node)
    assert "subagent" not in before.executors
    assert f"{UNAVAILABLE_PREFIX}subagent" in before.capabilities

    options = struct_pb2.Struct()
    options.update({"prompt": "say hello"})
    with node.client() as client:
        task_id = client.submit_task(pb.TaskSpec(type="subagent", options=options)).task.id
        # No node runs it yet: it waits in the queue.
        assert client.get_task(task_id).task.state == pb.TASK_STATE_QUEUED

    agent.parent.mkdir()
    agent.write_text('#!/bin/sh\nread prompt\necho "agent got: $prompt"\n')
    agent.chmod(0o755)

    def registered() -> bool:
        now = _registered(node)
        return (
            "subagent" in now.executors
            and now.capabilities.get("subagent.command") == "late-agent"
            and f"{UNAVAILABLE_PREFIX}subagent" not in now.capabilities
        )

    wait_until(registered, 60, interval=0.5, what="the subagent executor registered")
    with node.client(timeout_s=90) as client:
        task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
    assert task.state == pb.TASK_STATE_COMPLETED, task
    assert task.result.stdout == b"agent got: say hello\n"
