"""The asyncio client: the blocking client's methods as coroutines (and an
async iterator for output), on grpc.aio channels, with the same rotation,
session and retries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from cortex.api.channels import rpc_error
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


class AsyncClient(ClientBase):
    """`Client` for asyncio: `async with AsyncClient([...]) as cortex:` and
    `await cortex.submit_task([...])`. See `cortex.client.Client`."""

    def _open_channel(self, address: str) -> grpc.aio.Channel:
        if self._tls is None:
            return grpc.aio.insecure_channel(address)
        return grpc.aio.secure_channel(
            address, self._tls.credentials(), options=self._tls.options()
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        for channel in self._opened_channels():
            await channel.close()

    async def submit_task(
        self, command: Sequence[str] | str, *, idempotency_key: str | None = None, **options: Any
    ) -> Task:
        request = pb.SubmitTaskRequest(
            spec=rq.task_spec(command, **options),
            idempotency_key=idempotency_key or rq.new_idempotency_key(),
        )
        return Task.from_proto((await self._unary("SubmitTask", request)).task)

    async def submit_tasks(self, tasks: Sequence[batch.TaskDescription]) -> list[batch.Submitted]:
        """See `Client.submit_tasks`."""
        submitted: list[batch.Submitted] = []
        for start, request in batch.submit_requests(tasks):
            try:
                response = await self._unary("SubmitTasks", request)
            except CortexError as err:
                raise batch.refused_call(err, start) from None
            submitted += batch.outcomes(response, start)
        return submitted

    async def get_task(self, task_id: str) -> Task:
        response = await self._unary("GetTask", pb.GetTaskRequest(task_id=task_id))
        return Task.from_proto(response.task)

    async def wait_task(self, task_id: str, timeout: float = 60.0) -> Task:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            request = pb.GetTaskResultRequest(
                task_id=task_id, wait=remaining > 0, timeout=rq.duration(max(remaining, 0))
            )
            response = await self._unary("GetTaskResult", request, timeout=max(remaining, 0) + 10)
            task = Task.from_proto(response.task)
            if task.done or time.monotonic() >= deadline:
                return task

    async def list_tasks(
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
        return Page.of_tasks(await self._unary("ListTasks", request))

    async def cancel_task(self, task_id: str, reason: str = "") -> Task:
        request = pb.CancelTaskRequest(task_id=task_id, reason=reason)
        try:
            return Task.from_proto((await self._unary("CancelTask", request)).task)
        except FailedPrecondition:
            task = await self.get_task(task_id)
            if task.state == "cancelled":
                return task
            raise

    async def list_dead_letter_tasks(
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
        return Page.of_tasks(await self._unary("ListDeadLetterTasks", request))

    async def retry_dead_letter_task(self, task_id: str) -> Task:
        request = pb.RetryDeadLetterTaskRequest(task_id=task_id)
        response = await self._unary("RetryDeadLetterTask", request, retry=Retry.UNSENT_ONLY)
        return Task.from_proto(response.task)

    async def stream_output(
        self,
        task_id: str,
        *,
        attempt: int = 0,
        from_offset: int = 0,
        follow: bool = True,
        stream: str | None = None,
    ) -> AsyncIterator[OutputChunk | OutputEnd]:
        request = rq.output_request(task_id, attempt, from_offset, follow, stream)
        failures = 0
        while True:
            index = self._rotation.start()
            call = self._stubs[index].StreamTaskOutput(
                self.session.stamp(request), metadata=self._metadata
            )
            try:
                async for message in call:
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
                    raise rpc_error(self.addresses[index], err, self._tls) from None
                failures += 1
                await asyncio.sleep(pause)

    async def submit_workflow(
        self, definition: str | Mapping[str, Any] | Path, *, idempotency_key: str | None = None
    ) -> Workflow:
        text, fmt = rq.workflow_definition(definition)
        request = pb.SubmitWorkflowRequest(
            definition=text,
            format=fmt,
            idempotency_key=idempotency_key or rq.new_idempotency_key(),
        )
        response = await self._unary("SubmitWorkflow", request)
        return await self.get_workflow(response.workflow_id)

    async def get_workflow(self, workflow_id: str) -> Workflow:
        request = pb.GetWorkflowRequest(workflow_id=workflow_id)
        return Workflow.from_proto((await self._unary("GetWorkflow", request)).workflow)

    async def wait_workflow(self, workflow_id: str, timeout: float = 300.0) -> Workflow:
        deadline = time.monotonic() + timeout
        pause = 0.1
        while True:
            workflow = await self.get_workflow(workflow_id)
            remaining = deadline - time.monotonic()
            if workflow.done or remaining <= 0:
                return workflow
            await asyncio.sleep(min(pause, remaining))
            pause = min(pause * 2, 2.0)

    async def list_workflows(
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
        return Page.of_workflows(await self._unary("ListWorkflows", request))

    async def cancel_workflow(self, workflow_id: str, reason: str = "") -> Workflow:
        request = pb.CancelWorkflowRequest(workflow_id=workflow_id, reason=reason)
        try:
            return Workflow.from_proto((await self._unary("CancelWorkflow", request)).workflow)
        except FailedPrecondition:
            workflow = await self.get_workflow(workflow_id)
            if workflow.state == "cancelled":
                return workflow
            raise

    async def list_nodes(self, include_removed: bool = False) -> list[Node]:
        response = await self._unary(
            "ListNodes", pb.ListNodesRequest(include_removed=include_removed)
        )
        return [Node.from_proto(n) for n in response.nodes]

    async def cluster_status(self) -> pb.GetClusterStatusResponse:
        return await self._unary("GetClusterStatus", pb.GetClusterStatusRequest())

    async def _unary(
        self,
        method: str,
        request: Any,
        *,
        retry: Retry = Retry.SAFE,
        timeout: float | None = None,
    ) -> Any:
        self.session.stamp(request)
        first = self._rotation.start()
        for attempt in range(self.retries + 1):
            address, stub = self._target(method, first, attempt)
            try:
                response = await getattr(stub, method)(
                    request, timeout=timeout or self.timeout, metadata=self._metadata
                )
            except grpc.RpcError as err:
                pause = retry_pause(err, attempt, retry)
                if pause is None or attempt == self.retries:
                    raise rpc_error(address, err, self._tls) from None
                await asyncio.sleep(pause)
                continue
            self._learn(response, address)
            return response
        raise AssertionError("unreachable")  # pragma: no cover
