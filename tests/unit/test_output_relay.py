"""Relaying output between two nodes over real gRPC on 127.0.0.1: each node
has its own StateMachine (fed the same entries, as Raft would), output hub
and streaming service; clients call the relaying node's public server, which
calls the source's peer listener. Covers exact resumption after the source's
listener drops mid-stream, and a source that goes silent (a partition, which
cannot be made here, is played by a stand-in servicer that never answers)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from cortex.api.admission import STREAMS
from cortex.api.client import CortexClient
from cortex.api.consistency import ReadGate
from cortex.api.peer_client import PeerClient
from cortex.api.peer_server import PeerListener, PeerServicer, read_index_unavailable
from cortex.api.servicer import CortexServicer
from cortex.errors import ResourceExhausted, Unavailable
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.output import OutputHub, StreamingService
from cortex.output.relay import NODE_HEADER
from cortex.state.entries import (
    Entry,
    NodeJoin,
    Payload,
    TaskAssign,
    TaskComplete,
    TaskRetry,
    TaskStarted,
    TaskSubmit,
    encode_batch,
)
from cortex.state.machine import StateMachine
from cortex.state.queries import StateReader
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.cluster import SECRET, free_ports, wait_until


class NoLeader:
    """The Raft view of a node that knows no leader (reads here are served
    from what the node has applied)."""

    is_leader = False
    leader_address = None
    raftCommitIndex = 0


class FullIds:
    """Stands in for the task operations, which the streaming calls only ask
    to resolve an id: these tests always give full ids."""

    def resolve_id(self, task_id: str) -> str:
        return task_id


class StreamingNode:
    """The output side of a node: its public server for clients and its peer
    listener for other nodes, each on its own port."""

    def __init__(self, root: Path, node_id: str, port: int, peer_port: int) -> None:
        self.node_id = node_id
        self.address = f"127.0.0.1:{port}"
        self.peer_address = f"127.0.0.1:{peer_port}"
        self.machine = StateMachine(str(root / node_id / "state.db"))
        self.hub = OutputHub(root / node_id / "attempts")
        self.peers = PeerClient(node_id, SECRET)
        self.streaming = StreamingService(
            node_id, self.machine.path, StateReader(self.machine.path), self.hub, self.peers, 0.3
        )
        self.machine.add_listener(self.streaming.on_change)
        self.streaming.start()
        self.index = 0
        self.server: grpc.Server | None = None
        self.listener: PeerListener | None = None

    def serve(self) -> None:
        """The public server, as clients reach it."""
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        reads = ReadGate(self.node_id, self.machine, NoLeader(), read_index_unavailable, 5.0)
        pb_grpc.add_CortexServiceServicer_to_server(
            CortexServicer(FullIds(), *[None] * 3, reads, self.streaming),  # type: ignore[arg-type]
            self.server,
        )
        assert self.server.add_insecure_port(self.address)
        self.server.start()

    def serve_peers(
        self, servicer: peer_grpc.PeerServiceServicer | None = None, max_streams: int = 8
    ) -> None:
        """The peer listener, as relaying nodes reach it."""
        self.listener = PeerListener(self.node_id, self.peer_address, SECRET, max_streams)
        self.listener.start(
            servicer or PeerServicer(None, None, None, self.streaming)  # type: ignore[arg-type]
        )

    def stop_peers(self) -> None:
        assert self.listener is not None
        self.listener.stop(0)

    def apply(self, *payloads: Payload) -> None:
        self.index += 1
        batch = encode_batch([Entry.create(p, node="n1", ts=1) for p in payloads])
        self.machine.apply_batch(self.index, batch)

    def close(self) -> None:
        self.streaming.stop()
        if self.server is not None:
            self.server.stop(0)
        if self.listener is not None:
            self.listener.stop(0)
        self.peers.close()
        self.machine.close()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[StreamingNode, StreamingNode]]:
    source_port, source_peer, relay_port, relay_peer = free_ports(4)
    source = StreamingNode(tmp_path, "n1", source_port, source_peer)
    relaying = StreamingNode(tmp_path, "n2", relay_port, relay_peer)
    for node in (source, relaying):
        node.apply(
            NodeJoin("n1", "127.0.0.1:1", source.address, peer_address=source.peer_address),
            NodeJoin("n2", "127.0.0.1:2", relaying.address, peer_address=relaying.peer_address),
            TaskSubmit("t1", {"command": ["true"]}),
        )
        node.apply(TaskAssign([{"task_id": "t1", "node": "n1", "attempt": 1}]))
        node.apply(TaskStarted("t1", 1, "n1"))
    relaying.serve()
    yield source, relaying
    source.close()
    relaying.close()


def follow(
    address: str, out: list[pb.StreamTaskOutputResponse], task_id: str = "t1"
) -> threading.Thread:
    def run() -> None:
        with CortexClient(address) as client:
            out.extend(client.stream_task_output(task_id, follow=True, timeout_s=60))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_relay_resumes_at_the_exact_byte_after_its_source_drops(
    pair: tuple[StreamingNode, StreamingNode],
) -> None:
    source, relaying = pair
    source.serve_peers()
    sink = source.hub.open("t1", 1)
    got: list[pb.StreamTaskOutputResponse] = []
    follower = follow(relaying.address, got)
    sink.write("stdout", b"before the drop\n")
    wait_until(lambda: got, 10, what="the first relayed chunk")
    source.stop_peers()  # the connection goes; the relay reconnects
    sink.write("stderr", b"written while it was away\n")
    source.serve_peers()
    sink.write("stdout", b"after\n")
    sink.close(exit_code=0)
    for node in pair:
        node.apply(TaskComplete("t1", 1, "n1", {"exit_code": 0}))
    follower.join(30)
    assert not follower.is_alive()
    data = [c.data for c in got if c.HasField("data")]
    position = 0
    for item in data:
        assert item.offset == position  # nothing lost, nothing repeated
        position += len(item.data)
    assert b"".join(d.data for d in data) == (
        b"before the drop\nwritten while it was away\nafter\n"
    )
    end = got[-1].end
    assert (end.state, end.exit_code, end.interrupted) == (pb.TASK_STATE_COMPLETED, 0, False)


def test_a_source_that_cannot_be_reached_is_unavailable_with_its_name(
    pair: tuple[StreamingNode, StreamingNode],
) -> None:
    _, relaying = pair  # the source serves nothing
    with CortexClient(relaying.address) as client:
        with pytest.raises(Unavailable, match="is on node n1 .* which cannot be reached"):
            list(client.stream_task_output("t1", timeout_s=30))


def test_a_source_at_its_relay_limit_says_busy_through_the_relaying_node(
    pair: tuple[StreamingNode, StreamingNode],
) -> None:
    source, relaying = pair
    source.serve_peers(max_streams=1)
    sink = source.hub.open("t1", 1)
    sink.write("stdout", b"held\n")
    got: list[pb.StreamTaskOutputResponse] = []
    holder = follow(relaying.address, got)
    wait_until(lambda: got, 10, what="the first relay holding the source's only slot")
    with CortexClient(relaying.address, busy_retries=0) as client:
        with pytest.raises(ResourceExhausted, match="1 output streams relayed") as busy:
            list(client.stream_task_output("t1", follow=True, timeout_s=10))
    assert busy.value.retry_after_s == 1.0
    sink.close(exit_code=0)
    for node in pair:
        node.apply(TaskComplete("t1", 1, "n1", {"exit_code": 0}))
    holder.join(30)
    assert got[-1].end.state == pb.TASK_STATE_COMPLETED


class SilentSource(peer_grpc.PeerServiceServicer):
    """Stand-in for a partitioned node: answers, sends one chunk, then
    nothing ever again (the connection stays open)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def RelayTaskOutput(
        self, request: Any, context: Any
    ) -> Iterator[peer_pb.RelayTaskOutputResponse]:
        context.send_initial_metadata(((NODE_HEADER, "n1"),))
        data = pb.OutputData(stream=pb.OUTPUT_STREAM_STDOUT, offset=0, data=b"hello\n")
        yield peer_pb.RelayTaskOutputResponse(
            chunk=pb.StreamTaskOutputResponse(attempt=1, data=data)
        )
        self.release.wait(60)


def test_a_relay_from_a_silent_source_ends_once_the_log_gives_up_on_it(
    pair: tuple[StreamingNode, StreamingNode],
) -> None:
    source, relaying = pair
    silent = SilentSource()
    source.serve_peers(silent)
    got: list[pb.StreamTaskOutputResponse] = []
    follower = follow(relaying.address, got)
    wait_until(lambda: got, 10, what="the first relayed chunk")
    assert follower.is_alive()  # the attempt is still running: keep waiting
    # The leader declares the node lost and re-queues its attempt.
    relaying.apply(TaskRetry("t1", 1, "node n1 silent for over 3s"))
    follower.join(30)
    silent.release.set()
    assert not follower.is_alive()
    end = got[-1].end
    assert end.interrupted and end.state == pb.TASK_STATE_QUEUED and end.total_bytes == 6
    assert "went silent" in end.error and "n1" in end.error


def test_a_source_behind_the_relaying_node_catches_up_before_answering(
    pair: tuple[StreamingNode, StreamingNode],
) -> None:
    source, relaying = pair
    source.serve_peers()
    # The relaying node has applied the assignment; the executing one not yet.
    relaying.apply(TaskSubmit("t2", {"command": ["true"]}))
    relaying.apply(TaskAssign([{"task_id": "t2", "node": "n1", "attempt": 1}]))
    got: list[pb.StreamTaskOutputResponse] = []
    follower = follow(relaying.address, got, "t2")
    assert source.listener is not None
    listener = source.listener
    wait_until(lambda: listener.admission.in_use(STREAMS), 10, what="the relayed request")
    source.apply(TaskSubmit("t2", {"command": ["true"]}))
    source.apply(TaskAssign([{"task_id": "t2", "node": "n1", "attempt": 1}]))
    sink = source.hub.open("t2", 1)
    sink.write("stdout", b"late but there\n")
    sink.close(exit_code=0)
    for node in pair:
        node.apply(TaskStarted("t2", 1, "n1"), TaskComplete("t2", 1, "n1", {"exit_code": 0}))
    follower.join(30)
    assert not follower.is_alive()
    assert got[0].data.data == b"late but there\n"
    assert (got[-1].end.state, got[-1].end.interrupted) == (pb.TASK_STATE_COMPLETED, False)
