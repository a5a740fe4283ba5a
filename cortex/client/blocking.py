"""The blocking client: typed methods over the public gRPC API, spread
round-robin over one or more nodes, with session consistency across all of
them and retries that cannot duplicate work."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from cortex.api.channels import open_channel, rpc_error
from cortex.api.session import Retry, retry_pause
from cortex.client import batch
from cortex.client import requests as rq
from cortex.client.base import ClientBase
from cortex.client.models import (
    Node,
    OutputChunk,
    OutputEnd,
    Page,
    Task,
    Workflow,
    output_item,
)
from cortex.errors import CortexError, FailedPrecondition
from cortex.v1 import cortex_pb2 as pb

# How long a workflow wait sleeps between two looks, at most.
_WORKFLOW_POLL_MAX_S = 2.0


class Client(ClientBase):
    """A client of a Cortex cluster.

    `target` is one node's `host:port` or a list of them; calls go round-robin
    over the list and fail over to the next node when one is unreachable.
    Reads carry the highest Raft index this client has seen (SESSION
    consistency by default), so they reflect its own writes on every node.
    `token` defaults to $CORTEX_API_TOKEN; `tls` to the $CORTEX_TLS_* settings
    (False: plain text). Writes go to the Raft leader once an answer has
    named it and the client has connected to it, saving a follower's hop
    (`route_writes=False`: round-robin like reads). Safe to share between
    threads."""

    def _open_channel(self, address: str) -> grpc.Channel:
        return open_channel(address, self._tls)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for channel in self._opened_channels():
            channel.close()

    # -- tasks ---------------------------------------------------------------

    def submit_task(
        self,
        command: Sequence[str] | str,
        *,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> Task:
        """Submits a task and returns it as applied. Without `idempotency_key`
        the client makes one, so its own retries never create a second task.
        `options`: type, env, cwd, timeout (s), priority, max_retries,
        backoff (s), backoff_multiplier, retryable, constraints, labels,
        options (the executor's), concurrency_key, fairness_key."""
        request = pb.SubmitTaskRequest(
            spec=rq.task_spec(command, **options),
            idempotency_key=idempotency_key or rq.new_idempotency_key(),
        )
        return Task.from_proto(self._unary("SubmitTask", request).task)

    def submit_tasks(self, tasks: Sequence[batch.TaskDescription]) -> list[batch.Submitted]:
        """Submits many tasks, each described by submit_task's arguments as a
        mapping (`{"command": ["make"], "priority": 8, "idempotency_key":
        "build-7"}`; a task without a key gets one, so retries never duplicate
        it), and returns what became of each, in order: its `Task`, or the
        error that refused it alone (`AlreadyExists` for a key used with
        another spec), returned, not raised. An error of a whole call is
        raised: `InvalidArgument` naming `tasks[i]` when one task is malformed,
        and then none of that call's tasks is submitted. More than 1000 tasks
        go in several calls, in order; should one fail, the tasks of the calls
        before it stay submitted (give keys to retry the whole list safely)."""
        submitted: list[batch.Submitted] = []
        for start, request in batch.submit_requests(tasks):
            try:
                response = self._unary("SubmitTasks", request)
            except CortexError as err:
                raise batch.refused_call(err, start) from None
            submitted += batch.outcomes(response, start)
        return submitted

    def get_task(self, task_id: str) -> Task:
        return Task.from_proto(self._unary("GetTask", pb.GetTaskRequest(task_id=task_id)).task)

    def wait_task(self, task_id: str, timeout: float = 60.0) -> Task:
        """The task once terminal, or as it is when `timeout` (s) runs out."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            request = pb.GetTaskResultRequest(
                task_id=task_id, wait=remaining > 0, timeout=rq.duration(max(remaining, 0))
            )
            task = Task.from_proto(
                self._unary("GetTaskResult", request, timeout=max(remaining, 0) + 10).task
            )
            if task.done or time.monotonic() >= deadline:
                return task

    def list_tasks(
        self,
        *,
        states: Sequence[str] = (),
        type: str = "",
        workflow_id: str = "",
        node_id: str = "",
        page_size: int = 100,
        page_token: str = "",
        newest_first: bool = True,
        since: rq.Moment | None = None,
        until: rq.Moment | None = None,
    ) -> Page:
        """A page of tasks, newest first unless asked otherwise. Ids, and the
        workflow_id filter, may be unique prefixes. `since`/`until`: only
        tasks created at or after / before these moments (datetimes or Unix
        seconds)."""
        request = rq.list_tasks(
            states=states,
            type=type,
            workflow_id=workflow_id,
            node_id=node_id,
            page_size=page_size,
            page_token=page_token,
            newest_first=newest_first,
            since=since,
            until=until,
        )
        return Page.of_tasks(self._unary("ListTasks", request))

    def cancel_task(self, task_id: str, reason: str = "") -> Task:
        """Cancels a task; a retry that finds it cancelled already returns it."""
        request = pb.CancelTaskRequest(task_id=task_id, reason=reason)
        try:
            return Task.from_proto(self._unary("CancelTask", request).task)
        except FailedPrecondition:
            task = self.get_task(task_id)
            if task.state == "cancelled":
                return task
            raise

    def list_dead_letter_tasks(
        self,
        page_size: int = 100,
        page_token: str = "",
        *,
        newest_first: bool = True,
        since: rq.Moment | None = None,
        until: rq.Moment | None = None,
    ) -> Page:
        """A page of dead-lettered tasks; `since`/`until` as in list_tasks."""
        request = rq.list_dead_letter_tasks(
            page_size=page_size,
            page_token=page_token,
            newest_first=newest_first,
            since=since,
            until=until,
        )
        return Page.of_tasks(self._unary("ListDeadLetterTasks", request))

    def retry_dead_letter_task(self, task_id: str) -> Task:
        request = pb.RetryDeadLetterTaskRequest(task_id=task_id)
        return Task.from_proto(
            self._unary("RetryDeadLetterTask", request, retry=Retry.UNSENT_ONLY).task
        )

    def stream_output(
        self,
        task_id: str,
        *,
        attempt: int = 0,
        from_offset: int = 0,
        follow: bool = True,
        stream: str | None = None,
    ) -> Iterator[OutputChunk | OutputEnd]:
        """An attempt's output (the latest attempt by default): chunks, then
        its end. A dropped stream resumes at the next byte on the next node."""
        request = rq.output_request(task_id, attempt, from_offset, follow, stream)
        failures = 0
        while True:
            stub_index = self._rotation.start()
            call = self._stubs[stub_index].StreamTaskOutput(
                self.session.stamp(request), metadata=self._metadata
            )
            try:
                for message in call:
                    failures = 0
                    item = output_item(message)
                    if isinstance(item, OutputChunk):
                        request.attempt = item.attempt
                        request.from_offset = item.offset + len(item.data)
                    yield item
                return
            except grpc.RpcError as err:
                pause = retry_pause(err, failures, Retry.SAFE)
                if pause is None or failures >= self.retries:
                    raise rpc_error(self.addresses[stub_index], err, self._tls) from None
                failures += 1
                time.sleep(pause)

    # -- workflows -----------------------------------------------------------

    def submit_workflow(
        self,
        definition: str | Mapping[str, Any] | Path,
        *,
        idempotency_key: str | None = None,
    ) -> Workflow:
        """Submits a workflow (YAML or JSON text, a dict, or a file) and
        returns it with its tasks."""
        text, fmt = rq.workflow_definition(definition)
        request = pb.SubmitWorkflowRequest(
            definition=text,
            format=fmt,
            idempotency_key=idempotency_key or rq.new_idempotency_key(),
        )
        return self.get_workflow(self._unary("SubmitWorkflow", request).workflow_id)

    def get_workflow(self, workflow_id: str) -> Workflow:
        request = pb.GetWorkflowRequest(workflow_id=workflow_id)
        return Workflow.from_proto(self._unary("GetWorkflow", request).workflow)

    def wait_workflow(self, workflow_id: str, timeout: float = 300.0) -> Workflow:
        """The workflow once terminal, or as it is when `timeout` (s) runs out."""
        deadline = time.monotonic() + timeout
        pause = 0.1
        while True:
            workflow = self.get_workflow(workflow_id)
            remaining = deadline - time.monotonic()
            if workflow.done or remaining <= 0:
                return workflow
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, _WORKFLOW_POLL_MAX_S)

    def list_workflows(
        self,
        *,
        states: Sequence[str] = (),
        page_size: int = 100,
        page_token: str = "",
        newest_first: bool = True,
        since: rq.Moment | None = None,
        until: rq.Moment | None = None,
    ) -> Page:
        """A page of workflows; `since`/`until` as in list_tasks."""
        request = rq.list_workflows(
            states=states,
            page_size=page_size,
            page_token=page_token,
            newest_first=newest_first,
            since=since,
            until=until,
        )
        return Page.of_workflows(self._unary("ListWorkflows", request))

    def cancel_workflow(self, workflow_id: str, reason: str = "") -> Workflow:
        """Cancels a workflow; a retry that finds it cancelled already returns it."""
        request = pb.CancelWorkflowRequest(workflow_id=workflow_id, reason=reason)
        try:
            return Workflow.from_proto(self._unary("CancelWorkflow", request).workflow)
        except FailedPrecondition:
            workflow = self.get_workflow(workflow_id)
            if workflow.state == "cancelled":
                return workflow
            raise

    # -- nodes ---------------------------------------------------------------

    def list_nodes(self, include_removed: bool = False) -> list[Node]:
        request = pb.ListNodesRequest(include_removed=include_removed)
        return [Node.from_proto(n) for n in self._unary("ListNodes", request).nodes]

    def cluster_status(self) -> pb.GetClusterStatusResponse:
        return self._unary("GetClusterStatus", pb.GetClusterStatusRequest())

    # -- transport -----------------------------------------------------------

    def _unary(
        self,
        method: str,
        request: Any,
        *,
        retry: Retry = Retry.SAFE,
        timeout: float | None = None,
    ) -> Any:
        """Calls `method` on the next node in turn; a failure that allows it is
        tried again on the one after, up to `retries` times."""
        self.session.stamp(request)
        first = self._rotation.start()
        for attempt in range(self.retries + 1):
            address, stub = self._target(method, first, attempt)
            try:
                response = getattr(stub, method)(
                    request, timeout=timeout or self.timeout, metadata=self._metadata
                )
            except grpc.RpcError as err:
                pause = retry_pause(err, attempt, retry)
                if pause is None or attempt == self.retries:
                    raise rpc_error(address, err, self._tls) from None
                time.sleep(pause)
                continue
            self._learn(response, address)
            return response
        raise AssertionError("unreachable")  # pragma: no cover
