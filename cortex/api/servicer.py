"""gRPC servicer: unpacks requests, calls the node's operations (tasks,
workflows, node administration, cluster status, joins), packs replies, and
maps Cortex errors to status codes in one place."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from cortex.api.channels import RETRY_AFTER_HEADER
from cortex.api.convert import (
    cluster_to_proto,
    node_to_proto,
    page_token,
    spec_from_proto,
    task_page_to_proto,
    task_to_proto,
)
from cortex.api.peer_convert import removal_to_proto
from cortex.api.workflow_convert import workflow_to_proto
from cortex.errors import (
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from cortex.membership.administration import NodeAdministration
from cortex.membership.cluster_status import ClusterStatus
from cortex.membership.joining import JoinAdmission, JoinClaim
from cortex.output import StreamingService
from cortex.task_operations import TaskOperations
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from cortex.workflows.operations import WorkflowOperations

log = logging.getLogger(__name__)

STATUS_FOR_ERROR: dict[type[CortexError], grpc.StatusCode] = {
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
}

Handler = TypeVar("Handler", bound=Callable[..., Any])
MAX_WAIT_MS = 600_000


def status_for(err: CortexError) -> grpc.StatusCode:
    for kind in type(err).__mro__:
        if kind in STATUS_FOR_ERROR:
            return STATUS_FOR_ERROR[kind]
    return grpc.StatusCode.INTERNAL


def _abort(err: Exception, method: str, context: grpc.ServicerContext) -> None:
    """Ends the call with the status for a Cortex error, or INTERNAL for a bug."""
    if isinstance(err, ResourceExhausted):
        # A node busy further on (a relay's source): the caller's retry hint.
        context.set_trailing_metadata(
            ((RETRY_AFTER_HEADER, str(int(max(err.retry_after_s, 0.1) * 1000))),)
        )
    if isinstance(err, CortexError):
        context.abort(status_for(err), str(err))
    log.exception("%s failed", method)
    context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}; see node log")


def maps_errors(method: Handler) -> Handler:
    @functools.wraps(method)
    def wrapper(self: CortexServicer, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except Exception as err:
            _abort(err, method.__name__, context)

    return wrapper  # type: ignore[return-value]


def maps_stream_errors(method: Handler) -> Handler:
    """`maps_errors` for server streams: errors surface while iterating."""

    @functools.wraps(method)
    def wrapper(self: CortexServicer, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            yield from method(self, request, context)
        except Exception as err:
            _abort(err, method.__name__, context)

    return wrapper  # type: ignore[return-value]


class CortexServicer(pb_grpc.CortexServicer):
    def __init__(
        self,
        tasks: TaskOperations,
        workflows: WorkflowOperations,
        nodes: NodeAdministration,
        cluster: ClusterStatus,
        joins: JoinAdmission,
        streaming: StreamingService | None = None,
    ) -> None:
        self._tasks = tasks
        self._workflows = workflows
        self._nodes = nodes
        self._cluster = cluster
        self._joins = joins
        self._streaming = streaming

    @maps_errors
    def SubmitTask(
        self, request: pb.SubmitTaskRequest, context: grpc.ServicerContext
    ) -> pb.SubmitTaskResponse:
        if not request.HasField("spec"):
            raise InvalidArgument("spec is missing")
        outcome = self._tasks.submit(spec_from_proto(request.spec), request.idempotency_key or None)
        return pb.SubmitTaskResponse(
            task_id=outcome.task_id, created=outcome.created, raft_index=outcome.raft_index
        )

    @maps_errors
    def GetTask(self, request: pb.GetTaskRequest, context: grpc.ServicerContext) -> pb.Task:
        task = self._tasks.get(request.task_id)
        events = self._tasks.events(task.id) if request.include_events else None
        return task_to_proto(task, events, self._tasks.pending_reasons(task))

    @maps_errors
    def GetTaskResult(
        self, request: pb.GetTaskResultRequest, context: grpc.ServicerContext
    ) -> pb.Task:
        if request.timeout_ms < 0 or request.timeout_ms > MAX_WAIT_MS:
            raise InvalidArgument(f"timeout_ms must be between 0 and {MAX_WAIT_MS}")
        if request.wait:
            timeout_s = (request.timeout_ms or 30_000) / 1000
            remaining = context.time_remaining()
            if remaining is not None:
                timeout_s = min(timeout_s, max(remaining - 0.2, 0))
            task = self._tasks.wait(request.task_id, timeout_s)
        else:
            task = self._tasks.get(request.task_id)
        return task_to_proto(task, None, self._tasks.pending_reasons(task))

    @maps_errors
    def ListTasks(
        self, request: pb.ListTasksRequest, context: grpc.ServicerContext
    ) -> pb.ListTasksResponse:
        page = self._tasks.list_tasks(
            list(request.states),
            request.type or None,
            request.workflow_id or None,
            request.node or None,
            request.page_size,
            request.page_token,
        )
        return task_page_to_proto(page)

    @maps_errors
    def CancelTask(self, request: pb.CancelTaskRequest, context: grpc.ServicerContext) -> pb.Task:
        return task_to_proto(self._tasks.cancel(request.task_id, request.reason))

    @maps_errors
    def ClusterStatus(
        self, request: pb.ClusterStatusRequest, context: grpc.ServicerContext
    ) -> pb.ClusterStatusResponse:
        return cluster_to_proto(self._cluster.status())

    @maps_errors
    def ListDeadLetterTasks(
        self, request: pb.ListDeadLetterTasksRequest, context: grpc.ServicerContext
    ) -> pb.ListTasksResponse:
        page = self._tasks.list_dead_letter(request.page_size, request.page_token)
        return task_page_to_proto(page)

    @maps_errors
    def RetryDeadLetterTask(
        self, request: pb.RetryDeadLetterTaskRequest, context: grpc.ServicerContext
    ) -> pb.Task:
        return task_to_proto(self._tasks.retry_dead_letter(request.task_id))

    @maps_errors
    def SubmitWorkflow(
        self, request: pb.SubmitWorkflowRequest, context: grpc.ServicerContext
    ) -> pb.SubmitWorkflowResponse:
        outcome = self._workflows.submit(
            request.definition, request.format, request.idempotency_key or None
        )
        return pb.SubmitWorkflowResponse(workflow_id=outcome.workflow_id, created=outcome.created)

    @maps_errors
    def GetWorkflowStatus(
        self, request: pb.GetWorkflowStatusRequest, context: grpc.ServicerContext
    ) -> pb.Workflow:
        return workflow_to_proto(self._workflows.get(request.workflow_id))

    @maps_errors
    def ListWorkflows(
        self, request: pb.ListWorkflowsRequest, context: grpc.ServicerContext
    ) -> pb.ListWorkflowsResponse:
        page = self._workflows.list_workflows(
            list(request.states), request.page_size, request.page_token
        )
        return pb.ListWorkflowsResponse(
            workflows=[workflow_to_proto(w) for w in page.workflows],
            next_page_token=page_token(page.next_offset),
            total=page.total,
        )

    @maps_errors
    def CancelWorkflow(
        self, request: pb.CancelWorkflowRequest, context: grpc.ServicerContext
    ) -> pb.Workflow:
        return workflow_to_proto(self._workflows.cancel(request.workflow_id, request.reason))

    @maps_errors
    def DrainNode(self, request: pb.DrainNodeRequest, context: grpc.ServicerContext) -> pb.NodeInfo:
        return node_to_proto(self._nodes.drain(request.node_id, request.deadline_ms))

    @maps_errors
    def CordonNode(self, request: pb.NodeRequest, context: grpc.ServicerContext) -> pb.NodeInfo:
        return node_to_proto(self._nodes.cordon(request.node_id))

    @maps_errors
    def UncordonNode(self, request: pb.NodeRequest, context: grpc.ServicerContext) -> pb.NodeInfo:
        return node_to_proto(self._nodes.uncordon(request.node_id))

    @maps_errors
    def RemoveNode(
        self, request: pb.RemoveNodeRequest, context: grpc.ServicerContext
    ) -> pb.RemoveNodeResponse:
        return removal_to_proto(self._nodes.remove(request.node_id, request.reason))

    @maps_errors
    def ListNodes(
        self, request: pb.ListNodesRequest, context: grpc.ServicerContext
    ) -> pb.ListNodesResponse:
        nodes = self._cluster.list_nodes(request.include_removed)
        return pb.ListNodesResponse(nodes=[node_to_proto(n) for n in nodes])

    @maps_errors
    def JoinChallenge(
        self, request: pb.JoinChallengeRequest, context: grpc.ServicerContext
    ) -> pb.JoinChallengeResponse:
        nonce, ttl_s = self._joins.challenge()
        return pb.JoinChallengeResponse(nonce=nonce, ttl_ms=int(ttl_s * 1000))

    @maps_errors
    def JoinCluster(
        self, request: pb.JoinClusterRequest, context: grpc.ServicerContext
    ) -> pb.JoinClusterResponse:
        if not request.node_id or not request.raft_address:
            raise InvalidArgument("node_id and raft_address are required to join")
        claim = JoinClaim(
            request.node_id, request.raft_address, request.grpc_address, request.peer_address
        )
        members = self._joins.admit(claim, request.nonce, request.proof)
        return pb.JoinClusterResponse(
            raft_members=members, leader=self._cluster.leader_address or ""
        )

    @maps_stream_errors
    def StreamTaskOutput(
        self, request: pb.StreamTaskOutputRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.OutputChunk]:
        if self._streaming is None:
            raise FailedPrecondition("this server does not stream output")
        return self._streaming.task_output(request, context)

    @maps_stream_errors
    def WatchEvents(
        self, request: pb.WatchEventsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.Event]:
        if self._streaming is None:
            raise FailedPrecondition("this server does not stream events")
        return self._streaming.watch_events(request, context)
