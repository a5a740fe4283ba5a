"""What a node's answers say of the leader (`LeaderDirectory`, the header's
`leader_id` / `leader_grpc_address`) and what a client makes of it
(`LeaderRoute`): real gRPC channels to a real listening port and to a port
nothing listens on, answers built as a node builds them."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from cortex.api.consistency import LeaderDirectory, ReadGate, leader_contact_age
from cortex.api.leader_route import LeaderRoute
from cortex.membership.board import ResourceBoard
from cortex.scheduler.model import NodeResources
from cortex.state.queries import NodeView
from cortex.v1 import cortex_pb2 as pb


class Raft:
    def __init__(self, leader_address: str | None, leader: bool = False) -> None:
        self.is_leader = leader
        self.leader_address = leader_address
        self.raftCommitIndex = 9


class Nodes:
    """The node table as StateReader.nodes gives it, counting the reads."""

    def __init__(self, *nodes: NodeView) -> None:
        self.rows = list(nodes)
        self.reads = 0

    def nodes(self) -> list[NodeView]:
        self.reads += 1
        return list(self.rows)


def _node(node_id: str, raft: str, grpc_address: str) -> NodeView:
    return NodeView(node_id, raft, grpc_address, "active", {}, [], {})


class Applied:
    applied_index = 4

    def wait_applied(self, index: int, timeout: float) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_directory_reads_the_node_table_only_when_the_leader_changes() -> None:
    raft = Raft("10.0.0.2:7100")
    nodes = Nodes(_node("n1", "10.0.0.1:7100", "10.0.0.1:50051"))
    directory = LeaderDirectory(raft, nodes, clock=Clock())  # type: ignore[arg-type]
    # Not registered yet: no leader row, and the table is read again next time.
    assert directory() is None and directory() is None
    assert nodes.reads == 2
    nodes.rows.append(_node("n2", "10.0.0.2:7100", "10.0.0.2:50051"))
    for _ in range(5):
        leader = directory()
        assert leader is not None and (leader.id, leader.grpc_address) == ("n2", "10.0.0.2:50051")
    assert nodes.reads == 3
    raft.leader_address = "10.0.0.1:7100"
    leader = directory()
    assert leader is not None and leader.id == "n1"
    assert nodes.reads == 4
    raft.leader_address = None
    assert directory() is None
    assert nodes.reads == 4


def test_a_leader_registered_anew_is_named_within_the_refresh() -> None:
    """The leader restarted with another gRPC port and won again under the
    same Raft address: its new registration is read at the next refresh."""
    raft = Raft("10.0.0.2:7100")
    nodes = Nodes(_node("n2", "10.0.0.2:7100", "10.0.0.2:50051"))
    clock = Clock()
    directory = LeaderDirectory(raft, nodes, refresh_s=1.0, clock=clock)  # type: ignore[arg-type]
    assert directory().grpc_address == "10.0.0.2:50051"  # type: ignore[union-attr]
    nodes.rows = [_node("n2", "10.0.0.2:7100", "10.0.0.2:50052")]
    clock.now += 0.9
    assert directory().grpc_address == "10.0.0.2:50051"  # type: ignore[union-attr]
    assert nodes.reads == 1
    clock.now += 0.1
    assert directory().grpc_address == "10.0.0.2:50052"  # type: ignore[union-attr]
    assert nodes.reads == 2
    # The next read is a refresh later again, not at every ask.
    clock.now += 0.5
    directory()
    assert nodes.reads == 2


def test_every_header_names_the_leader_it_knows() -> None:
    raft = Raft("10.0.0.2:7100")
    nodes = Nodes(_node("n2", "10.0.0.2:7100", "10.0.0.2:50051"))
    directory = LeaderDirectory(raft, nodes)  # type: ignore[arg-type]
    gate = ReadGate("n1", Applied(), raft, lambda _: 0, 1.0, lambda: None, directory)
    header = gate.header()
    assert (header.node_id, header.leader_id, header.leader_grpc_address) == (
        "n1",
        "n2",
        "10.0.0.2:50051",
    )
    raft.leader_address = None
    header = gate.header()
    assert (header.leader_id, header.leader_grpc_address) == ("", "")
    raft.leader_address = "10.0.0.3:7100"  # elected, not registered yet
    header = gate.header()
    assert (header.leader_commit_index, header.leader_id, header.leader_grpc_address) == (9, "", "")


def test_the_leaders_contact_age_comes_from_its_reports() -> None:
    raft = Raft("10.0.0.2:7100")
    directory = LeaderDirectory(raft, Nodes(_node("n2", "10.0.0.2:7100", "10.0.0.2:50051")))  # type: ignore[arg-type]
    board = ResourceBoard()
    age = leader_contact_age(directory, board)
    assert age() is None
    board.record("n2", NodeResources(), {}, 0)
    got = age()
    assert got is not None and 0 <= got < 5


@pytest.fixture
def listening() -> Iterator[str]:
    """A real gRPC server's address (it serves nothing: only the channel's
    connection matters here)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def _answer(node_id: str, leader_id: str = "", leader_address: str = "") -> Any:
    return pb.SubmitTaskResponse(
        header=pb.ResponseHeader(
            node_id=node_id, leader_id=leader_id, leader_grpc_address=leader_address
        )
    )


OWN = "127.0.0.1:1"


def _route(own: str = OWN) -> tuple[LeaderRoute, list[str]]:
    """A route for a client of one node at `own` (its channel never connects)."""
    opened: list[str] = []

    def open_channel(address: str) -> grpc.Channel:
        opened.append(address)
        return grpc.insecure_channel(address)

    return LeaderRoute({own: grpc.insecure_channel(own)}, open_channel), opened


def _close(route: LeaderRoute) -> None:
    for channel in route.release():
        channel.close()


def _picked(route: LeaderRoute, timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader = route.pick()
        if leader is not None:
            return leader
        time.sleep(0.01)
    return None


def test_writes_go_to_a_connected_leader(listening: str) -> None:
    route, opened = _route()
    try:
        assert route.pick() is None  # nothing learnt yet
        route.learn(_answer("n1", "n2", listening), OWN)
        assert route.leader == listening
        assert opened == []  # opened by the first write, not by learning
        leader = _picked(route)
        assert leader is not None and leader.address == listening
        assert opened == [listening]
        # An answer from a node that knows no leader keeps what was learnt.
        route.learn(_answer("n1"), OWN)
        assert route.pick() is leader
    finally:
        _close(route)
    assert route.pick() is None


def test_a_leader_nothing_listens_at_leaves_writes_where_they_were_sent() -> None:
    route, opened = _route()
    try:
        route.learn(_answer("n1", "n2", _closed_port()), OWN)
        for _ in range(20):
            assert route.pick() is None
            time.sleep(0.01)
        assert len(opened) == 1  # one channel, still trying
    finally:
        _close(route)


def test_a_leader_among_the_clients_nodes_is_written_to_over_its_channel(
    listening: str,
) -> None:
    other = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    other_address = f"127.0.0.1:{other.add_insecure_port('127.0.0.1:0')}"
    other.start()
    opened: list[str] = []

    def open_channel(address: str) -> grpc.Channel:
        opened.append(address)
        return grpc.insecure_channel(address)

    own = {listening: grpc.insecure_channel(listening), "localhost:9": grpc.insecure_channel("x:9")}
    route = LeaderRoute(own, open_channel)
    try:
        route.learn(_answer("n1", "n3", other_address), listening)
        assert _picked(route).address == other_address
        # The client's node at `listening` leads now: known by its id though
        # it registered under another spelling of its address.
        route.learn(_answer("n1", "n1", "localhost:1234"), listening)
        assert route.leader == listening
        leader = _picked(route)
        assert leader is not None and leader.channel is own[listening]
        # ... and by its address, before any answer of its own came.
        route.learn(_answer("n3", "n2", "localhost:9"), other_address)
        assert route.leader == "localhost:9"
        assert opened == [other_address]
        released = route.release()
        assert len(released) == 1 and released[0] not in own.values()
        for channel in released:
            channel.close()
    finally:
        other.stop(None)


def test_the_leader_moving_back_reuses_its_channel(listening: str) -> None:
    other = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    other_address = f"127.0.0.1:{other.add_insecure_port('127.0.0.1:0')}"
    other.start()
    route, opened = _route()
    try:
        route.learn(_answer("n1", "n2", listening), OWN)
        first = _picked(route)
        # An answer over the leader's channel names a newer leader.
        route.learn(_answer("n2", "n3", other_address), listening)
        second = _picked(route)
        assert second is not None and second.address == other_address
        route.learn(_answer("n3", "n2", listening), other_address)
        assert _picked(route) is first
        assert opened == [listening, other_address]
        released = route.release()
        assert released == [first.channel, second.channel]  # not the client's own
        for channel in released:
            channel.close()
    finally:
        other.stop(None)


def test_a_route_shared_by_threads_opens_one_channel(listening: str) -> None:
    route, opened = _route()
    route.learn(_answer("n1", "n2", listening), OWN)
    picked: list[Any] = []

    def write() -> None:
        picked.append(_picked(route))

    threads = [threading.Thread(target=write) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert opened == [listening]
        assert len({id(leader) for leader in picked}) == 1 and picked[0] is not None
    finally:
        _close(route)
