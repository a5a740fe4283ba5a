"""Serving StreamTaskOutput from the executing node: a real StateMachine fed
real entries, a real output hub on disk, and a stand-in for the gRPC call
context (the cluster tests in tests/integration use real ones)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.api.peer_client import PeerClient
from cortex.errors import FailedPrecondition, InvalidArgument, NotFound
from cortex.output.attempts import describe_attempt
from cortex.output.hub import AttemptOutput, LiveLog, OutputHub
from cortex.output.log import LogWriter
from cortex.output.relay import RelayClient
from cortex.output.stream import OutputStreamer
from cortex.output.ticker import StateTicker
from cortex.state.entries import (
    Entry,
    NodeJoin,
    Payload,
    TaskAssign,
    TaskComplete,
    TaskFailed,
    TaskRetry,
    TaskStarted,
    TaskSubmit,
    encode_batch,
)
from cortex.state.machine import StateMachine
from cortex.state.queries import StateReader
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import wait_until

SHELL = {"command": ["true"]}


class Caller:
    """Stands in for grpc.ServicerContext: the client is there until `leave`."""

    def __init__(self) -> None:
        self.active = True
        self.headers: list[Any] = []

    def is_active(self) -> bool:
        return self.active

    def add_callback(self, callback: Any) -> bool:
        return True

    def send_initial_metadata(self, headers: Any) -> None:
        self.headers.append(headers)


class Node:
    """One node's state and output parts, fed entries as if from Raft."""

    def __init__(self, root: Path, node_id: str = "n1") -> None:
        self.machine = StateMachine(str(root / "state.db"))
        self.reader = StateReader(self.machine.path)
        self.hub = OutputHub(root / "attempts")
        self.ticker = StateTicker()
        self.machine.add_listener(self.ticker.on_change)
        self.relay = RelayClient(PeerClient(node_id, "test-cluster-secret"))
        self.streamer = OutputStreamer(
            node_id, self.reader, self.hub, self.ticker, self.relay, end_state_wait_s=10
        )
        self.index = 0

    def apply(self, *payloads: Payload) -> None:
        self.index += 1
        self.machine.apply_batch(
            self.index, encode_batch([Entry.create(p, node="n1", ts=1000) for p in payloads])
        )

    def start_task(self, task_id: str, node: str = "n1", attempt: int = 1) -> None:
        self.apply(TaskAssign([{"task_id": task_id, "node": node, "attempt": attempt}]))
        self.apply(TaskStarted(task_id, attempt, node))

    def stream(
        self, caller: Caller | None = None, relayed_for: str | None = None, **request: Any
    ) -> Iterator[pb.StreamTaskOutputResponse]:
        return self.streamer.stream(
            pb.StreamTaskOutputRequest(**request), caller or Caller(), relayed_for
        )


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "n1")
    n.apply(
        NodeJoin("n1", "127.0.0.1:1", "127.0.0.1:2"), NodeJoin("n2", "127.0.0.1:3", "127.0.0.1:4")
    )
    n.apply(TaskSubmit("t1", SHELL))
    yield n
    n.ticker.close()
    n.machine.close()


def collect(chunks: Iterator[pb.StreamTaskOutputResponse]) -> tuple[bytes, pb.OutputEnd]:
    data = b""
    for chunk in chunks:
        if chunk.HasField("end"):
            return data, chunk.end
        data += chunk.data.data
    raise AssertionError("no end message")


def test_a_follower_gets_backlog_then_live_output_then_the_logged_outcome(node: Node) -> None:
    node.start_task("t1")
    sink = node.hub.open("t1", 1)
    sink.write("stdout", b"backlog\n")
    got: list[pb.StreamTaskOutputResponse] = []
    follower = threading.Thread(target=lambda: got.extend(node.stream(task_id="t1", follow=True)))
    follower.start()
    sink.write("stderr", b"live\n")
    sink.close(exit_code=0)
    # The process is done, but its outcome is not in the log yet: the end
    # message waits for it rather than report "running".
    assert follower.is_alive() or got[-1].end.state == pb.TASK_STATE_COMPLETED
    node.apply(TaskComplete("t1", 1, "n1", {"exit_code": 0}))
    follower.join(10)
    assert not follower.is_alive()
    assert [c.data.data for c in got[:-1]] == [b"backlog\n", b"live\n"]
    assert [c.data.offset for c in got[:-1]] == [0, 8]
    assert [c.data.stream for c in got[:-1]] == [pb.OUTPUT_STREAM_STDOUT, pb.OUTPUT_STREAM_STDERR]
    assert all(c.data.time.ToMilliseconds() > 0 for c in got[:-1])
    only_stderr, _ = collect(node.stream(task_id="t1", stream=pb.OUTPUT_STREAM_STDERR))
    assert only_stderr == b"live\n"
    end = got[-1].end
    assert (end.state, end.exit_code, end.total_bytes, end.interrupted) == (
        pb.TASK_STATE_COMPLETED,
        0,
        13,
        False,
    )


def test_a_log_opened_just_after_the_stream_looked_is_followed(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer announces its log, then creates its files. A stream that
    found no writer and then finds the files looks for the writer again,
    rather than end at once with no output as if the writer had gone."""
    node.start_task("t1")
    sinks: list[AttemptOutput] = []
    looked = node.hub.live

    def live_then_open(task_id: str, attempt: int) -> LiveLog | None:
        found = looked(task_id, attempt)
        if not sinks:
            sinks.append(node.hub.open(task_id, attempt))  # just after the look
        return found

    monkeypatch.setattr(node.hub, "live", live_then_open)
    got: list[pb.StreamTaskOutputResponse] = []
    follower = threading.Thread(target=lambda: got.extend(node.stream(task_id="t1", follow=True)))
    follower.start()
    wait_until(lambda: sinks, 5, what="the writer to open its log")
    sinks[0].write("stdout", b"building\n")
    sinks[0].close(exit_code=0)
    node.apply(TaskComplete("t1", 1, "n1", {"exit_code": 0}))
    follower.join(10)
    assert not follower.is_alive()
    assert b"".join(c.data.data for c in got[:-1]) == b"building\n"
    assert (got[-1].end.state, got[-1].end.total_bytes) == (pb.TASK_STATE_COMPLETED, 9)


def test_the_end_waits_for_the_outcome_by_the_clock_not_by_wake_ups(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every batch applied wakes a stream waiting for its attempt's outcome.
    Thirty of them, more than `end_state_wait_s` / `POLL_S`, come before the
    outcome, within a fraction of the wait: the end still carries it."""
    node.start_task("t1")
    waits: list[int] = []
    ticker_wait = node.ticker.wait

    def counted(seen: int, timeout: float) -> int:
        waits.append(seen)
        return ticker_wait(seen, timeout)

    monkeypatch.setattr(node.ticker, "wait", counted)
    sink = node.hub.open("t1", 1)
    sink.write("stdout", b"done\n")
    sink.close(exit_code=0)
    got: list[pb.StreamTaskOutputResponse] = []
    follower = threading.Thread(target=lambda: got.extend(node.stream(task_id="t1", follow=True)))
    follower.start()
    wait_until(lambda: waits, 5, what="the stream to wait for the outcome")

    def waits_again(count: int) -> Callable[[], bool]:
        return lambda: len(waits) > count or not follower.is_alive()

    for n in range(30):
        count = len(waits)
        node.apply(TaskSubmit(f"other-{n}", SHELL))
        wait_until(waits_again(count), 5, what="the stream's next wait")
    node.apply(TaskComplete("t1", 1, "n1", {"exit_code": 0}))
    follower.join(10)
    assert not follower.is_alive()
    assert (got[-1].end.state, got[-1].end.exit_code) == (pb.TASK_STATE_COMPLETED, 0)


def test_an_attempt_assigned_but_not_started_is_waited_for(node: Node) -> None:
    node.apply(TaskAssign([{"task_id": "t1", "node": "n1", "attempt": 1}]))
    got: list[pb.StreamTaskOutputResponse] = []
    follower = threading.Thread(target=lambda: got.extend(node.stream(task_id="t1", follow=True)))
    follower.start()
    sink = node.hub.open("t1", 1)
    sink.write("stdout", b"hello")
    sink.close(exit_code=4, error="exit code 4")
    node.apply(TaskStarted("t1", 1, "n1"), TaskFailed("t1", 1, "n1", "exit code 4"))
    follower.join(10)
    assert not follower.is_alive()
    assert got[0].data.data == b"hello"
    assert (got[-1].end.state, got[-1].end.exit_code) == (pb.TASK_STATE_QUEUED, 4)  # retrying
    assert got[-1].end.error == "exit code 4"


def test_without_follow_a_running_attempt_ends_at_what_is_there(node: Node) -> None:
    node.start_task("t1")
    sink = node.hub.open("t1", 1)
    sink.write("stdout", b"so far")
    data, end = collect(node.stream(task_id="t1"))
    assert data == b"so far" and end.state == pb.TASK_STATE_RUNNING and end.total_bytes == 6
    sink.close(0)


def test_a_log_whose_writer_died_ends_interrupted(node: Node) -> None:
    node.start_task("t1")
    writer = LogWriter(node.hub.directory("t1", 1), 1 << 20, 1 << 30)
    writer.append("stdout", b"partial", 1)  # then this node "died": no close
    data, end = collect(node.stream(task_id="t1", follow=True))
    assert data == b"partial"
    assert end.interrupted and end.exit_code == -1 and "stopped during the attempt" in end.error


def test_requests_that_cannot_be_served(node: Node) -> None:
    with pytest.raises(NotFound, match="no task with id nope"):
        collect(node.stream(task_id="nope"))
    with pytest.raises(NotFound, match="has no attempt 1 .it never ran"):
        collect(node.stream(task_id="t1", attempt=1))
    for bad in (
        {"task_id": ""},
        {"task_id": "t1", "attempt": -1},
        {"task_id": "t1", "stream": 9},
    ):
        with pytest.raises(InvalidArgument):
            collect(node.stream(**bad))  # type: ignore[arg-type]
    # A relayed request for an attempt that ran elsewhere is not relayed again.
    node.start_task("t1", node="n2")
    with pytest.raises(FailedPrecondition, match="ran on node n2, not on n1"):
        collect(node.stream(relayed_for="n3", task_id="t1"))


def test_a_follower_whose_client_leaves_stops_waiting(node: Node) -> None:
    node.start_task("t1")
    node.hub.open("t1", 1)
    caller = Caller()
    done = threading.Event()

    def follow() -> None:
        for _ in node.stream(caller, task_id="t1", follow=True):
            pass
        done.set()

    follower = threading.Thread(target=follow)
    follower.start()
    caller.active = False
    follower.join(10)
    assert done.is_set()


def test_describe_attempt_follows_the_log_through_retries(node: Node) -> None:
    node.start_task("t1")
    node.apply(TaskFailed("t1", 1, "n1", "exit code 2", {"exit_code": 2}))
    node.start_task("t1", node="n2", attempt=2)
    node.apply(TaskRetry("t1", 2, "node n2 silent for over 3s"))
    node.start_task("t1", attempt=3)
    task = node.reader.get_task("t1")
    assert task is not None
    events = node.reader.task_events("t1")
    first, second, third = (describe_attempt(task, events, n) for n in (1, 2, 3))
    assert first and (first.node, first.state, first.active, first.error) == (
        "n1", "queued", False, "exit code 2")  # fmt: skip
    assert second and (second.node, second.active, second.exit_code) == ("n2", False, None)
    assert second.error == "node n2 silent for over 3s"
    assert third and (third.node, third.state, third.active) == ("n1", "running", True)
    assert describe_attempt(task, events, 0) == third
    assert describe_attempt(task, events, 4) is None


def test_followers_get_an_interrupted_end_when_their_node_shuts_down(node: Node) -> None:
    node.start_task("t1")
    sink = node.hub.open("t1", 1)
    sink.write("stdout", b"up to here")
    got: list[pb.StreamTaskOutputResponse] = []
    follower = threading.Thread(target=lambda: got.extend(node.stream(task_id="t1", follow=True)))
    follower.start()
    wait_until(lambda: got, 10, what="the backlog")
    node.ticker.close()  # what StreamingService.stop does
    follower.join(10)
    assert not follower.is_alive()
    end = got[-1].end
    assert end.interrupted and end.total_bytes == 10 and "n1 is shutting down" in end.error
