"""The asyncio client: the blocking client's methods as coroutines (and an
async iterator for output), on grpc.aio channels, with the same rotation,
session and retries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import grpc

from cortex.api.auth import default_token, token_metadata
from cortex.api.channels import rpc_error
from cortex.api.tls import ClientTls, client_tls_from_env
from cortex.client import requests as rq
from cortex.client.blocking import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S
from cortex.client.models import (
    Node,
    OutputChunk,
    OutputEnd,
    Page,
    Task,
    Workflow,
    enum_value,
    output_item,
)
from cortex.client.session import Retry, Rotation, Session, addresses, retry_pause
from cortex.errors import FailedPrecondition
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc


def _channel(address: str, tls: ClientTls | None) -> grpc.aio.Channel:
    if tls is None:
        return grpc.aio.insecure_channel(address)
    return grpc.aio.secure_channel(address, tls.credentials(), options=tls.options())


class AsyncClient:
    """`Client` for asyncio: `async with AsyncClient([...]) as cortex:` and
    `await cortex.submit_task([...])`. See `cortex.client.Client`."""

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        token: str | None = None,
        tls: ClientTls | Literal[False] | None = None,
        consistency: str | int = "session",
        timeout: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        session_index: int = 0,
    ) -> None:
        self.addresses = addresses(target)
        self.timeout = timeout
        self.retries = retries
        self.session = Session(rq.consistency(consistency), session_index)
        self._metadata = token_metadata(token if token is not None else default_token())
        self._tls = client_tls_from_env() if tls is None else (tls or None)
        self._channels = [_channel(address, self._tls) for address in self.addresses]
        self._stubs = [pb_grpc.CortexServiceStub(channel) for channel in self._channels]
        self._rotation = Rotation(len(self.addresses))

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
        for channel in self._channels:
            await channel.close()

    async def submit_task(
        self, command: Sequence[str] | str, *, idempotency_key: str | None = None, **options: Any
    ) -> Task:
        request = pb.SubmitTaskRequest(
            spec=rq.task_spec(command, **options),
            idempotency_key=idempotency_key or rq.new_idempotency_key(),
        )
        return Task.from_proto((await self._unary("SubmitTask", request)).task)

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
    ) -> Page:
        request = pb.ListTasksRequest(
            states=rq.states(pb.TaskState, states),  # type: ignore[arg-type]
            type=type,
            workflow_id=workflow_id,
            node_id=node_id,
            page_size=page_size,
            page_token=page_token,
            order=rq.order(newest_first),
        )
        response = await self._unary("ListTasks", request)
        return Page(
            [Task.from_proto(t) for t in response.tasks],
            response.next_page_token,
            response.total_size,
        )

    async def cancel_task(self, task_id: str, reason: str = "") -> Task:
        request = pb.CancelTaskRequest(task_id=task_id, reason=reason)
        try:
            return Task.from_proto((await self._unary("CancelTask", request)).task)
        except FailedPrecondition:
            task = await self.get_task(task_id)
            if task.state == "cancelled":
                return task
            raise

    async def stream_output(
        self,
        task_id: str,
        *,
        attempt: int = 0,
        from_offset: int = 0,
        follow: bool = True,
        stream: str | None = None,
    ) -> AsyncIterator[OutputChunk | OutputEnd]:
        request = pb.StreamTaskOutputRequest(
            task_id=task_id,
            attempt=attempt,
            from_offset=from_offset,
            follow=follow,
            stream=enum_value(pb.OutputStream, stream) if stream else 0,  # type: ignore[arg-type]
        )
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
            index = (first + attempt) % len(self._stubs)
            try:
                response = await getattr(self._stubs[index], method)(
                    request, timeout=timeout or self.timeout, metadata=self._metadata
                )
            except grpc.RpcError as err:
                pause = retry_pause(err, attempt, retry)
                if pause is None or attempt == self.retries:
                    raise rpc_error(self.addresses[index], err, self._tls) from None
                await asyncio.sleep(pause)
                continue
            self.session.observe(response)
            return response
        raise AssertionError("unreachable")  # pragma: no cover
