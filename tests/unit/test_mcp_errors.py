"""Failures of the node reach the agent as tool errors: the node's message
behind a readable kind (`not found: ...`), never the SDK's bare "Error
executing tool", never a traceback. The node here is a stand-in, a real
gRPC server on loopback that answers every call with the status under
test, so that statuses a healthy cluster rarely gives (ALREADY_EXISTS,
INTERNAL ...) are covered too; tests/integration/test_mcp.py meets the real
ones."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import anyio
import grpc
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from cortex.mcp import build_server
from cortex.mcp.tool_calls import CheckedServer, strict_tool
from tests.cluster import free_ports


class _Refusing(grpc.GenericRpcHandler):
    """Every method of every service ends with `status`."""

    def __init__(self) -> None:
        self.status: tuple[grpc.StatusCode, str] = (grpc.StatusCode.UNKNOWN, "")

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        def refuse(request: bytes, context: grpc.ServicerContext) -> bytes:
            context.abort(*self.status)
            raise AssertionError("abort returned")

        def refuse_stream(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            context.abort(*self.status)
            yield b""

        if handler_call_details.method.endswith("/StreamTaskOutput"):
            return grpc.unary_stream_rpc_method_handler(refuse_stream)
        return grpc.unary_unary_rpc_method_handler(refuse)


@pytest.fixture
def refusing_node() -> Iterator[tuple[str, _Refusing]]:
    handler = _Refusing()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler])
    (port,) = free_ports(1)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield f"127.0.0.1:{port}", handler
    finally:
        server.stop(None)


CASES = [
    (grpc.StatusCode.NOT_FOUND, "no task with id abc", "get_task_result", {"task_id": "abc"},
     "not found: no task with id abc"),
    (grpc.StatusCode.INVALID_ARGUMENT, "spec.command: command is empty", "submit_task",
     {"command": " "}, "invalid argument: spec.command: command is empty"),
    (grpc.StatusCode.ALREADY_EXISTS, "workflow w1 exists", "submit_workflow",
     {"definition": "name: w1"}, "already exists: workflow w1 exists"),
    (grpc.StatusCode.FAILED_PRECONDITION, "task t1 already ended", "cancel_task",
     {"task_id": "t1"}, "failed precondition: task t1 already ended"),
    (grpc.StatusCode.UNAVAILABLE, "no leader elected yet", "list_tasks", {},
     "unavailable: no leader elected yet"),
    (grpc.StatusCode.UNAUTHENTICATED, "missing API token", "list_workflows", {},
     "unauthenticated: missing API token"),
    (grpc.StatusCode.INTERNAL, "internal error in DrainNode; see node log", "drain_node_tasks",
     {"node_id": "n2"}, "internal: internal error in DrainNode; see node log"),
    (grpc.StatusCode.PERMISSION_DENIED, "not for you", "retry_dead_letter_task",
     {"task_id": "t1"}, "permission denied: not for you"),
    (grpc.StatusCode.NOT_FOUND, "no task with id gone", "stream_task_output",
     {"task_id": "gone", "wait_s": 0}, "not found: no task with id gone"),
    (grpc.StatusCode.NOT_FOUND, "task t1 has no attempt 9 (it has 1 attempt)",
     "stream_task_output", {"task_id": "t1", "attempt": 9, "wait_s": 1},
     "not found: task t1 has no attempt 9"),
]  # fmt: skip


def test_node_statuses_become_readable_tool_errors(refusing_node: tuple[str, _Refusing]):
    address, handler = refusing_node
    server = build_server(address, timeout_s=10, tls=False)

    async def session() -> list[str]:
        texts = []
        async with Client(server) as client:
            for status, message, tool, arguments, _ in CASES:
                handler.status = (status, message)
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, result)
                texts.append(result.content[0].text)
            # The server kept serving through all of them.
            assert len((await client.list_tools()).tools) == 22
        return texts

    texts = anyio.run(session)
    for text, (_, _, tool, _, expected) in zip(texts, CASES, strict=True):
        assert text.startswith(expected), (tool, text)
        assert "Error executing tool" not in text and "Traceback" not in text


def test_resources_report_node_failures_readably(refusing_node: tuple[str, _Refusing]):
    address, handler = refusing_node
    handler.status = (grpc.StatusCode.UNAVAILABLE, "no leader elected yet")
    server = build_server(address, timeout_s=10, tls=False)

    async def session() -> str:
        async with Client(server) as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource("cortex://cluster/status")
            return str(refused.value)

    assert "unavailable: no leader elected yet" in anyio.run(session)


def test_a_crash_in_a_tool_is_named_and_the_server_serves_on():
    def divide(numerator: int, denominator: int) -> dict[str, Any]:
        """Divides; crashes on zero."""
        return {"quotient": numerator // denominator}

    server = CheckedServer([strict_tool(divide)], name="crashing")

    async def session() -> tuple[str, dict[str, Any] | None]:
        async with Client(server) as client:
            crashed = await client.call_tool("divide", {"numerator": 1, "denominator": 0})
            assert crashed.is_error
            fine = await client.call_tool("divide", {"numerator": 7, "denominator": 2})
            return crashed.content[0].text, fine.structured_content

    text, fine = anyio.run(session)
    assert (
        text
        == "divide failed: internal error (ZeroDivisionError: integer division or modulo by zero)"
    )
    assert fine == {"quotient": 3}
