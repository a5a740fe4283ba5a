"""Admission control: the limiter on its own, then on a real gRPC server
in front of a stand-in Cortex servicer whose calls block until released
(the cluster test in tests/integration/test_admission.py uses real nodes).
Calls beyond a limit are refused at once with RESOURCE_EXHAUSTED, a retry
hint and the limit's name; health checks are not counted; the Python client
retries after the hint, and a wait that finds no slot polls instead."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cortex.api.admission import (
    BUSY_HEADER,
    REQUESTS,
    STREAMS,
    WAITS,
    Admission,
    AdmissionInterceptor,
    public_admission,
)
from cortex.api.channels import RETRY_AFTER_HEADER
from cortex.api.client import CortexClient
from cortex.api.server import HealthService
from cortex.errors import ResourceExhausted
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.cluster import free_ports, wait_until

# -------------------------------------------------------------- the limiter


def test_a_call_takes_its_own_slot_and_one_of_the_overall_limit() -> None:
    admission = public_admission("n1", max_inflight_requests=3, max_streams=1, max_waits=1)
    release_stream = admission.enter(STREAMS)
    release_wait = admission.enter(WAITS)
    assert (admission.in_use(STREAMS), admission.in_use(WAITS), admission.in_use(REQUESTS)) == (
        1,
        1,
        2,
    )
    with pytest.raises(ResourceExhausted) as busy:
        admission.enter(STREAMS)
    assert busy.value.limit == STREAMS and busy.value.retry_after_s == 1.0
    assert "node n1 busy: 1 output and event streams open (config key max_streams)" in str(
        busy.value
    )
    # A refusal takes nothing, not even the overall slot it passed first.
    assert admission.in_use(REQUESTS) == 2
    release_short = admission.enter(REQUESTS)
    with pytest.raises(ResourceExhausted) as full:
        admission.enter(REQUESTS)
    assert full.value.limit == REQUESTS and full.value.retry_after_s == 0.2
    assert str(full.value) == (
        "node n1 busy: 3 requests in flight (config key max_inflight_requests); retry"
    )
    release_stream()
    release_stream()  # twice is once
    assert admission.in_use(STREAMS) == 0 and admission.in_use(REQUESTS) == 2
    # A free wait slot does not help once the overall limit is reached, and
    # is not kept by the refused call.
    release_wait()
    others = [admission.enter(STREAMS), admission.enter(REQUESTS)]
    with pytest.raises(ResourceExhausted) as overall:
        admission.enter(WAITS)
    assert overall.value.limit == REQUESTS
    assert admission.in_use(WAITS) == 0
    for release in (release_short, *others):
        release()
    assert admission.in_use(REQUESTS) == 0
    assert admission.refused == {REQUESTS: 2, STREAMS: 1, WAITS: 0}


def test_capacity_is_the_overall_limit_or_the_sum_without_one() -> None:
    assert public_admission("n1", 56, 32, 16).capacity == 56
    from cortex.api.admission import peer_admission

    assert peer_admission("n1", 32).capacity == 32


def test_slots_hold_under_concurrent_callers() -> None:
    admission = public_admission("n1", 5, 5, 5)
    admitted: list[Any] = []
    refused: list[ResourceExhausted] = []
    lock = threading.Lock()

    def caller() -> None:
        try:
            release = admission.enter(REQUESTS)
        except ResourceExhausted as busy:
            with lock:
                refused.append(busy)
            return
        with lock:
            admitted.append(release)

    threads = [threading.Thread(target=caller) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(admitted), len(refused)) == (5, 45)
    for release in admitted:
        release()
    assert admission.in_use(REQUESTS) == 0


# ------------------------------------------------------ on a real server


class BlockingServicer(pb_grpc.CortexServiceServicer):
    """Calls that hold their thread until `release` is set or their client
    leaves: GetTask, waits and streams. A plain GetTaskResult answers
    `state` at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.state = pb.TASK_STATE_RUNNING
        # Set once a call holds its thread.
        self.holding = threading.Event()

    def _hold(self, context: Any) -> None:
        self.holding.set()
        while not self.release.wait(0.05) and context.is_active():
            pass

    def GetTask(self, request: Any, context: Any) -> pb.GetTaskResponse:
        self._hold(context)
        return pb.GetTaskResponse(task=pb.Task(id=request.task_id, state=self.state))

    def GetTaskResult(self, request: Any, context: Any) -> pb.GetTaskResultResponse:
        if request.wait:
            self._hold(context)
        return pb.GetTaskResultResponse(task=pb.Task(id=request.task_id, state=self.state))

    def StreamTaskOutput(self, request: Any, context: Any) -> Iterator[pb.StreamTaskOutputResponse]:
        self._hold(context)
        yield pb.StreamTaskOutputResponse(attempt=1)

    def GetClusterStatus(self, request: Any, context: Any) -> pb.GetClusterStatusResponse:
        return pb.GetClusterStatusResponse(node_id="n1")


@pytest.fixture
def node() -> Iterator[tuple[str, Admission, BlockingServicer]]:
    admission = public_admission("n1", max_inflight_requests=3, max_streams=1, max_waits=1)
    threads = admission.capacity + 4
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads),
        interceptors=[AdmissionInterceptor(admission, ("/cortex.v1.CortexService/",))],
        maximum_concurrent_rpcs=threads,
    )
    servicer = BlockingServicer()
    pb_grpc.add_CortexServiceServicer_to_server(servicer, server)
    health = HealthService()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    address = f"127.0.0.1:{free_ports(1)[0]}"
    server.add_insecure_port(address)
    server.start()
    yield address, admission, servicer
    servicer.release.set()
    server.stop(0)


def _refused(call: Any) -> tuple[float, dict[str, str], str]:
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as refused:
        result = call()
        if hasattr(result, "__next__"):
            next(result)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value
    return (
        time.monotonic() - started,
        dict(refused.value.trailing_metadata() or ()),
        refused.value.details() or "",
    )


def test_calls_beyond_a_limit_are_refused_at_once_with_a_hint(
    node: tuple[str, Admission, BlockingServicer],
) -> None:
    address, admission, servicer = node
    channel = grpc.insecure_channel(address)
    stub = pb_grpc.CortexServiceStub(channel)
    wait = stub.GetTaskResult.future(pb.GetTaskResultRequest(task_id="t", wait=True), timeout=30)
    stream = stub.StreamTaskOutput(pb.StreamTaskOutputRequest(task_id="t", follow=True))
    wait_until(lambda: admission.in_use(REQUESTS) == 2, 10, what="a wait and a stream held")

    latency, trailing, message = _refused(
        lambda: stub.GetTaskResult(pb.GetTaskResultRequest(task_id="t", wait=True), timeout=10)
    )
    assert trailing[BUSY_HEADER] == WAITS and trailing[RETRY_AFTER_HEADER] == "1000"
    assert "1 calls waiting for a task result" in message and latency < 1.0
    latency, trailing, _ = _refused(
        lambda: stub.StreamTaskOutput(pb.StreamTaskOutputRequest(task_id="t"), timeout=10)
    )
    assert trailing[BUSY_HEADER] == STREAMS and latency < 1.0

    # One slot of the overall three is left: a short call takes it.
    short = stub.GetTask.future(pb.GetTaskRequest(task_id="t"), timeout=30)
    wait_until(lambda: admission.in_use(REQUESTS) == 3, 10, what="the short call held")
    latency, trailing, message = _refused(
        lambda: stub.GetClusterStatus(pb.GetClusterStatusRequest(), timeout=10)
    )
    assert trailing == {BUSY_HEADER: REQUESTS, RETRY_AFTER_HEADER: "200"}
    assert message == "node n1 busy: 3 requests in flight (config key max_inflight_requests); retry"
    assert latency < 1.0
    # Health checks are not counted.
    checked = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=""), timeout=5
    )
    assert checked.status == health_pb2.HealthCheckResponse.SERVING

    servicer.release.set()
    assert wait.result(10).task.state == pb.TASK_STATE_RUNNING
    assert short.result(10).task.id == "t"
    assert [chunk.attempt for chunk in stream] == [1]
    wait_until(lambda: admission.in_use(REQUESTS) == 0, 10, what="every slot given back")
    assert stub.GetClusterStatus(pb.GetClusterStatusRequest(), timeout=5).node_id == "n1"
    channel.close()


def test_a_stream_the_client_leaves_gives_its_slot_back(
    node: tuple[str, Admission, BlockingServicer],
) -> None:
    address, admission, _ = node
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.CortexServiceStub(channel)
        stream = stub.StreamTaskOutput(pb.StreamTaskOutputRequest(task_id="t", follow=True))
        wait_until(lambda: admission.in_use(STREAMS) == 1, 10, what="the stream held")
        stream.cancel()
        wait_until(lambda: admission.in_use(STREAMS) == 0, 10, what="its slot given back")
        again = stub.StreamTaskOutput(pb.StreamTaskOutputRequest(task_id="t", follow=True))
        wait_until(lambda: admission.in_use(STREAMS) == 1, 10, what="a new stream held")
        again.cancel()


def test_the_client_retries_after_the_hint_and_polls_when_waits_are_taken(
    node: tuple[str, Admission, BlockingServicer],
) -> None:
    address, admission, servicer = node
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.CortexServiceStub(channel)
        holders = [
            stub.GetTaskResult.future(pb.GetTaskResultRequest(task_id="t", wait=True), timeout=30),
            stub.GetTask.future(pb.GetTaskRequest(task_id="t"), timeout=30),
            stub.GetTask.future(pb.GetTaskRequest(task_id="t"), timeout=30),
        ]
        wait_until(lambda: admission.in_use(REQUESTS) == 3, 10, what="every slot held")

        with CortexClient(address, tls=False, busy_retries=0) as impatient:
            with pytest.raises(ResourceExhausted, match="3 requests in flight") as busy:
                impatient.get_cluster_status()
            assert busy.value.retry_after_s == 0.2

        answers: list[Any] = []
        with CortexClient(address, tls=False) as client:
            asking = threading.Thread(target=lambda: answers.append(client.get_cluster_status()))
            asking.start()
            wait_until(lambda: admission.refused[REQUESTS] >= 2, 10, what="the client refused")
            holders[1].cancel()  # a slot frees up; the retry gets it
            asking.join(15)
            assert [a.node_id for a in answers] == ["n1"]

            # The only wait slot is taken: the client polls GetTaskResult
            # without wait, and returns once the task is over.
            waited: list[pb.Task] = []
            waiting = threading.Thread(
                target=lambda: waited.append(client.get_task_result("t", True, 20_000).task)
            )
            waiting.start()
            wait_until(lambda: admission.refused[WAITS] >= 1, 10, what="the wait refused")
            servicer.state = pb.TASK_STATE_COMPLETED
            waiting.join(20)
            assert [t.state for t in waited] == [pb.TASK_STATE_COMPLETED]
        servicer.release.set()
        for holder in holders:
            holder.cancel()


def test_grpcs_own_refusal_when_every_thread_is_taken_is_retried_too() -> None:
    """The last line behind the limits: a server that refuses what it has no
    thread for (as a node's public server does) is retried like a busy node."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1), maximum_concurrent_rpcs=1)
    servicer = BlockingServicer()
    pb_grpc.add_CortexServiceServicer_to_server(servicer, server)
    address = f"127.0.0.1:{free_ports(1)[0]}"
    server.add_insecure_port(address)
    server.start()
    try:
        with grpc.insecure_channel(address) as channel:
            stub = pb_grpc.CortexServiceStub(channel)

            def holding() -> Any:
                # Sent again if it lost the race for the thread and was refused.
                call = stub.GetTask.future(pb.GetTaskRequest(task_id="t"), timeout=30)
                wait_until(lambda: servicer.holding.is_set() or call.done(), 10)
                return call if servicer.holding.is_set() else None

            holder = wait_until(holding, 10, what="a call to hold the only thread")
            with CortexClient(address, tls=False, busy_retries=0) as client:
                busy = wait_until(
                    lambda: _refusal_of(client), 10, what="the only thread to be taken"
                )
                assert "Concurrent RPC limit exceeded" in str(busy)
                assert busy.retry_after_s == 0.2
            servicer.release.set()
            assert holder.result(10).task.id == "t"
    finally:
        servicer.release.set()
        server.stop(0)


def _refusal_of(client: CortexClient) -> ResourceExhausted | None:
    try:
        client.get_cluster_status()
    except ResourceExhausted as busy:
        return busy
    return None
