"""A small Python client for one Cortex node: one method per RPC of
cortex.v1.CortexService, taking the request's fields as keyword arguments
and returning the response message (streams yield theirs). gRPC errors come
back as the matching Cortex exception, with the server's message. A call a
busy node refuses (RESOURCE_EXHAUSTED with a retry hint) is retried after
the hint, doubling with each refusal; a wait for a task's result that finds
the node's waits all taken polls instead.

Reads are session-consistent by default: the client keeps the highest Raft
index it has seen in responses (header `applied_index`, a write's
`commit_index`) and every read asks for at least that index, so it reads
its own writes on any node.

Writes go to the Raft leader once an answer has named it and the client has
connected to it (`route_writes`; see cortex.api.leader_route), else to the
client's node, which forwards them; reads stay on the client's node."""

from __future__ import annotations

import random
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Literal, TypeAlias, cast

import grpc
from google.protobuf.duration_pb2 import Duration

from cortex.api.auth import default_token, token_metadata
from cortex.api.channels import TRACEPARENT_HEADER, open_channel, retry_after_s, rpc_error
from cortex.api.convert import duration
from cortex.api.leader_route import LeaderChannel, LeaderRoute
from cortex.api.session import Session
from cortex.api.tls import ClientTls, client_tls_from_env
from cortex.errors import CortexError, InvalidArgument, ResourceExhausted
from cortex.proto_enums import enum_names, enum_value
from cortex.state import task_states
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc

# Retries of a call refused by a busy node, and the longest pause between two.
BUSY_RETRIES = 5
MAX_BUSY_PAUSE_S = 5.0
DEFAULT_WAIT_MS = 30_000
_BACKLOG_END_HEADER = "cortex-backlog-end"
# The terminal task states as the wire's TaskState values.
TERMINAL_STATES = frozenset(
    enum_value(pb.TaskState, state) for state in task_states.TERMINAL_STATES
)
Span: TypeAlias = Duration | timedelta


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
        consistency: int = pb.READ_CONSISTENCY_SESSION,
        session_index: int = 0,
        route_writes: bool = True,
    ) -> None:
        """`token` defaults to $CORTEX_API_TOKEN; nodes without a token ignore it.
        `tls` defaults to the settings in $CORTEX_TLS_CA and friends (plain
        text without them); False means plain text regardless. A call the
        node refuses as busy is tried up to `busy_retries` more times.
        Reads ask for `consistency`, at least at `session_index` (e.g. the
        index another client reached), which grows with every response.
        With `route_writes`, writes go to the leader once the client knows
        it and has connected to it (with the same TLS settings and token)."""
        self.address = address
        self.timeout_s = timeout_s
        self.busy_retries = busy_retries
        self.session = Session(cast(pb.ReadConsistency, consistency), session_index)
        self._metadata = token_metadata(token if token is not None else default_token())
        self._tls = client_tls_from_env() if tls is None else (tls or None)
        self._channel = open_channel(address, self._tls)
        self._stub = pb_grpc.CortexServiceStub(self._channel)
        self._route = (
            LeaderRoute({address: self._channel}, lambda leader: open_channel(leader, self._tls))
            if route_writes
            else None
        )

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
        for channel in [] if self._route is None else self._route.release():
            channel.close()
        self._channel.close()

    @property
    def leader_address(self) -> str | None:
        """The leader's gRPC address writes are routed to while connected
        (None: none is known yet, or routing is off)."""
        return None if self._route is None else self._route.leader

    # -- session consistency ------------------------------------------------------

    @property
    def consistency(self) -> int:
        """What every read asks for; may be changed between calls."""
        return self.session.consistency

    @consistency.setter
    def consistency(self, value: int) -> None:
        self.session.consistency = cast(pb.ReadConsistency, value)

    @property
    def session_index(self) -> int:
        """The highest Raft index this client has seen: every read asks for it."""
        return self.session.index

    def advance_session(self, index: int) -> None:
        """Raises the session index to `index` (never lowers it), e.g. to read
        what another client wrote."""
        self.session.observe_index(index)

    def read_options(self) -> pb.ReadOptions:
        """What the next read asks for."""
        return self.session.read_options()

    # -- calls ---------------------------------------------------------------------

    def _call(
        self,
        method: str,
        request: Any,
        timeout_s: float | None = None,
        busy_retries: int | None = None,
        write: bool = False,
        traceparent: str = "",
    ) -> Any:
        retries = self.busy_retries if busy_retries is None else busy_retries
        metadata = [*self._metadata, *([(TRACEPARENT_HEADER, traceparent)] if traceparent else [])]
        for retry in range(retries + 1):
            leader = self._route.pick() if write and self._route is not None else None
            stub = self._stub if leader is None else leader.stub
            try:
                response = getattr(stub, method)(
                    request, timeout=timeout_s or self.timeout_s, metadata=metadata
                )
            except grpc.RpcError as err:
                hint = retry_after_s(err)
                if hint is None or retry == retries:
                    raise self._error(err, leader) from None
                time.sleep(busy_pause(hint, retry))
                continue
            self.session.observe(response, write)
            if self._route is not None:
                self._route.learn(response, self.address if leader is None else leader.address)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, err: grpc.RpcError, leader: LeaderChannel | None = None) -> CortexError:
        """The Cortex exception for a failed call; one that never connected
        says why, naming TLS when a handshake is the likely cause. A write
        sent to the leader names the leader's address."""
        return rpc_error(self.address if leader is None else leader.address, err, self._tls)

    # -- tasks ---------------------------------------------------------------------

    def submit_task(
        self, spec: pb.TaskSpec, idempotency_key: str = "", traceparent: str = ""
    ) -> pb.SubmitTaskResponse:
        """`traceparent`: the W3C trace context the task's trace continues."""
        return self._call(
            "SubmitTask",
            pb.SubmitTaskRequest(spec=spec, idempotency_key=idempotency_key),
            write=True,
            traceparent=traceparent,
        )

    def submit_tasks(
        self,
        specs: Sequence[pb.TaskSpec],
        idempotency_keys: Sequence[str] = (),
        traceparent: str = "",
    ) -> pb.SubmitTasksResponse:
        """Submits many tasks in one call (see SubmitTasks); `idempotency_keys`,
        when given, holds one key per spec; `traceparent` as for submit_task."""
        if idempotency_keys and len(idempotency_keys) != len(specs):
            raise InvalidArgument("give one idempotency key per spec, or none")
        keys = list(idempotency_keys) or [""] * len(specs)
        return self._call(
            "SubmitTasks",
            pb.SubmitTasksRequest(
                tasks=[
                    pb.SubmitTaskRequest(spec=spec, idempotency_key=key)
                    for spec, key in zip(specs, keys, strict=True)
                ]
            ),
            write=True,
            traceparent=traceparent,
        )

    def get_task(self, task_id: str, include_events: bool = False) -> pb.GetTaskResponse:
        request = pb.GetTaskRequest(
            task_id=task_id, include_events=include_events, read_options=self.read_options()
        )
        return self._call("GetTask", request)

    def _result(self, task_id: str, **fields: Any) -> pb.GetTaskResultRequest:
        return pb.GetTaskResultRequest(task_id=task_id, read_options=self.read_options(), **fields)

    def get_task_result(
        self, task_id: str, wait: bool = False, timeout_ms: int = 0
    ) -> pb.GetTaskResultResponse:
        """With `wait`, the task once terminal or when `timeout_ms` (default
        30 s) ends. A node whose waits are all taken is polled instead."""
        if not wait:
            return self._call("GetTaskResult", self._result(task_id))
        deadline = time.monotonic() + (timeout_ms or DEFAULT_WAIT_MS) / 1000
        polls = 0
        while True:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                return self._call("GetTaskResult", self._result(task_id))
            request = self._result(
                task_id, wait=True, timeout=duration(max(int(remaining_s * 1000), 1))
            )
            try:
                return self._call(
                    "GetTaskResult", request, timeout_s=remaining_s + 5, busy_retries=0
                )
            except ResourceExhausted as busy:
                polled: pb.GetTaskResultResponse = self._call(
                    "GetTaskResult", self._result(task_id)
                )
                if polled.task.state in TERMINAL_STATES:
                    return polled
                pause = busy_pause(max(busy.retry_after_s, 0.5), min(polls, 3))
                time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
                polls += 1

    def list_tasks(
        self,
        states: Iterable[int] = (),
        type: str = "",
        workflow_id: str = "",
        node_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        order: int = pb.LIST_ORDER_UNSPECIFIED,
        create_time_range: pb.TimeRange | None = None,
    ) -> pb.ListTasksResponse:
        """`states`: TaskState values (none: all); `order`: a ListOrder;
        `create_time_range`: only tasks created within it."""
        request = pb.ListTasksRequest(
            states=cast(Iterable[pb.TaskState], states),
            type=type,
            workflow_id=workflow_id,
            node_id=node_id,
            page_size=page_size,
            page_token=page_token,
            order=cast(pb.ListOrder, order),
            read_options=self.read_options(),
            create_time_range=create_time_range,
        )
        return self._call("ListTasks", request)

    def cancel_task(self, task_id: str, reason: str = "") -> pb.CancelTaskResponse:
        request = pb.CancelTaskRequest(task_id=task_id, reason=reason)
        return self._call("CancelTask", request, write=True)

    def list_dead_letter_tasks(
        self,
        page_size: int = 0,
        page_token: str = "",
        order: int = pb.LIST_ORDER_UNSPECIFIED,
        create_time_range: pb.TimeRange | None = None,
    ) -> pb.ListDeadLetterTasksResponse:
        request = pb.ListDeadLetterTasksRequest(
            page_size=page_size,
            page_token=page_token,
            order=cast(pb.ListOrder, order),
            read_options=self.read_options(),
            create_time_range=create_time_range,
        )
        return self._call("ListDeadLetterTasks", request)

    def retry_dead_letter_task(self, task_id: str) -> pb.RetryDeadLetterTaskResponse:
        request = pb.RetryDeadLetterTaskRequest(task_id=task_id)
        return self._call("RetryDeadLetterTask", request, write=True)

    # -- workflows -----------------------------------------------------------------

    def submit_workflow(
        self,
        definition: str,
        format: int = pb.DEFINITION_FORMAT_UNSPECIFIED,
        idempotency_key: str = "",
        traceparent: str = "",
    ) -> pb.SubmitWorkflowResponse:
        """`format`: a DefinitionFormat (unset: detected from the text);
        `traceparent` as for submit_task."""
        request = pb.SubmitWorkflowRequest(
            definition=definition,
            format=cast(pb.DefinitionFormat, format),
            idempotency_key=idempotency_key,
        )
        return self._call("SubmitWorkflow", request, write=True, traceparent=traceparent)

    def get_workflow(self, workflow_id: str) -> pb.GetWorkflowResponse:
        request = pb.GetWorkflowRequest(workflow_id=workflow_id, read_options=self.read_options())
        return self._call("GetWorkflow", request)

    def list_workflows(
        self,
        states: Iterable[int] = (),
        page_size: int = 0,
        page_token: str = "",
        order: int = pb.LIST_ORDER_UNSPECIFIED,
        create_time_range: pb.TimeRange | None = None,
    ) -> pb.ListWorkflowsResponse:
        """`states`: WorkflowState values (none: all); `order`: a ListOrder;
        `create_time_range`: only workflows created within it."""
        request = pb.ListWorkflowsRequest(
            states=cast(Iterable[pb.WorkflowState], states),
            page_size=page_size,
            page_token=page_token,
            order=cast(pb.ListOrder, order),
            read_options=self.read_options(),
            create_time_range=create_time_range,
        )
        return self._call("ListWorkflows", request)

    def cancel_workflow(self, workflow_id: str, reason: str = "") -> pb.CancelWorkflowResponse:
        request = pb.CancelWorkflowRequest(workflow_id=workflow_id, reason=reason)
        return self._call("CancelWorkflow", request, write=True)

    # -- streams -------------------------------------------------------------------

    def stream_task_output(
        self,
        task_id: str,
        attempt: int = 0,
        from_offset: int = 0,
        follow: bool = False,
        stream: int = pb.OUTPUT_STREAM_UNSPECIFIED,
        timeout_s: float | None = None,
    ) -> Generator[pb.StreamTaskOutputResponse, None, None]:
        """Yields output messages, then the end message. `stream`: an
        OutputStream (unset: both). Errors arrive as Cortex exceptions."""
        request = pb.StreamTaskOutputRequest(
            task_id=task_id,
            attempt=attempt,
            from_offset=from_offset,
            follow=follow,
            stream=cast(pb.OutputStream, stream),
            read_options=self.read_options(),
        )
        yield from self._stream("StreamTaskOutput", request, timeout_s)

    def _watch_request(
        self,
        task_id: str,
        workflow_id: str,
        types: Iterable[int],
        after_seq: int,
        from_start: bool,
        follow: bool,
    ) -> pb.WatchEventsRequest:
        return pb.WatchEventsRequest(
            task_id=task_id,
            workflow_id=workflow_id,
            types=cast(Iterable[pb.EventType], types),
            after_seq=after_seq,
            from_start=from_start,
            follow=follow,
            read_options=self.read_options(),
        )

    def watch_events(
        self,
        task_id: str = "",
        workflow_id: str = "",
        types: Iterable[int] = (),
        after_seq: int = 0,
        from_start: bool = False,
        follow: bool = True,
        timeout_s: float | None = None,
    ) -> Generator[pb.WatchEventsResponse, None, None]:
        """`types`: EventType values (none: all)."""
        request = self._watch_request(task_id, workflow_id, types, after_seq, from_start, follow)
        yield from self._stream("WatchEvents", request, timeout_s)

    def watch_events_backlog(
        self,
        task_id: str = "",
        workflow_id: str = "",
        types: Iterable[int] = (),
        after_seq: int = 0,
        from_start: bool = False,
        follow: bool = True,
        timeout_s: float | None = None,
    ) -> tuple[int, Generator[pb.WatchEventsResponse, None, None]]:
        """`watch_events` once the watch has begun, with the seq of the last
        event already applied that it sends (0 when none), from the
        `cortex-backlog-end` header."""
        request = self._watch_request(task_id, workflow_id, types, after_seq, from_start, follow)
        for retry in range(self.busy_retries + 1):
            call = self._stub.WatchEvents(request, timeout=timeout_s, metadata=self._metadata)
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

    def _mapped(self, call: Iterator[Any]) -> Generator[Any, None, None]:
        try:
            yield from call
        except grpc.RpcError as err:
            raise self._error(err) from None

    def _stream(
        self, method: str, request: Any, timeout_s: float | None
    ) -> Generator[Any, None, None]:
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

    # -- nodes and the cluster -----------------------------------------------------

    def list_nodes(self, include_removed: bool = False) -> pb.ListNodesResponse:
        request = pb.ListNodesRequest(
            include_removed=include_removed, read_options=self.read_options()
        )
        return self._call("ListNodes", request)

    def drain_node(
        self, node_id: str, deadline_ms: int = 0, *, deadline: Span | None = None
    ) -> pb.DrainNodeResponse:
        """`deadline` (or `deadline_ms`): how long running tasks may take
        (unset or 0: the node's default)."""
        if deadline is None and deadline_ms:
            deadline = duration(deadline_ms)
        request = pb.DrainNodeRequest(node_id=node_id, deadline=deadline)
        return self._call("DrainNode", request, write=True)

    def cordon_node(self, node_id: str) -> pb.CordonNodeResponse:
        return self._call("CordonNode", pb.CordonNodeRequest(node_id=node_id), write=True)

    def uncordon_node(self, node_id: str) -> pb.UncordonNodeResponse:
        return self._call("UncordonNode", pb.UncordonNodeRequest(node_id=node_id), write=True)

    def remove_node(self, node_id: str, reason: str = "") -> pb.RemoveNodeResponse:
        request = pb.RemoveNodeRequest(node_id=node_id, reason=reason)
        return self._call("RemoveNode", request, write=True)

    def get_cluster_status(self) -> pb.GetClusterStatusResponse:
        return self._call("GetClusterStatus", pb.GetClusterStatusRequest())

    # -- schedules -----------------------------------------------------------------

    def create_schedule(
        self,
        name: str,
        *,
        cron: str = "",
        every: Span | None = None,
        timezone: str = "",
        task: pb.TaskSpec | None = None,
        workflow_definition: str = "",
        workflow_format: str = "",
        overlap: str = "skip",
        catchup_window: Span | None = None,
        paused: bool = False,
    ) -> pb.CreateScheduleResponse:
        """Starts `task` or `workflow_definition` (one of them) at each slot of
        `cron` (in `timezone`, default UTC) or every `every` (one of them).
        `overlap`: skip, buffer_one, allow_all or cancel_previous;
        `catchup_window` unset: 60 s; `workflow_format`: json, yaml or "" to
        detect it."""
        if cron and every is not None:
            raise InvalidArgument("give exactly one of cron and every")
        if task is not None and workflow_definition:
            raise InvalidArgument("give exactly one of task and workflow_definition")
        format_value = enum_value(pb.DefinitionFormat, workflow_format)
        if workflow_format and not format_value:
            raise InvalidArgument(f"workflow_format must be json or yaml, not {workflow_format!r}")
        overlap_value = enum_value(pb.ScheduleOverlap, overlap)
        if overlap and not overlap_value:
            known = ", ".join(enum_names(pb.ScheduleOverlap))
            raise InvalidArgument(f"overlap must be one of {known}, not {overlap!r}")
        # Only the member of each oneof that was given: setting one clears the other.
        timing: dict[str, Any] = (
            {"cron": cron} if cron else {"every": every} if every is not None else {}
        )
        target: dict[str, Any] = (
            {"task": task}
            if task is not None
            else {"workflow_definition": workflow_definition}
            if workflow_definition
            else {}
        )
        request = pb.CreateScheduleRequest(
            name=name,
            timezone=timezone,
            workflow_format=cast(pb.DefinitionFormat, format_value),
            overlap=overlap_value,
            catchup_window=catchup_window,
            paused=paused,
            **timing,
            **target,
        )
        return self._call("CreateSchedule", request, write=True)

    def list_schedules(self) -> pb.ListSchedulesResponse:
        request = pb.ListSchedulesRequest(read_options=self.read_options())
        return self._call("ListSchedules", request)

    def get_schedule(self, schedule: str) -> pb.GetScheduleResponse:
        """`schedule`: its name or id."""
        request = pb.GetScheduleRequest(schedule=schedule, read_options=self.read_options())
        return self._call("GetSchedule", request)

    def pause_schedule(self, schedule: str) -> pb.PauseScheduleResponse:
        request = pb.PauseScheduleRequest(schedule=schedule)
        return self._call("PauseSchedule", request, write=True)

    def resume_schedule(self, schedule: str) -> pb.ResumeScheduleResponse:
        request = pb.ResumeScheduleRequest(schedule=schedule)
        return self._call("ResumeSchedule", request, write=True)

    def delete_schedule(self, schedule: str) -> pb.DeleteScheduleResponse:
        request = pb.DeleteScheduleRequest(schedule=schedule)
        return self._call("DeleteSchedule", request, write=True)

    def trigger_schedule(self, schedule: str) -> pb.TriggerScheduleResponse:
        request = pb.TriggerScheduleRequest(schedule=schedule)
        return self._call("TriggerSchedule", request, write=True)

    # -- limits and fairness -------------------------------------------------------

    def set_limit(
        self, key: str, *, max_running: int = 0, rate_per_minute: int = 0, burst: int = 0
    ) -> pb.SetLimitResponse:
        """Replaces the limits of concurrency key `key` (0: no such limit;
        `burst` 0: a second's worth of the rate, at least 1)."""
        request = pb.SetLimitRequest(
            key=key, max_running=max_running, rate_per_minute=rate_per_minute, burst=burst
        )
        return self._call("SetLimit", request, write=True)

    def list_limits(self) -> pb.ListLimitsResponse:
        return self._call("ListLimits", pb.ListLimitsRequest(read_options=self.read_options()))

    def delete_limit(self, key: str) -> pb.DeleteLimitResponse:
        return self._call("DeleteLimit", pb.DeleteLimitRequest(key=key), write=True)

    def set_fairness_weight(self, key: str, weight: int) -> pb.SetFairnessWeightResponse:
        request = pb.SetFairnessWeightRequest(key=key, weight=weight)
        return self._call("SetFairnessWeight", request, write=True)

    def list_fairness_weights(self) -> pb.ListFairnessWeightsResponse:
        request = pb.ListFairnessWeightsRequest(read_options=self.read_options())
        return self._call("ListFairnessWeights", request)
