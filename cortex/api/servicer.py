"""gRPC servicer of cortex.v1.CortexService: unpacks requests, calls the
node's operations (tasks, workflows, schedules, limits, node administration,
cluster status), packs replies, and maps Cortex errors to status codes in
one place (cortex.api.status_codes). Every read waits for the consistency
its ReadOptions ask for (`ReadGate`) and every response carries a
ResponseHeader; every write says the Raft index it committed at."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from cortex.api.channels import TRACEPARENT_HEADER
from cortex.api.consistency import ReadGate, caught_up_before_not_found
from cortex.api.convert import (
    created_window,
    duration_ms,
    event_to_proto,
    known_value,
    names_filter,
    newest_first,
    spec_from_proto,
    task_to_proto,
)
from cortex.api.limit_calls import LimitCalls
from cortex.api.node_convert import cluster_to_proto, node_to_proto
from cortex.api.page_tokens import PageTokens, page_size, window_filters
from cortex.api.peer_convert import removal_to_proto
from cortex.api.schedule_calls import ScheduleCalls
from cortex.api.status_codes import maps_errors, maps_stream_errors, status_for
from cortex.api.workflow_convert import workflow_to_proto
from cortex.errors import CortexError, FailedPrecondition, InvalidArgument
from cortex.limit_operations import LimitOperations
from cortex.membership.administration import NodeAdministration
from cortex.membership.cluster_status import ClusterStatus, NodeStatusView
from cortex.output import EventFilter, EventWatch, StreamingService
from cortex.proto_enums import enum_name, enum_value
from cortex.requests import MAX_WAIT_MS
from cortex.schedules.operations import ScheduleOperations
from cortex.state.queries import TaskView
from cortex.task_operations import TaskOperations
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from cortex.workflows.operations import WorkflowOperations

__all__ = ["CortexServicer", "maps_errors", "maps_stream_errors", "status_for"]

DEFAULT_WAIT_MS = 30_000


def _traceparent(context: grpc.ServicerContext) -> str | None:
    """The caller's W3C trace context (metadata `traceparent`), as sent:
    the operations ignore a malformed one and start a trace of their own."""
    for key, value in context.invocation_metadata() or ():
        if key == TRACEPARENT_HEADER and isinstance(value, str):
            return value
    return None


def _wait_ms(request: pb.GetTaskResultRequest) -> int:
    if not request.HasField("timeout"):
        return DEFAULT_WAIT_MS
    wait_ms = duration_ms(request.timeout)
    if wait_ms < 0 or wait_ms > MAX_WAIT_MS:
        raise InvalidArgument(f"timeout must be between 0 and {MAX_WAIT_MS // 1000} s")
    return wait_ms or DEFAULT_WAIT_MS


class CortexServicer(ScheduleCalls, LimitCalls, pb_grpc.CortexServiceServicer):
    """Every RPC of CortexService; schedules' and limits' come from their
    own classes (`ScheduleCalls`, `LimitCalls`)."""

    def __init__(
        self,
        tasks: TaskOperations,
        workflows: WorkflowOperations,
        nodes: NodeAdministration,
        cluster: ClusterStatus,
        reads: ReadGate,
        streaming: StreamingService | None = None,
        *,
        schedules: ScheduleOperations | None = None,
        limits: LimitOperations | None = None,
    ) -> None:
        self._tasks = tasks
        self._workflows = workflows
        self._nodes = nodes
        self._cluster = cluster
        self._reads = reads
        self._streaming = streaming
        self._schedules = schedules
        self._limits = limits

    def _task(self, task: TaskView, assigned: bool = True) -> pb.Task:
        return task_to_proto(task, self._tasks.pending_reasons(task, assigned))

    # -- tasks --------------------------------------------------------------------

    @maps_errors
    def SubmitTask(
        self, request: pb.SubmitTaskRequest, context: grpc.ServicerContext
    ) -> pb.SubmitTaskResponse:
        if not request.HasField("spec"):
            raise InvalidArgument("spec is missing")
        outcome = self._tasks.submit(
            spec_from_proto(request.spec), request.idempotency_key or None, _traceparent(context)
        )
        return pb.SubmitTaskResponse(
            task=self._task(outcome.task, assigned=False),
            created=outcome.created,
            commit_index=outcome.raft_index,
            header=self._reads.header(),
        )

    @maps_errors
    def SubmitTasks(
        self, request: pb.SubmitTasksRequest, context: grpc.ServicerContext
    ) -> pb.SubmitTasksResponse:
        items = []
        for number, task in enumerate(request.tasks):
            try:
                if not task.HasField("spec"):
                    raise InvalidArgument("spec is missing")
                items.append((spec_from_proto(task.spec), task.idempotency_key or None))
            except InvalidArgument as err:
                raise InvalidArgument(f"tasks[{number}].{err}") from None
        outcomes = self._tasks.submit_many(items, _traceparent(context))
        accepted = [o for o in outcomes if not isinstance(o, CortexError)]
        reasons = iter(self._tasks.pending_reasons_all([o.task for o in accepted], assigned=False))
        results = [
            pb.SubmitTasksResult(error=str(outcome), error_code=status_for(outcome).value[0])
            if isinstance(outcome, CortexError)
            else pb.SubmitTasksResult(
                task=task_to_proto(outcome.task, next(reasons)), created=outcome.created
            )
            for outcome in outcomes
        ]
        indexes = [o.raft_index for o in accepted]
        return pb.SubmitTasksResponse(
            results=results,
            commit_index=max(indexes, default=0),
            header=self._reads.header(),
        )

    @maps_errors
    def GetTask(
        self, request: pb.GetTaskRequest, context: grpc.ServicerContext
    ) -> pb.GetTaskResponse:
        served = self._reads.before_read(request.read_options, context)
        task = self._tasks.get(request.task_id)
        events = self._tasks.events(task.id) if request.include_events else []
        return pb.GetTaskResponse(
            task=self._task(task),
            events=[event_to_proto(event) for event in events],
            header=self._reads.header(served),
        )

    @maps_errors
    def GetTaskResult(
        self, request: pb.GetTaskResultRequest, context: grpc.ServicerContext
    ) -> pb.GetTaskResultResponse:
        wait_ms = _wait_ms(request)
        served = self._reads.before_read(request.read_options, context)
        if request.wait:
            timeout_s = wait_ms / 1000
            remaining = context.time_remaining()
            if remaining is not None:
                timeout_s = min(timeout_s, max(remaining - 0.2, 0))
            task = self._tasks.wait(request.task_id, timeout_s)
        else:
            task = self._tasks.get(request.task_id)
        return pb.GetTaskResultResponse(task=self._task(task), header=self._reads.header(served))

    @maps_errors
    def ListTasks(
        self, request: pb.ListTasksRequest, context: grpc.ServicerContext
    ) -> pb.ListTasksResponse:
        states = names_filter(pb.TaskState, request.states, "states")
        newest = newest_first(request.order)
        created = created_window(request.create_time_range)
        filters = {
            "states": sorted(states),
            "type": request.type,
            "workflow_id": request.workflow_id,
            "node_id": request.node_id,
            **window_filters(created),
        }
        tokens = PageTokens("tasks", filters, newest)
        after = tokens.read(request.page_token)
        limit = page_size(request.page_size)
        served = self._reads.before_read(request.read_options, context)
        page = self._tasks.list_tasks(
            states or None,
            request.type or None,
            self._workflows.filter_id(request.workflow_id),
            request.node_id or None,
            limit,
            after,
            newest,
            created,
        )
        return pb.ListTasksResponse(
            tasks=[task_to_proto(task) for task in page.tasks],
            next_page_token=tokens.issue(page.next_key),
            total_size=page.total,
            header=self._reads.header(served),
        )

    @maps_errors
    @caught_up_before_not_found
    def CancelTask(
        self, request: pb.CancelTaskRequest, context: grpc.ServicerContext
    ) -> pb.CancelTaskResponse:
        written = self._tasks.cancel(request.task_id, request.reason)
        return pb.CancelTaskResponse(
            task=self._task(written.task),
            commit_index=written.raft_index,
            header=self._reads.header(),
        )

    @maps_errors
    def ListDeadLetterTasks(
        self, request: pb.ListDeadLetterTasksRequest, context: grpc.ServicerContext
    ) -> pb.ListDeadLetterTasksResponse:
        newest = newest_first(request.order)
        created = created_window(request.create_time_range)
        tokens = PageTokens("dead_letter_tasks", window_filters(created), newest)
        after = tokens.read(request.page_token)
        limit = page_size(request.page_size)
        served = self._reads.before_read(request.read_options, context)
        page = self._tasks.list_dead_letter(limit, after, newest, created)
        return pb.ListDeadLetterTasksResponse(
            tasks=[task_to_proto(task) for task in page.tasks],
            next_page_token=tokens.issue(page.next_key),
            total_size=page.total,
            header=self._reads.header(served),
        )

    @maps_errors
    @caught_up_before_not_found
    def RetryDeadLetterTask(
        self, request: pb.RetryDeadLetterTaskRequest, context: grpc.ServicerContext
    ) -> pb.RetryDeadLetterTaskResponse:
        written = self._tasks.retry_dead_letter(request.task_id)
        return pb.RetryDeadLetterTaskResponse(
            task=self._task(written.task),
            commit_index=written.raft_index,
            header=self._reads.header(),
            retry_budget=written.retry_budget,
            workflow_state=enum_value(pb.WorkflowState, written.workflow_state),
            rejoined_workflow=written.rejoined_workflow,
        )

    # -- workflows ----------------------------------------------------------------

    @maps_errors
    def SubmitWorkflow(
        self, request: pb.SubmitWorkflowRequest, context: grpc.ServicerContext
    ) -> pb.SubmitWorkflowResponse:
        known_value(pb.DefinitionFormat, request.format, "format")
        outcome = self._workflows.submit(
            request.definition,
            enum_name(pb.DefinitionFormat, request.format),
            request.idempotency_key or None,
            _traceparent(context),
        )
        return pb.SubmitWorkflowResponse(
            workflow_id=outcome.workflow_id,
            created=outcome.created,
            commit_index=outcome.raft_index,
            header=self._reads.header(),
        )

    @maps_errors
    def GetWorkflow(
        self, request: pb.GetWorkflowRequest, context: grpc.ServicerContext
    ) -> pb.GetWorkflowResponse:
        served = self._reads.before_read(request.read_options, context)
        workflow = self._workflows.get(request.workflow_id)
        return pb.GetWorkflowResponse(
            workflow=workflow_to_proto(workflow), header=self._reads.header(served)
        )

    @maps_errors
    def ListWorkflows(
        self, request: pb.ListWorkflowsRequest, context: grpc.ServicerContext
    ) -> pb.ListWorkflowsResponse:
        states = names_filter(pb.WorkflowState, request.states, "states")
        newest = newest_first(request.order)
        created = created_window(request.create_time_range)
        filters = {"states": sorted(states), **window_filters(created)}
        tokens = PageTokens("workflows", filters, newest)
        after = tokens.read(request.page_token)
        limit = page_size(request.page_size)
        served = self._reads.before_read(request.read_options, context)
        page = self._workflows.list_workflows(states or None, limit, after, newest, created)
        return pb.ListWorkflowsResponse(
            workflows=[workflow_to_proto(w) for w in page.workflows],
            next_page_token=tokens.issue(page.next_key),
            total_size=page.total,
            header=self._reads.header(served),
        )

    @maps_errors
    @caught_up_before_not_found
    def CancelWorkflow(
        self, request: pb.CancelWorkflowRequest, context: grpc.ServicerContext
    ) -> pb.CancelWorkflowResponse:
        written = self._workflows.cancel(request.workflow_id, request.reason)
        return pb.CancelWorkflowResponse(
            workflow=workflow_to_proto(written.workflow),
            commit_index=written.raft_index,
            header=self._reads.header(),
        )

    # -- streams ------------------------------------------------------------------

    def _streams(self, what: str) -> StreamingService:
        if self._streaming is None:
            raise FailedPrecondition(f"this server does not stream {what}")
        return self._streaming

    @maps_stream_errors
    def StreamTaskOutput(
        self, request: pb.StreamTaskOutputRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.StreamTaskOutputResponse]:
        streaming = self._streams("output")
        self._reads.before_read(request.read_options, context)
        if request.task_id:
            request.task_id = self._tasks.resolve_id(request.task_id)
        yield from streaming.task_output(request, context)

    @maps_stream_errors
    def WatchEvents(
        self, request: pb.WatchEventsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.WatchEventsResponse]:
        streaming = self._streams("events")
        types = names_filter(pb.EventType, request.types, "types")
        self._reads.before_read(request.read_options, context)
        task_id = self._tasks.resolve_id(request.task_id) if request.task_id else None
        workflow_id = (
            self._workflows.resolve_id(request.workflow_id) if request.workflow_id else None
        )
        watch = EventWatch(
            EventFilter(task_id, workflow_id, tuple(types)),
            after_seq=request.after_seq,
            from_start=request.from_start,
            follow=request.follow,
        )
        for event in streaming.watch_events(watch, context):
            yield pb.WatchEventsResponse(event=event_to_proto(event))

    # -- nodes and the cluster ----------------------------------------------------

    @maps_errors
    def ListNodes(
        self, request: pb.ListNodesRequest, context: grpc.ServicerContext
    ) -> pb.ListNodesResponse:
        served = self._reads.before_read(request.read_options, context)
        nodes = self._cluster.list_nodes(request.include_removed)
        return pb.ListNodesResponse(
            nodes=[node_to_proto(n) for n in nodes], header=self._reads.header(served)
        )

    def _node_written(self, view: NodeStatusView) -> tuple[pb.Node, int, pb.ResponseHeader]:
        """A node as a write left it, the index the write committed at (this
        node's applied index right after it applied it, so at or past it),
        and the header."""
        header = self._reads.header()
        return node_to_proto(view), header.applied_index, header

    @maps_errors
    @caught_up_before_not_found
    def DrainNode(
        self, request: pb.DrainNodeRequest, context: grpc.ServicerContext
    ) -> pb.DrainNodeResponse:
        deadline_ms = duration_ms(request.deadline) if request.HasField("deadline") else 0
        if deadline_ms < 0:
            raise InvalidArgument("deadline must not be negative")
        node, index, header = self._node_written(self._nodes.drain(request.node_id, deadline_ms))
        return pb.DrainNodeResponse(node=node, commit_index=index, header=header)

    @maps_errors
    @caught_up_before_not_found
    def CordonNode(
        self, request: pb.CordonNodeRequest, context: grpc.ServicerContext
    ) -> pb.CordonNodeResponse:
        node, index, header = self._node_written(self._nodes.cordon(request.node_id))
        return pb.CordonNodeResponse(node=node, commit_index=index, header=header)

    @maps_errors
    @caught_up_before_not_found
    def UncordonNode(
        self, request: pb.UncordonNodeRequest, context: grpc.ServicerContext
    ) -> pb.UncordonNodeResponse:
        node, index, header = self._node_written(self._nodes.uncordon(request.node_id))
        return pb.UncordonNodeResponse(node=node, commit_index=index, header=header)

    @maps_errors
    @caught_up_before_not_found
    def RemoveNode(
        self, request: pb.RemoveNodeRequest, context: grpc.ServicerContext
    ) -> pb.RemoveNodeResponse:
        response = removal_to_proto(self._nodes.remove(request.node_id, request.reason))
        header = self._reads.header()
        response.commit_index = header.applied_index
        response.header.CopyFrom(header)
        return response

    @maps_errors
    def GetClusterStatus(
        self, request: pb.GetClusterStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetClusterStatusResponse:
        response = cluster_to_proto(self._cluster.status())
        response.header.CopyFrom(self._reads.header(pb.READ_CONSISTENCY_STALE))
        return response
