"""A small Python client for a Cortex node. gRPC errors come back as the
matching Cortex exception, with the server's message. A call a busy node
refuses (RESOURCE_EXHAUSTED with a retry hint) is retried after the hint,
doubling with each refusal; a wait for a task's result that finds the
node's waits all taken polls instead."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Literal

import grpc

from cortex.api.auth import default_token, token_metadata
from cortex.api.channels import open_channel, retry_after_s, rpc_error
from cortex.api.tls import ClientTls, client_tls_from_env
from cortex.errors import CortexError, ResourceExhausted
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc

# Retries of a call refused by a busy node, and the longest pause between two.
BUSY_RETRIES = 5
MAX_BUSY_PAUSE_S = 5.0
_BACKLOG_END_HEADER = "cortex-backlog-end"
_TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "skipped", "dead_letter"})


def busy_pause(hint_s: float, retry: int) -> float:
    """The pause before retry number `retry` (0 first) of a refused call:
    the node's hint, doubled per retry, capped, with jitter so refused
    clients do not all come back at once."""
    return min(hint_s * 2**retry, MAX_BUSY_PAUSE_S) * random.uniform(0.5, 1.0)


class CortexClient:
    def __init__(
        self,
        address: str,
        timeout_s: float = 30.0,
        token: str | None = None,
        tls: ClientTls | Literal[False] | None = None,
        busy_retries: int = BUSY_RETRIES,
    ) -> None:
        """`token` defaults to $CORTEX_API_TOKEN; nodes without a token ignore it.
        `tls` defaults to the settings in $CORTEX_TLS_CA and friends (plain
        text without them); False means plain text regardless. A call the
        node refuses as busy is tried up to `busy_retries` more times."""
        self.address = address
        self.timeout_s = timeout_s
        self.busy_retries = busy_retries
        self._metadata = token_metadata(token if token is not None else default_token())
        self._tls = client_tls_from_env() if tls is None else (tls or None)
        self._channel = open_channel(address, self._tls)
        self._stub = pb_grpc.CortexStub(self._channel)

    def __enter__(self) -> CortexClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(
        self,
        method: str,
        request: Any,
        timeout_s: float | None = None,
        busy_retries: int | None = None,
    ) -> Any:
        retries = self.busy_retries if busy_retries is None else busy_retries
        for retry in range(retries + 1):
            try:
                return getattr(self._stub, method)(
                    request, timeout=timeout_s or self.timeout_s, metadata=self._metadata
                )
            except grpc.RpcError as err:
                hint = retry_after_s(err)
                if hint is None or retry == retries:
                    raise self._error(err) from None
                time.sleep(busy_pause(hint, retry))
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, err: grpc.RpcError) -> CortexError:
        """The Cortex exception for a failed call; one that never connected
        says why, naming TLS when a handshake is the likely cause."""
        return rpc_error(self.address, err, self._tls)

    def submit_task(self, spec: pb.TaskSpec, idempotency_key: str = "") -> pb.SubmitTaskResponse:
        return self._call(
            "SubmitTask", pb.SubmitTaskRequest(spec=spec, idempotency_key=idempotency_key)
        )

    def get_task(self, task_id: str, include_events: bool = False) -> pb.Task:
        return self._call(
            "GetTask", pb.GetTaskRequest(task_id=task_id, include_events=include_events)
        )

    def get_task_result(self, task_id: str, wait: bool = False, timeout_ms: int = 0) -> pb.Task:
        """With `wait`, the task once terminal or when `timeout_ms` (default
        30 s) ends. A node whose waits are all taken is polled instead."""
        if not wait:
            return self._call("GetTaskResult", pb.GetTaskResultRequest(task_id=task_id))
        deadline = time.monotonic() + (timeout_ms or 30_000) / 1000
        polls = 0
        while True:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                return self._call("GetTaskResult", pb.GetTaskResultRequest(task_id=task_id))
            request = pb.GetTaskResultRequest(
                task_id=task_id, wait=True, timeout_ms=max(int(remaining_s * 1000), 1)
            )
            try:
                return self._call(
                    "GetTaskResult", request, timeout_s=remaining_s + 5, busy_retries=0
                )
            except ResourceExhausted as busy:
                task = self._call("GetTaskResult", pb.GetTaskResultRequest(task_id=task_id))
                if task.state in _TERMINAL_STATES:
                    return task
                pause = busy_pause(max(busy.retry_after_s, 0.5), min(polls, 3))
                time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
                polls += 1

    def list_tasks(self, **filters: Any) -> pb.ListTasksResponse:
        return self._call("ListTasks", pb.ListTasksRequest(**filters))

    def cancel_task(self, task_id: str, reason: str = "") -> pb.Task:
        return self._call("CancelTask", pb.CancelTaskRequest(task_id=task_id, reason=reason))

    def cluster_status(self) -> pb.ClusterStatusResponse:
        return self._call("ClusterStatus", pb.ClusterStatusRequest())

    def list_dead_letter_tasks(
        self, page_size: int = 100, page_token: str = ""
    ) -> pb.ListTasksResponse:
        request = pb.ListDeadLetterTasksRequest(page_size=page_size, page_token=page_token)
        return self._call("ListDeadLetterTasks", request)

    def retry_dead_letter_task(self, task_id: str) -> pb.Task:
        return self._call("RetryDeadLetterTask", pb.RetryDeadLetterTaskRequest(task_id=task_id))

    def drain_node(self, node_id: str, deadline_ms: int = 0) -> pb.NodeInfo:
        return self._call(
            "DrainNode", pb.DrainNodeRequest(node_id=node_id, deadline_ms=deadline_ms)
        )

    def cordon_node(self, node_id: str) -> pb.NodeInfo:
        return self._call("CordonNode", pb.NodeRequest(node_id=node_id))

    def uncordon_node(self, node_id: str) -> pb.NodeInfo:
        return self._call("UncordonNode", pb.NodeRequest(node_id=node_id))

    def remove_node(self, node_id: str, reason: str = "") -> pb.RemoveNodeResponse:
        return self._call("RemoveNode", pb.RemoveNodeRequest(node_id=node_id, reason=reason))

    def submit_workflow(
        self, definition: str, format: str = "", idempotency_key: str = ""
    ) -> pb.SubmitWorkflowResponse:
        request = pb.SubmitWorkflowRequest(
            definition=definition, format=format, idempotency_key=idempotency_key
        )
        return self._call("SubmitWorkflow", request)

    def get_workflow_status(self, workflow_id: str) -> pb.Workflow:
        return self._call("GetWorkflowStatus", pb.GetWorkflowStatusRequest(workflow_id=workflow_id))

    def list_workflows(self, **filters: Any) -> pb.ListWorkflowsResponse:
        return self._call("ListWorkflows", pb.ListWorkflowsRequest(**filters))

    def cancel_workflow(self, workflow_id: str, reason: str = "") -> pb.Workflow:
        return self._call(
            "CancelWorkflow", pb.CancelWorkflowRequest(workflow_id=workflow_id, reason=reason)
        )

    def stream_task_output(
        self,
        task_id: str,
        attempt: int = 0,
        from_offset: int = 0,
        follow: bool = False,
        stream: str = "",
        timeout_s: float | None = None,
    ) -> Iterator[pb.OutputChunk]:
        """Yields chunks, then the end message. Errors arrive as Cortex exceptions."""
        request = pb.StreamTaskOutputRequest(
            task_id=task_id, attempt=attempt, from_offset=from_offset, follow=follow, stream=stream
        )
        yield from self._stream("StreamTaskOutput", request, timeout_s)

    def watch_events(
        self, timeout_s: float | None = None, follow: bool = True, **filters: Any
    ) -> Iterator[pb.Event]:
        request = pb.WatchEventsRequest(follow=follow, **filters)
        yield from self._stream("WatchEvents", request, timeout_s)

    def watch_events_backlog(
        self, timeout_s: float | None = None, follow: bool = True, **filters: Any
    ) -> tuple[int, Iterator[pb.Event]]:
        """`watch_events` once the watch has begun, with the seq of the last
        event already applied that it sends (0 when none), from the
        `cortex-backlog-end` header."""
        for retry in range(self.busy_retries + 1):
            call = self._stub.WatchEvents(
                pb.WatchEventsRequest(follow=follow, **filters),
                timeout=timeout_s,
                metadata=self._metadata,
            )
            headers = dict(call.initial_metadata() or ())
            if _BACKLOG_END_HEADER in headers:
                break
            # A watch always sends its headers first: without them, it ended
            # before it began, so waiting for its status cannot hang.
            hint = retry_after_s(call)
            if hint is None or retry == self.busy_retries:
                break
            time.sleep(busy_pause(hint, retry))
        return int(headers.get(_BACKLOG_END_HEADER, 0) or 0), self._mapped(call)

    def _mapped(self, call: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from call
        except grpc.RpcError as err:
            raise self._error(err) from None

    def _stream(self, method: str, request: Any, timeout_s: float | None) -> Iterator[Any]:
        """A server stream; one refused as busy before its first message is
        opened again after the hint."""
        for retry in range(self.busy_retries + 1):
            received = False
            try:
                for message in getattr(self._stub, method)(
                    request, timeout=timeout_s, metadata=self._metadata
                ):
                    received = True
                    yield message
                return
            except grpc.RpcError as err:
                hint = retry_after_s(err)
                if hint is None or received or retry == self.busy_retries:
                    raise self._error(err) from None
                time.sleep(busy_pause(hint, retry))

    def list_nodes(self, include_removed: bool = False) -> pb.ListNodesResponse:
        return self._call("ListNodes", pb.ListNodesRequest(include_removed=include_removed))

    def join_challenge(self) -> str:
        """A nonce for `join_cluster`, valid once and briefly, on this node only."""
        return str(self._call("JoinChallenge", pb.JoinChallengeRequest()).nonce)

    def join_cluster(self, request: pb.JoinClusterRequest) -> list[str]:
        return list(self._call("JoinCluster", request).raft_members)
