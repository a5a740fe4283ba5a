"""The MCP server as agents meet it: `cortex mcp` as a subprocess, the
official MCP client over real stdio and streamable HTTP, a real cluster."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.cluster import free_ports, wait_until

pytestmark = pytest.mark.cluster

TOOLS = {
    "submit_task", "submit_workflow", "get_task_result", "cancel_task", "list_tasks",
    "list_workflows", "get_workflow_status", "list_dead_letter_tasks",
    "retry_dead_letter_task", "drain_node_tasks", "stream_task_output",
}  # fmt: skip

WORKFLOW = {
    "name": "mcp-pipeline",
    "tasks": {
        "build": {"type": "shell", "spec": {"command": "echo building; echo built"}},
        "test": {"type": "shell", "spec": {"command": "for i in 1 2 3; do echo test $i; sleep 0.2; done"},
                 "dependsOn": ["build"]},
        "report": {"type": "shell", "spec": {"command": "echo report"}, "dependsOn": ["test"],
                   "condition": "parent.test.exitCode === 0"},
    },
}  # fmt: skip


def _stdio(node: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "cortex.cli.main", "--node", node, "mcp"]
    )


def _data(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if set(content) == {"result"} else content
    return json.loads(result.content[0].text)


def _error_text(result: Any) -> str:
    assert result.is_error, result
    return result.content[0].text


def test_stdio_server_against_a_cluster(make_cluster):
    cluster = make_cluster(3, extra_args=["--failure-timeout", "3", "--heartbeat-interval", "0.5"])

    async def session() -> None:
        async with Client(_stdio(cluster.nodes[0].grpc), read_timeout_seconds=60) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            for tool in tools.values():
                assert tool.description and len(tool.description) > 40
                assert tool.input_schema["type"] == "object"
            assert "task_id" in tools["get_task_result"].input_schema["required"]
            assert tools["submit_task"].input_schema["properties"]["priority"]

            # Workflow round trip: submit -> status -> stream output until done -> result.
            wf = _data(await client.call_tool("submit_workflow", {"definition": WORKFLOW}))
            workflow_id = wf["workflow_id"]

            async def status() -> dict[str, Any]:
                return _data(
                    await client.call_tool("get_workflow_status", {"workflow_id": workflow_id})
                )

            deadline = time.monotonic() + 60
            test_task = None
            while time.monotonic() < deadline and test_task is None:
                current = await status()
                test_task = next((t["task_id"] for t in current["tasks"]
                                  if t["key"] == "test" and t["task_id"]), None)  # fmt: skip
                await anyio.sleep(0.1)
            assert test_task, "the workflow's test task never appeared"
            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            output, offset, done = "", 0, False
            while not done and time.monotonic() < deadline:
                chunk = _data(await client.call_tool(
                    "stream_task_output", {"task_id": test_task, "from_offset": offset, "wait_s": 2},
                    progress_callback=on_progress))  # fmt: skip
                assert chunk["next_offset"] >= offset
                output += chunk["output"]
                offset, done = chunk["next_offset"], chunk["done"]
            assert done and output == "test 1\ntest 2\ntest 3\n"
            assert progress, "no progress notification arrived"
            result = _data(
                await client.call_tool("get_task_result", {"task_id": test_task, "wait": True})
            )
            assert result["state"] == "completed" and result["result"]["exit_code"] == 0
            while (current := await status())["state"] == "running" and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert current["state"] == "completed"
            assert {t["key"]: t["state"] for t in current["tasks"]}["report"] == "completed"
            listed = _data(await client.call_tool("list_workflows", {}))
            assert workflow_id in [w["id"] for w in listed["workflows"]]

            # Dead letters.
            failing = _data(await client.call_tool("submit_task", {
                "command": "exit 4", "retry_policy": {"maxRetries": 0}, "wait": True}))  # fmt: skip
            assert failing["task"]["state"] == "dead_letter"
            dlq = _data(await client.call_tool("list_dead_letter_tasks", {}))
            assert failing["task_id"] in [t["id"] for t in dlq["tasks"]]
            retried = _data(
                await client.call_tool("retry_dead_letter_task", {"task_id": failing["task_id"]})
            )
            assert retried["state"] in ("queued", "assigned", "running", "dead_letter")
            assert retried["id"] == failing["task_id"]

            # Cancel.
            sleeper = _data(await client.call_tool("submit_task", {"command": ["sleep", "600"]}))
            cancelled = _data(
                await client.call_tool("cancel_task", {"task_id": sleeper["task_id"]})
            )
            assert cancelled["state"] == "cancelled"

            # Drain and bring back.
            drained = _data(
                await client.call_tool("drain_node_tasks", {"node_id": "n2", "deadline_s": 30})
            )
            assert drained["status"] == "draining"
            pinned = _data(await client.call_tool("submit_task", {
                "command": ["true"], "constraints": {"targetNode": "n2"}}))  # fmt: skip
            waiting = _data(
                await client.call_tool("get_task_result", {"task_id": pinned["task_id"]})
            )
            assert waiting["state"] == "queued"
            back = _data(
                await client.call_tool("drain_node_tasks", {"node_id": "n2", "action": "uncordon"})
            )
            assert back["status"] == "active"
            ran = _data(
                await client.call_tool(
                    "get_task_result", {"task_id": pinned["task_id"], "wait": True}
                )
            )
            assert ran["state"] == "completed" and ran["node"] == "n2"

            # Bad arguments and unknown ids: tool errors, and the server keeps serving.
            assert "task_id" in _error_text(await client.call_tool("get_task_result", {}))
            assert "timeout_s" in _error_text(await client.call_tool(
                "get_task_result", {"task_id": "x", "timeout_s": "soon"}))  # fmt: skip
            assert "no task with id nope" in _error_text(
                await client.call_tool("get_task_result", {"task_id": "nope"})
            )
            assert "NotFound" in _error_text(
                await client.call_tool("cancel_task", {"task_id": "nope"})
            )
            assert "command" in _error_text(await client.call_tool("submit_task", {"command": ""}))
            assert "constraints" in _error_text(await client.call_tool(
                "submit_task", {"command": "true", "constraints": {"gpuPlease": True}}))  # fmt: skip
            assert "cycle" in _error_text(await client.call_tool("submit_workflow", {"definition": {
                "name": "loop", "tasks": {"a": {"type": "shell", "spec": {"command": "true"}, "dependsOn": ["b"]},
                                          "b": {"type": "shell", "spec": {"command": "true"}, "dependsOn": ["a"]}}}}))  # fmt: skip
            assert "NotFound" in _error_text(
                await client.call_tool("drain_node_tasks", {"node_id": "ghost"})
            )
            ok = _data(await client.call_tool("list_tasks", {"states": ["completed"], "limit": 5}))
            assert ok["total"] >= 1 and len(ok["tasks"]) <= 5

            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            assert {"cortex://cluster/status", "cortex://cluster/nodes"} <= resources
            status = json.loads(
                (await client.read_resource("cortex://cluster/status")).contents[0].text
            )
            assert status["leader"] and status["state_digest"]
            nodes = json.loads(
                (await client.read_resource("cortex://cluster/nodes")).contents[0].text
            )
            assert {n["node_id"] for n in nodes} == {"n1", "n2", "n3"}

    anyio.run(session)


def test_streamable_http_round_trip(make_cluster):
    cluster = make_cluster(3)
    (port,) = free_ports(1)
    server = subprocess.Popen(
        [sys.executable, "-m", "cortex.cli.main", "--node", cluster.nodes[1].grpc, "mcp",
         "--http", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:

        async def session() -> dict[str, Any]:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                submitted = _data(
                    await client.call_tool("submit_task", {"command": ["echo", "over http"]})
                )
                return _data(await client.call_tool(
                    "get_task_result", {"task_id": submitted["task_id"], "wait": True}))  # fmt: skip

        def listening() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, 30, what="the HTTP MCP server to listen")
        result = anyio.run(session)
        assert result["state"] == "completed"
        assert result["result"]["stdout"] == "over http\n"
    finally:
        server.terminate()
        server.wait(10)


def test_cluster_without_leader_gives_a_tool_error_not_a_hang(make_cluster):
    cluster = make_cluster(3)
    survivor = cluster.nodes[0]
    for node in cluster.nodes[1:]:
        node.kill9()

    async def session() -> None:
        async with Client(_stdio(survivor.grpc), read_timeout_seconds=60) as client:
            started = time.monotonic()
            result = await client.call_tool("submit_task", {"command": ["true"]})
            assert time.monotonic() - started < 20
            assert "Unavailable" in _error_text(result)
            again = await client.call_tool("list_tasks", {})
            assert not again.is_error

    anyio.run(session)
