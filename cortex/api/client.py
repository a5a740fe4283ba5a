"""A small Python client for a Cortex node. gRPC errors come back as the
matching Cortex exception, with the server's message."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any, Literal

import grpc

from cortex.api.auth import default_token, token_metadata
from cortex.api.channels import connect_error, open_channel
from cortex.api.tls import ClientTls, client_tls_from_env
from cortex.errors import (
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unauthenticated,
    Unavailable,
)
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc

_ERROR_FOR_STATUS: dict[grpc.StatusCode, type[CortexError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
}


class CortexClient:
    def __init__(
        self,
        address: str,
        timeout_s: float = 30.0,
        token: str | None = None,
        tls: ClientTls | Literal[False] | None = None,
    ) -> None:
        """`token` defaults to $CORTEX_API_TOKEN; nodes without a token ignore it.
        `tls` defaults to the settings in $CORTEX_TLS_CA and friends (plain
        text without them); False means plain text regardless."""
        self.address = address
        self.timeout_s = timeout_s
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

    def _call(self, method: str, request: Any, timeout_s: float | None = None) -> Any:
        try:
            return getattr(self._stub, method)(
                request, timeout=timeout_s or self.timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as err:
            raise self._error(err) from None

    def _error(self, err: grpc.RpcError) -> CortexError:
        """The Cortex exception for a failed call; one that never connected
        says why, naming TLS when a handshake is the likely cause."""
        code = err.code()
        detail = err.details() or str(code)
        if code == grpc.StatusCode.UNAVAILABLE:
            failed = connect_error(self.address, detail, self._tls)
            if failed is not None:
                return failed
        return _ERROR_FOR_STATUS.get(code, CortexError)(detail)

    def submit_task(self, spec: pb.TaskSpec, idempotency_key: str = "") -> pb.SubmitTaskResponse:
        return self._call(
            "SubmitTask", pb.SubmitTaskRequest(spec=spec, idempotency_key=idempotency_key)
        )

    def get_task(self, task_id: str, include_events: bool = False) -> pb.Task:
        return self._call(
            "GetTask", pb.GetTaskRequest(task_id=task_id, include_events=include_events)
        )

    def get_task_result(self, task_id: str, wait: bool = False, timeout_ms: int = 0) -> pb.Task:
        request = pb.GetTaskResultRequest(task_id=task_id, wait=wait, timeout_ms=timeout_ms)
        return self._call("GetTaskResult", request, timeout_s=(timeout_ms or 30_000) / 1000 + 5)

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
        call = self._stub.WatchEvents(
            pb.WatchEventsRequest(follow=follow, **filters),
            timeout=timeout_s,
            metadata=self._metadata,
        )
        headers = dict(call.initial_metadata() or ())
        return int(headers.get("cortex-backlog-end", 0) or 0), self._mapped(call)

    def _mapped(self, call: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from call
        except grpc.RpcError as err:
            raise self._error(err) from None

    def _stream(self, method: str, request: Any, timeout_s: float | None) -> Iterator[Any]:
        try:
            yield from getattr(self._stub, method)(
                request, timeout=timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as err:
            raise self._error(err) from None

    def list_nodes(self, include_removed: bool = False) -> pb.ListNodesResponse:
        return self._call("ListNodes", pb.ListNodesRequest(include_removed=include_removed))

    def join_cluster(
        self, node_id: str, raft_address: str, grpc_address: str, proof: str
    ) -> list[str]:
        request = pb.JoinClusterRequest(
            node_id=node_id, raft_address=raft_address, grpc_address=grpc_address, proof=proof
        )
        return list(self._call("JoinCluster", request).raft_members)
