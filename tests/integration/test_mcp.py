"""The MCP server as agents meet it: `cortex mcp` as a subprocess, the
official MCP client over real stdio and streamable HTTP (with its bearer
token, over TLS, behind Host and Origin checks), a real cluster."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from cortex.mcp import build_server
from tests.cluster import free_ports, wait_until
from tests.tls import write_tls_files

pytestmark = pytest.mark.cluster

TOOLS = {
    "submit_task", "submit_workflow", "get_task_result", "cancel_task", "list_tasks",
    "list_workflows", "get_workflow_status", "list_dead_letter_tasks",
    "retry_dead_letter_task", "drain_node_tasks", "stream_task_output", "create_schedule",
    "list_schedules", "get_schedule", "pause_schedule", "resume_schedule", "delete_schedule",
    "trigger_schedule", "set_limit", "list_limits", "delete_limit", "set_fairness_weight",
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
                "command": "exit 4", "retry_policy": {"maxRetries": 1, "backoffMs": 0},
                "wait": True}))  # fmt: skip
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
            assert _error_text(await client.call_tool("get_task_result", {})).startswith(
                "task_id: missing"
            )
            assert _error_text(await client.call_tool(
                "get_task_result", {"task_id": "x", "timeout_s": "soon"})
            ).startswith('timeout_s: must be a number (got "soon")')  # fmt: skip
            assert _error_text(
                await client.call_tool("get_task_result", {"task_id": "nope"})
            ).startswith("not found: no task with id nope")
            assert _error_text(
                await client.call_tool("cancel_task", {"task_id": "nope"})
            ).startswith("not found: ")
            empty = _error_text(await client.call_tool("submit_task", {"command": ""}))
            assert empty.startswith("invalid argument: ") and "command" in empty
            assert _error_text(await client.call_tool(
                "submit_task", {"command": "true", "constraints": {"gpuPlease": True}})
            ).startswith("constraints.gpuPlease: unknown key")  # fmt: skip
            assert "cycle" in _error_text(await client.call_tool("submit_workflow", {"definition": {
                "name": "loop", "tasks": {"a": {"type": "shell", "spec": {"command": "true"}, "dependsOn": ["b"]},
                                          "b": {"type": "shell", "spec": {"command": "true"}, "dependsOn": ["a"]}}}}))  # fmt: skip
            assert _error_text(
                await client.call_tool("drain_node_tasks", {"node_id": "ghost"})
            ).startswith("not found: ")
            ok = _data(await client.call_tool("list_tasks", {"states": ["completed"], "limit": 5}))
            assert ok["total"] >= 1 and len(ok["tasks"]) <= 5
            assert all(t["state"] == "completed" for t in ok["tasks"])
            # Newest first: the last task submitted leads, and the token pages on.
            newest = _data(await client.call_tool("list_tasks", {"limit": 1}))
            assert [t["id"] for t in newest["tasks"]] == [pinned["task_id"]]
            assert newest["total"] > 1 and newest["next_page_token"]
            older = _data(await client.call_tool(
                "list_tasks", {"limit": 1, "page_token": newest["next_page_token"]}))  # fmt: skip
            assert [t["id"] for t in older["tasks"]] == [sleeper["task_id"]]
            assert "states" in _error_text(
                await client.call_tool("list_tasks", {"states": ["sleeping"]})
            )

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


API_TOKEN = "cluster-api-token-0123456789"
HTTP_TOKEN = "mcp-http-token-0123456789abc"
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "probe", "version": "1"}},
}  # fmt: skip


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without any Cortex setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    return {**env, **extra}


def _mcp_http(
    node: str, address: str, *args: str, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """`cortex mcp --http ADDRESS` as a subprocess, its output in `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cortex.cli.main", "--node", node, "mcp", "--http", address, *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip


def _wait_listening(server: subprocess.Popen[bytes], port: int, log: Path) -> None:
    def listening() -> bool:
        assert server.poll() is None, f"cortex mcp exited: {log.read_text()}"
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    wait_until(listening, 30, what="the HTTP MCP server to listen")


def _stop(*servers: subprocess.Popen[bytes]) -> None:
    for server in servers:
        server.terminate()
    for server in servers:
        server.wait(10)


def _probe(url: str, verify: ssl.SSLContext | bool = True, **headers: str) -> httpx2.Response:
    """One raw initialize request with these headers."""
    headers = {"Accept": "application/json, text/event-stream", **headers}
    return httpx2.post(url, json=INITIALIZE, headers=headers, verify=verify, timeout=30)


@asynccontextmanager
async def _http_client(
    url: str, token: str, verify: ssl.SSLContext | bool = True
) -> AsyncIterator[Client]:
    """The MCP SDK's streamable HTTP client, sending `token` as a bearer token."""
    async with httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30, read=300),
        verify=verify,
    ) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, read_timeout_seconds=60) as client:
            yield client


async def _run_echo(client: Client, text: str) -> dict[str, Any]:
    assert {t.name for t in (await client.list_tools()).tools} == TOOLS
    submitted = _data(await client.call_tool("submit_task", {"command": ["echo", text]}))
    return _data(await client.call_tool(
        "get_task_result", {"task_id": submitted["task_id"], "wait": True}))  # fmt: skip


def test_streamable_http_needs_the_bearer_token(make_cluster, tmp_path: Path):
    cluster = make_cluster(1, api_token=API_TOKEN)
    node = cluster.nodes[0].grpc
    token_file = tmp_path / "mcp-token"
    token_file.write_text(HTTP_TOKEN + "\n")
    token_file.chmod(0o600)
    by_api_port, by_file_port = free_ports(2)
    by_api_log, by_file_log = tmp_path / "by-api.log", tmp_path / "by-file.log"
    env = _clean_env(CORTEX_API_TOKEN=API_TOKEN)
    # One server falls back to the API token it calls the cluster with; the
    # other takes its own token from a file.
    by_api = _mcp_http(node, f"127.0.0.1:{by_api_port}", env=env, log=by_api_log)
    by_file = _mcp_http(node, f"127.0.0.1:{by_file_port}", "--http-token-file", str(token_file),
                        env=env, log=by_file_log)  # fmt: skip
    try:
        _wait_listening(by_api, by_api_port, by_api_log)
        _wait_listening(by_file, by_file_port, by_file_log)
        by_api_url = f"http://127.0.0.1:{by_api_port}/mcp"
        by_file_url = f"http://127.0.0.1:{by_file_port}/mcp"

        missing = _probe(by_api_url)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer ")
        assert _probe(by_api_url, Authorization="Bearer wrong-token-0123456789").status_code == 401
        assert _probe(by_api_url, Authorization=API_TOKEN).status_code == 401
        assert _probe(by_file_url, Authorization=f"Bearer {API_TOKEN}").status_code == 401
        assert _probe(by_file_url, Authorization=f"bearer {HTTP_TOKEN}").status_code == 200
        # DNS rebinding: a page on another name reaching the loopback port.
        authorized = {"Authorization": f"Bearer {API_TOKEN}"}
        assert (
            _probe(by_api_url, Host=f"evil.example:{by_api_port}", **authorized).status_code == 421
        )
        assert _probe(by_api_url, Origin="http://evil.example", **authorized).status_code == 403
        assert _probe(by_api_url, Host=f"localhost:{by_api_port}", **authorized).status_code == 200

        async def sessions() -> tuple[dict[str, Any], dict[str, Any]]:
            async with _http_client(by_api_url, API_TOKEN) as client:
                first = await _run_echo(client, "over http")
            async with _http_client(by_file_url, HTTP_TOKEN) as client:
                second = await _run_echo(client, "with its own token")
            return first, second

        first, second = anyio.run(sessions)
        assert first["state"] == "completed" and first["result"]["stdout"] == "over http\n"
        assert second["state"] == "completed"
        assert second["result"]["stdout"] == "with its own token\n"
        for server in (by_api, by_file):
            command_line = Path(f"/proc/{server.pid}/cmdline").read_bytes()
            assert API_TOKEN.encode() not in command_line
            assert HTTP_TOKEN.encode() not in command_line
    finally:
        _stop(by_api, by_file)
    logs = by_api_log.read_text() + by_file_log.read_text()
    assert "401" in logs and "421" in logs, logs
    assert API_TOKEN not in logs and HTTP_TOKEN not in logs


def test_streamable_http_refuses_unsafe_setups_at_start(tmp_path: Path):
    (port,) = free_ports(1)
    base = [sys.executable, "-m", "cortex.cli.main", "--node", "127.0.0.1:1", "mcp"]

    def start(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], env=_clean_env(**env), capture_output=True,
                              text=True, timeout=60)  # fmt: skip

    for address in (f"0.0.0.0:{port}", f"127.0.0.1:{port}"):
        refused = start("--http", address)
        assert refused.returncode == 1
        assert "needs a bearer token" in refused.stderr
        assert "$CORTEX_MCP_TOKEN" in refused.stderr and "--http-token-file" in refused.stderr
    in_clear = start("--http", f"0.0.0.0:{port}", CORTEX_MCP_TOKEN=HTTP_TOKEN)
    assert in_clear.returncode == 1
    assert "--http-tls-cert" in in_clear.stderr and "--insecure-http" in in_clear.stderr
    unchecked_host = start("--http", f"0.0.0.0:{port}", "--insecure-http",
                           CORTEX_MCP_TOKEN=HTTP_TOKEN)  # fmt: skip
    assert unchecked_host.returncode == 1 and "--allowed-host" in unchecked_host.stderr
    stray = start("--http-token-file", str(tmp_path / "token"))
    assert stray.returncode == 1 and "only used with --http" in stray.stderr
    for result in (in_clear, unchecked_host):
        assert HTTP_TOKEN not in result.stderr


def test_streamable_http_over_tls_checks_host_and_origin(tmp_path: Path):
    tls = write_tls_files(tmp_path / "tls")
    (port,) = free_ports(1)
    log = tmp_path / "mcp.log"
    # The node is never called: initialize and list_tools do not reach it.
    server = _mcp_http("127.0.0.1:1", f"127.0.0.1:{port}", "--http-tls-cert", str(tls.cert),
                       "--http-tls-key", str(tls.key), "--allowed-host", "mcp.example.test",
                       env=_clean_env(CORTEX_MCP_TOKEN=HTTP_TOKEN), log=log)  # fmt: skip
    try:
        _wait_listening(server, port, log)
        url = f"https://127.0.0.1:{port}/mcp"
        trusted = ssl.create_default_context(cafile=str(tls.ca))
        authorized = {"Authorization": f"Bearer {HTTP_TOKEN}"}
        assert _probe(url, trusted).status_code == 401
        expected = {
            (): 200,
            (("Host", f"mcp.example.test:{port}"),): 200,
            (("Origin", f"https://localhost:{port}"),): 200,
            (("Host", f"evil.example:{port}"),): 421,
            (("Host", "127.0.0.1:1"),): 421,
            (("Origin", "https://evil.example"),): 403,
            (("Origin", f"http://127.0.0.1:{port}"),): 403,
        }
        for headers, status in expected.items():
            reply = _probe(url, trusted, **authorized, **dict(headers))
            assert reply.status_code == status, (headers, reply.text)
        with pytest.raises(httpx2.TransportError):
            _probe(f"http://127.0.0.1:{port}/mcp", **authorized)

        async def session() -> set[str]:
            async with _http_client(url, HTTP_TOKEN, trusted) as client:
                return {t.name for t in (await client.list_tools()).tools}

        assert anyio.run(session) == TOOLS
    finally:
        _stop(server)
    assert HTTP_TOKEN not in log.read_text()


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
            assert _error_text(result).startswith("unavailable: ")
            again = await client.call_tool("list_tasks", {})
            assert not again.is_error

    anyio.run(session)


def test_stream_past_the_end_and_bad_arguments_in_process(make_cluster):
    """The server in-process (the official client over memory streams)
    against a real one-node cluster: offsets past the end of the output,
    finished and running; arguments the schema forbids create nothing;
    the node's refusals read as such."""
    cluster = make_cluster(1)
    server = build_server(cluster.nodes[0].grpc, tls=False)

    async def session() -> None:
        async with Client(server, read_timeout_seconds=60) as client:

            async def call(tool: str, arguments: dict[str, Any]) -> Any:
                return await client.call_tool(tool, arguments)

            # Refused before reaching the node: nothing is submitted.
            for arguments, expected in (
                ({"command": "true", "timeout_ms": 2**70},
                 "timeout_ms: must be between 1 and 604800000 (got 1180591620717411303424)"),
                ({"command": "true", "retry_policy": {"maxRetries": "many"}},
                 'retry_policy.maxRetries: must be an integer (got "many")'),
                ({"command": "true", "retries": 3}, "retries: unknown argument (known: command"),
            ):  # fmt: skip
                assert _error_text(await call("submit_task", arguments)).startswith(expected)
            assert _data(await call("list_tasks", {}))["total"] == 0

            # A finished task: its end, wherever the offset asked for is.
            echo = _data(await call("submit_task", {"command": "echo hello", "wait": True}))
            assert echo["task"]["state"] == "completed"
            task_id = echo["task_id"]
            whole = _data(await call("stream_task_output", {"task_id": task_id, "wait_s": 0}))
            assert (whole["output"], whole["next_offset"], whole["done"]) == ("hello\n", 6, True)
            assert whole["end_offset"] == 6 and whole["task_finished"] and "note" not in whole
            for wait_s in (0, 1):
                past = _data(await call("stream_task_output",
                                        {"task_id": task_id, "from_offset": 10**9, "wait_s": wait_s}))  # fmt: skip
                assert (past["output"], past["next_offset"], past["done"]) == ("", 6, True)
                assert past["state"] == "completed" and past["task_finished"]
                assert "past the end" in past["note"] and "has ended" in past["note"]

            # A running task: its size so far, and that it is still running.
            sleeper = _data(await call("submit_task", {"command": "echo started; sleep 600"}))
            deadline = time.monotonic() + 60
            seen = ""
            while seen != "started\n" and time.monotonic() < deadline:
                chunk = _data(await call("stream_task_output",
                                         {"task_id": sleeper["task_id"], "from_offset": len(seen),
                                          "wait_s": 2}))  # fmt: skip
                seen += chunk["output"]
            assert seen == "started\n"
            for wait_s in (0, 1):
                past = _data(await call("stream_task_output",
                                        {"task_id": sleeper["task_id"], "from_offset": 10**9,
                                         "wait_s": wait_s}))  # fmt: skip
                assert (past["next_offset"], past["done"], past["state"]) == (8, False, "running")
                assert not past["task_finished"] and "still running" in past["note"]
            at_end = _data(await call("stream_task_output",
                                      {"task_id": sleeper["task_id"], "from_offset": 8, "wait_s": 0}))  # fmt: skip
            assert (at_end["next_offset"], at_end["done"]) == (8, False) and "note" not in at_end
            cancelled = _data(await call("cancel_task", {"task_id": sleeper["task_id"]}))
            assert cancelled["state"] == "cancelled"
            over = _data(await call("stream_task_output",
                                    {"task_id": sleeper["task_id"], "from_offset": 10**9}))  # fmt: skip
            assert over["done"] and over["task_finished"] and over["state"] == "cancelled"
            assert over["next_offset"] == over["end_offset"] >= 8

            # The node's refusals, each behind its kind.
            assert _error_text(await call("get_task_result", {"task_id": "nope"})) == (
                "not found: no task with id nope"
            )
            assert _error_text(await call("cancel_task", {"task_id": task_id})).startswith(
                "failed precondition: "
            )
            assert _error_text(
                await call("stream_task_output", {"task_id": task_id, "attempt": 5})
            ).startswith(f"not found: task {task_id} has no attempt 5")
            assert _error_text(await call("submit_task", {"command": " "})).startswith(
                "invalid argument: spec.command"
            )

    anyio.run(session)
