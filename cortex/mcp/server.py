"""The MCP server: every task-engine operation as a typed tool for agents,
mapped onto the gRPC client. Errors become tool errors with readable text;
the server itself keeps serving."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import closing
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from cortex.api.client import CortexClient
from cortex.api.tls import ClientTls, client_tls_from_env
from cortex.api.views import (
    enum_value,
    node_json,
    status_json,
    task_json,
    workflow_json,
)
from cortex.errors import CortexError
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

if TYPE_CHECKING:
    from cortex.mcp.http import HttpListener

T = TypeVar("T")

INSTRUCTIONS = """Cortex runs shell tasks and DAG workflows on a cluster of machines.
Submit work with submit_task or submit_workflow, follow it with get_task_result
(wait=true blocks until it ends) or stream_task_output (call repeatedly with the
returned next_offset until done is true), and react to failures with
list_dead_letter_tasks / retry_dead_letter_task. Task states: pending, queued,
assigned, running, completed, failed, cancelled, skipped, dead_letter."""

STREAM_CHUNK_LIMIT = 256 * 1024


def _call(action: Callable[[], T]) -> T:
    """Runs a client call; Cortex errors become tool errors the agent can read."""
    try:
        return action()
    except CortexError as err:
        raise ToolError(f"{type(err).__name__}: {err}") from None


def _retry_policy(policy: dict[str, Any] | None) -> pb.RetryPolicy | None:
    if not policy:
        return None
    names = {"maxRetries": "max_retries", "backoffMs": "backoff_ms",
             "backoffMultiplier": "backoff_multiplier", "retryable": "retryable"}  # fmt: skip
    unknown = sorted(set(policy) - set(names) - set(names.values()))
    if unknown:
        raise ToolError(
            f"retry_policy: unknown keys {', '.join(unknown)} (known: {', '.join(names)})"
        )
    fields = {names.get(k, k): v for k, v in policy.items()}
    backoff_ms = fields.pop("backoff_ms", None)
    try:
        message = pb.RetryPolicy(**fields)
        if backoff_ms is not None:
            if isinstance(backoff_ms, bool) or not isinstance(backoff_ms, int) or backoff_ms < 0:
                raise ValueError(
                    f"backoffMs must be a whole number of 0 or more, not {backoff_ms!r}"
                )
            message.backoff.FromMilliseconds(backoff_ms)
    except (TypeError, ValueError) as err:
        raise ToolError(f"retry_policy: {err}") from None
    return message


def _states(enum: Any, names: list[str] | None, what: str) -> list[int]:
    """State names ("running") as the enum's values; a tool error for others."""
    return _call(lambda: [enum_value(enum, name, what) for name in names or []])


_CONSTRAINT_NAMES = {
    "requiresGpu": "requires_gpu", "avoidGaming": "avoid_gaming", "minMemoryMb": "min_memory_mb",
    "minDiskGb": "min_disk_gb", "nodeLabels": "node_labels", "targetNode": "target_node",
    "requiresCapabilities": "requires_capabilities", "allowedNodes": "allowed_nodes",
    "forbiddenNodes": "forbidden_nodes", "maxParallelPerNode": "max_parallel_per_node",
}  # fmt: skip


def _constraints(constraints: dict[str, Any] | None) -> pb.Constraints | None:
    if not constraints:
        return None
    known = set(_CONSTRAINT_NAMES) | set(_CONSTRAINT_NAMES.values())
    unknown = sorted(set(constraints) - known)
    if unknown:
        raise ToolError(
            f"constraints: unknown keys {', '.join(unknown)} (known: {', '.join(_CONSTRAINT_NAMES)})"
        )
    try:
        return pb.Constraints(**{_CONSTRAINT_NAMES.get(k, k): v for k, v in constraints.items()})
    except (TypeError, ValueError) as err:
        raise ToolError(f"constraints: {err}") from None


def build_server(
    node_address: str,
    timeout_s: float = 30.0,
    tls: ClientTls | Literal[False] | None = None,
    http: HttpListener | None = None,
    consistency: int = pb.READ_CONSISTENCY_SESSION,
) -> MCPServer:
    """An MCP server whose tools act on the Cortex node at `node_address`,
    reading at `consistency` (a ReadConsistency value).
    `tls` defaults to $CORTEX_TLS_CA and friends, read (and checked) now.
    With `http`, its HTTP transport refuses requests without that listener's
    bearer token."""
    node_tls = (client_tls_from_env() or False) if tls is None else tls
    # One client for the server's lifetime: its session (the highest Raft
    # index it has seen) makes every tool call read what earlier ones wrote.
    client = CortexClient(node_address, timeout_s=timeout_s, tls=node_tls, consistency=consistency)
    server = MCPServer(
        name="cortex",
        title="Cortex task engine",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        auth=http.auth_settings() if http else None,
        token_verifier=http.token_verifier() if http else None,
    )

    @server.tool()
    def submit_task(
        command: Annotated[
            list[str] | str | None,
            Field(
                description="argv list (['python', 'x.py']) or one string run with /bin/sh -c. "
                "Required for type 'shell'."
            ),
        ] = None,
        type: Annotated[Literal["shell", "noop"], Field(description="executor type")] = "shell",
        env: Annotated[
            dict[str, str] | None, Field(description="extra environment variables")
        ] = None,
        cwd: Annotated[
            str | None, Field(description="working directory on the executing node")
        ] = None,
        timeout_ms: Annotated[
            int | None, Field(description="kill the task after this long", gt=0)
        ] = None,
        priority: Annotated[
            int | None, Field(description="0-10, higher runs first (default 5)", ge=0, le=10)
        ] = None,
        constraints: Annotated[
            dict[str, Any] | None,
            Field(
                description="placement: requiresGpu, avoidGaming, minMemoryMb, minDiskGb, nodeLabels "
                "(['zone=eu', 'ssd']), targetNode, requiresCapabilities, allowedNodes, forbiddenNodes, "
                "maxParallelPerNode"
            ),
        ] = None,
        retry_policy: Annotated[
            dict[str, Any] | None,
            Field(
                description="maxRetries (3), backoffMs (1000), backoffMultiplier (2), retryable (true)"
            ),
        ] = None,
        idempotency_key: Annotated[
            str | None,
            Field(
                description="submitting again with the same key returns the same task instead of a new one; "
                "use it whenever you might retry"
            ),
        ] = None,
        wait: Annotated[
            bool, Field(description="block until the task ends and return its result")
        ] = False,
        wait_timeout_s: Annotated[
            float, Field(description="how long wait blocks", gt=0, le=600)
        ] = 60.0,
    ) -> dict[str, Any]:
        """Run one command on the cluster. The leader places it on the best node
        for its constraints. Returns {task_id, created}; with wait=true also the
        finished task (state, node, attempt, result with exit_code/stdout/stderr)."""
        spec = pb.TaskSpec(type=type, env=env or {}, cwd=cwd or "")
        if isinstance(command, str):
            spec.shell = command
        elif command:
            spec.command.extend(command)
        if timeout_ms is not None:
            spec.timeout.FromMilliseconds(timeout_ms)
        if priority is not None:
            spec.priority = priority
        if (placement := _constraints(constraints)) is not None:
            spec.constraints.CopyFrom(placement)
        if (policy := _retry_policy(retry_policy)) is not None:
            spec.retry_policy.CopyFrom(policy)
        reply = _call(lambda: client.submit_task(spec, idempotency_key or ""))
        out: dict[str, Any] = {"task_id": reply.task.id, "created": reply.created}
        if wait:
            done = _call(
                lambda: client.get_task_result(reply.task.id, True, int(wait_timeout_s * 1000))
            )
            out["task"] = task_json(done.task)
        return out

    @server.tool()
    def submit_workflow(
        definition: Annotated[
            str | dict[str, Any],
            Field(
                description="the workflow: a JSON/YAML text or an object {name, tasks: {key: {type, spec, "
                "dependsOn, condition, constraints, retryPolicy, priority}}, context}"
            ),
        ],
        idempotency_key: Annotated[
            str | None, Field(description="same key → same workflow")
        ] = None,
    ) -> dict[str, Any]:
        """Submit a DAG workflow. Tasks run when their dependencies end: with no
        condition only if all dependencies completed; a JavaScript condition such as
        `parent.build.exitCode !== 0` decides otherwise (it must come to true or false;
        no `return`). Returns {workflow_id, created}; follow it with get_workflow_status."""
        text = definition if isinstance(definition, str) else json.dumps(definition)
        reply = _call(lambda: client.submit_workflow(text, idempotency_key=idempotency_key or ""))
        return {"workflow_id": reply.workflow_id, "created": reply.created}

    @server.tool()
    def get_task_result(
        task_id: Annotated[str, Field(description="the id submit_task returned", min_length=1)],
        wait: Annotated[bool, Field(description="block until the task is terminal")] = False,
        timeout_s: Annotated[float, Field(description="how long wait blocks", gt=0, le=600)] = 60.0,
    ) -> dict[str, Any]:
        """A task's state, node, attempt and result (exit_code, stdout and stderr
        tails). With wait=true, returns once the task is terminal or timeout_s passes
        (check `state`). While queued, `pending_reasons` says why it is not placed."""
        reply = _call(lambda: client.get_task_result(task_id, wait, int(timeout_s * 1000)))
        return task_json(reply.task)

    @server.tool()
    def cancel_task(
        task_id: Annotated[str, Field(min_length=1)],
        reason: Annotated[str, Field(description="recorded in the task's events")] = "",
    ) -> dict[str, Any]:
        """Cancel a queued or running task; a running one has its whole process group
        killed. Fails if the task already ended."""
        return task_json(_call(lambda: client.cancel_task(task_id, reason)).task)

    @server.tool()
    def list_tasks(
        states: Annotated[
            list[str] | None, Field(description="filter, e.g. ['running', 'failed']")
        ] = None,
        node: Annotated[str | None, Field(description="only tasks on this node")] = None,
        workflow_id: Annotated[str | None, Field(description="only tasks of this workflow")] = None,
        type: Annotated[str | None, Field(description="executor type")] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 50,
        page_token: Annotated[str, Field(description="next_page_token of the previous page")] = "",
    ) -> dict[str, Any]:
        """Tasks, newest first, with filters and pagination; returns
        {tasks, total, next_page_token}."""
        wanted = _states(pb.TaskState, states, "states")
        reply = _call(lambda: client.list_tasks(states=wanted, node_id=node or "", workflow_id=workflow_id or "",
                                                type=type or "", page_size=limit, page_token=page_token))  # fmt: skip
        return {"tasks": [task_json(t) for t in reply.tasks], "total": reply.total_size,
                "next_page_token": reply.next_page_token or None}  # fmt: skip

    @server.tool()
    def list_workflows(
        states: Annotated[
            list[str] | None, Field(description="running, completed, failed, cancelled")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 50,
        page_token: str = "",
    ) -> dict[str, Any]:
        """Workflows, newest first, with their state and per-state task counts."""
        wanted = _states(pb.WorkflowState, states, "states")
        reply = _call(
            lambda: client.list_workflows(states=wanted, page_size=limit, page_token=page_token)
        )
        return {"workflows": [workflow_json(w) for w in reply.workflows], "total": reply.total_size,
                "next_page_token": reply.next_page_token or None}  # fmt: skip

    @server.tool()
    def get_workflow_status(workflow_id: Annotated[str, Field(min_length=1)]) -> dict[str, Any]:
        """The whole DAG: each task's key, state, attempt, node, dependencies,
        condition, skip reason and timing, plus the shared workflow context."""
        return workflow_json(_call(lambda: client.get_workflow(workflow_id)).workflow)

    @server.tool()
    def list_dead_letter_tasks(
        limit: Annotated[int, Field(ge=1, le=1000)] = 50, page_token: str = ""
    ) -> dict[str, Any]:
        """Tasks that failed after exhausting their retries, newest first. Inspect
        `result` and `error`, fix the cause, then retry_dead_letter_task."""
        reply = _call(lambda: client.list_dead_letter_tasks(limit, page_token))
        return {"tasks": [task_json(t) for t in reply.tasks], "total": reply.total_size,
                "next_page_token": reply.next_page_token or None}  # fmt: skip

    @server.tool()
    def retry_dead_letter_task(task_id: Annotated[str, Field(min_length=1)]) -> dict[str, Any]:
        """Queue a dead-lettered task again with a fresh retry budget."""
        return task_json(_call(lambda: client.retry_dead_letter_task(task_id)).task)

    @server.tool()
    def drain_node_tasks(
        node_id: Annotated[
            str, Field(min_length=1, description="a node id from the nodes resource")
        ],
        action: Annotated[
            Literal["drain", "cordon", "uncordon"],
            Field(
                description="drain: move work off the node; cordon: no new work; uncordon: active again"
            ),
        ] = "drain",
        deadline_s: Annotated[
            float, Field(description="drain: time running tasks get", gt=0, le=86400)
        ] = 300,
    ) -> dict[str, Any]:
        """Take a node out of service (e.g. before maintenance): draining stops new
        assignments, moves its assigned tasks elsewhere without spending a retry and
        re-queues running ones after the deadline. `uncordon` brings it back."""
        if action == "drain":
            node = _call(lambda: client.drain_node(node_id, deadline_ms=int(deadline_s * 1000)))
        elif action == "cordon":
            node = _call(lambda: client.cordon_node(node_id))
        else:
            node = _call(lambda: client.uncordon_node(node_id))
        return node_json(node.node)

    @server.tool()
    async def stream_task_output(
        ctx: Context,
        task_id: Annotated[str, Field(min_length=1)],
        from_offset: Annotated[
            int, Field(description="byte offset to read from; pass next_offset back", ge=0)
        ] = 0,
        attempt: Annotated[int, Field(description="0 = latest attempt", ge=0)] = 0,
        wait_s: Annotated[
            float, Field(description="wait up to this long for new output", ge=0, le=60)
        ] = 5.0,
        max_bytes: Annotated[int, Field(ge=1, le=STREAM_CHUNK_LIMIT)] = 64 * 1024,
    ) -> dict[str, Any]:
        """Output of a task (stdout and stderr interleaved) since from_offset. Returns
        {output, next_offset, done, attempt, ...}; call again with next_offset until
        done is true (then state and exit_code are set). Waits up to wait_s for new
        output; reports progress notifications when asked for them."""

        def read() -> dict[str, Any]:
            return _read_output(client, task_id, from_offset, attempt, wait_s, max_bytes)

        result = await anyio.to_thread.run_sync(read)
        await ctx.report_progress(
            result["next_offset"], None, f"{result['next_offset']} bytes read"
        )
        return result

    @server.resource("cortex://cluster/status", mime_type="application/json")
    def cluster_status() -> str:
        """Leader, term, applied index, state digest and task counts as seen by the node."""
        return json.dumps(status_json(_call(client.get_cluster_status)), indent=2)

    @server.resource("cortex://cluster/nodes", mime_type="application/json")
    def cluster_nodes() -> str:
        """Every node: status, labels, last resource report, active tasks."""
        return json.dumps([node_json(n) for n in _call(client.list_nodes).nodes], indent=2)

    return server


def _read_output(
    client: CortexClient,
    task_id: str,
    from_offset: int,
    attempt: int,
    wait_s: float,
    max_bytes: int,
) -> dict[str, Any]:
    data, next_offset, end, current_attempt = bytearray(), from_offset, None, attempt
    deadline = time.monotonic() + wait_s
    chunks = client.stream_task_output(task_id, attempt, from_offset, follow=wait_s > 0,
                                       timeout_s=max(wait_s, 0.5) + 2)  # fmt: skip
    # Closed on leaving, so a followed stream ends on the node at once.
    try:
        with closing(chunks):
            for chunk in chunks:
                current_attempt = chunk.attempt or current_attempt
                if chunk.HasField("end"):
                    end = chunk.end
                    break
                data += chunk.data.data
                next_offset = chunk.data.offset + len(chunk.data.data)
                if len(data) >= max_bytes or (data and time.monotonic() >= deadline):
                    break
    except CortexError as err:
        if "deadline" not in str(err).lower():
            raise ToolError(f"{type(err).__name__}: {err}") from None
    out: dict[str, Any] = {
        "task_id": task_id,
        "attempt": current_attempt,
        "output": bytes(data).decode("utf-8", errors="replace"),
        "next_offset": next_offset,
        "done": end is not None,
    }
    if end is not None:
        out.update(state=enum_name(pb.TaskState, end.state), exit_code=end.exit_code,
                   error=end.error or None, interrupted=end.interrupted)  # fmt: skip
    return out
