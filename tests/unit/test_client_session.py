"""The low-level client's session: every read carries ReadOptions with the
client's consistency and the highest index it has seen (response headers'
applied index, writes' commit index), streams included; a cluster status's
own commit index is not a write's and does not count."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from cortex.api.client import CortexClient
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc


class Recorder(pb_grpc.CortexServiceServicer):
    """Answers with the indexes it is told to, and keeps what reads asked for."""

    def __init__(self) -> None:
        self.applied = 0
        self.asked: list[pb.ReadOptions] = []

    def _header(self) -> pb.ResponseHeader:
        return pb.ResponseHeader(node_id="n1", applied_index=self.applied)

    def SubmitTask(self, request: Any, context: Any) -> pb.SubmitTaskResponse:
        return pb.SubmitTaskResponse(
            task=pb.Task(id="t1"), created=True, commit_index=40, header=self._header()
        )

    def GetTask(self, request: Any, context: Any) -> pb.GetTaskResponse:
        self.asked.append(request.read_options)
        return pb.GetTaskResponse(task=pb.Task(id=request.task_id), header=self._header())

    def GetClusterStatus(self, request: Any, context: Any) -> pb.GetClusterStatusResponse:
        return pb.GetClusterStatusResponse(commit_index=999, header=self._header())

    def WatchEvents(self, request: Any, context: Any) -> Iterator[pb.WatchEventsResponse]:
        self.asked.append(request.read_options)
        yield pb.WatchEventsResponse(event=pb.Event(seq=1))


@pytest.fixture
def node() -> Iterator[tuple[str, Recorder]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    recorder = Recorder()
    pb_grpc.add_CortexServiceServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", recorder
    server.stop(None)


def test_reads_carry_the_highest_index_the_client_has_seen(node: tuple[str, Recorder]) -> None:
    address, recorder = node
    with CortexClient(address, tls=False, token="") as client:
        assert client.session_index == 0
        client.get_task("t1")
        assert recorder.asked[-1] == pb.ReadOptions(consistency=pb.READ_CONSISTENCY_SESSION)
        recorder.applied = 12
        assert client.get_task("t1").task.id == "t1"
        assert client.session_index == 12
        recorder.applied = 30
        assert client.submit_task(pb.TaskSpec(command=["true"])).commit_index == 40
        assert client.session_index == 40  # the write's commit index, past its header
        client.get_task("t1")
        assert recorder.asked[-1].min_index == 40
        # A status's commit index is the Raft log's, not a write's.
        client.get_cluster_status()
        assert client.session_index == 40
        # Streams ask as well; the session never goes back.
        recorder.applied = 5
        client.get_task("t1")
        assert [m.event.seq for m in client.watch_events(follow=False)] == [1]
        assert recorder.asked[-1].min_index == 40
        client.advance_session(41)
        client.advance_session(3)
        assert client.session_index == 41


def test_consistency_and_a_seeded_session(node: tuple[str, Recorder]) -> None:
    address, recorder = node
    with CortexClient(
        address,
        tls=False,
        token="",
        consistency=pb.READ_CONSISTENCY_LINEARIZABLE,
        session_index=77,
    ) as client:
        client.get_task("t1")
        assert recorder.asked[-1] == pb.ReadOptions(
            consistency=pb.READ_CONSISTENCY_LINEARIZABLE, min_index=77
        )
        client.consistency = pb.READ_CONSISTENCY_STALE
        client.get_task("t1")
        assert recorder.asked[-1].consistency == pb.READ_CONSISTENCY_STALE
