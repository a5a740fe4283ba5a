"""Heartbeats as steps: the sender driven by hand sends to every node at
once without threads (each call a future), skips a node still busy with its
last report and warns once about a node refusing them, all on its clock; the
receiver judges freshness by its own clock; and `PeerClient.heartbeat` over
real gRPC hands back a future that carries the outcome as a Cortex error."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from cortex.api.peer_client import PeerClient
from cortex.api.peer_server import PeerListener, PeerServicer
from cortex.errors import CortexError, FailedPrecondition, TlsError, Unauthenticated
from cortex.membership.board import ResourceBoard
from cortex.membership.freshness import StaleHeartbeat
from cortex.membership.heartbeat import (
    FIRST_REPORTS_INTERVAL_S,
    FIRST_REPORTS_MAX,
    HeartbeatReceiver,
    HeartbeatSender,
    signed_heartbeat,
)
from cortex.membership.peer_calls import Heartbeat
from cortex.scheduler.model import NodeResources
from cortex.state import entries as e
from cortex.steps import SYSTEM_CLOCK, Sleep, wall_ms
from tests.steps_by_hand import FakeClock, Stepper
from tests.workflow_sim import WorkflowLog

SECRET = "a-cluster-secret-of-some-length"
RESOURCES = NodeResources(cpu_cores=4.0, memory_total_mb=2048.0)


class FixedSampler:
    def sample(self) -> NodeResources:
        return RESOURCES


class HeldCalls:
    """PeerCalls whose heartbeats stay in flight until the test ends them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Heartbeat, Future[None]]] = []

    def heartbeat(self, address: str, heartbeat: Heartbeat, timeout_s: float) -> Future[None]:
        future: Future[None] = Future()
        self.calls.append((address, heartbeat, future))
        return future

    def to(self, address: str) -> list[Future[None]]:
        return [future for to, _, future in self.calls if to == address]


def join(log: WorkflowLog, node: str) -> None:
    entry = e.NodeJoin(node, f"{node}:1", f"{node}:2", executors=["noop"], peer_address=f"{node}:3")
    assert log.one(entry)["ok"]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[WorkflowLog]:
    log = WorkflowLog(tmp_path / "state.db")
    for node in ("n2", "n3"):
        join(log, node)
    yield log
    log.close()


def test_the_sender_sends_to_every_node_without_waiting_or_threads(
    log: WorkflowLog, caplog: pytest.LogCaptureFixture
) -> None:
    before = set(threading.enumerate())
    clock = FakeClock()
    board = ResourceBoard(clock)
    peers = HeldCalls()
    sender = HeartbeatSender(
        "n1", SECRET, FixedSampler(), board, log.reader, lambda: 3, {"zone": "a"}, peers,
        interval_s=2.0, clock=clock,
    )  # fmt: skip
    stepper = Stepper(sender.main())
    assert stepper.waiting == Sleep(FIRST_REPORTS_INTERVAL_S)  # none taken yet
    assert sorted(address for address, _, _ in peers.calls) == ["n2:3", "n3:3"]
    _, sent, _ = peers.calls[0]
    assert (sent.node_id, sent.seq, sent.sent_at_ms) == ("n1", 1, wall_ms(clock))
    assert sent.running_tasks == 3 and sent.resources == RESOURCES
    own = board.get("n1")
    assert own is not None and own.received_at == clock.monotonic()

    # n3 took its report; n2's is still on its way and is not sent again.
    peers.to("n3:3")[0].set_result(None)
    clock.advance(2)
    stepper.resume()
    assert len(peers.to("n2:3")) == 1 and len(peers.to("n3:3")) == 2
    assert peers.calls[-1][1].sent_at_ms == wall_ms(clock)

    # A node refusing reports is warned about once, until one is taken again.
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            peers.to("n2:3")[-1].set_exception(TlsError("certificate not trusted"))
            stepper.resume()
        assert caplog.text.count("heartbeats to n2:3 are refused") == 1
        peers.to("n2:3")[-1].set_result(None)
        stepper.resume()
        peers.to("n2:3")[-1].set_exception(Unauthenticated("wrong secret"))
        assert caplog.text.count("heartbeats to n2:3 are refused") == 2
    assert set(threading.enumerate()) - before == set()


def plain_sender(log: WorkflowLog, peers: HeldCalls) -> HeartbeatSender:
    """n1's sender, reporting every 2 s on a clock of its own."""
    return HeartbeatSender(
        "n1", SECRET, FixedSampler(), ResourceBoard(), log.reader, lambda: 0, {}, peers,
        interval_s=2.0, clock=FakeClock(),
    )  # fmt: skip


def test_a_node_gone_offline_is_not_sent_to(log: WorkflowLog) -> None:
    assert log.one(e.NodeStatus("n3", "offline", "silent"))["ok"]
    peers = HeldCalls()
    sender = plain_sender(log, peers)
    sent = sender.beat()
    assert [address for address, _, _ in peers.calls] == ["n2:3"] and len(sent) == 1


def test_a_starting_node_reports_often_until_every_node_took_one(log: WorkflowLog) -> None:
    peers = HeldCalls()
    sender = plain_sender(log, peers)
    stepper = Stepper(sender.main())
    # Not registered itself yet, and nobody has taken a report.
    assert stepper.waiting == Sleep(FIRST_REPORTS_INTERVAL_S)
    join(log, "n1")
    peers.to("n2:3")[0].set_result(None)
    stepper.resume()
    assert stepper.waiting == Sleep(FIRST_REPORTS_INTERVAL_S)  # n3 has taken none
    peers.to("n3:3")[0].set_result(None)
    stepper.resume()
    assert stepper.waiting == Sleep(2.0)
    # A node joining later is reached at the interval (it reports quickly itself).
    join(log, "n4")
    stepper.resume()
    assert stepper.waiting == Sleep(2.0)


def test_quick_reports_end_after_a_bounded_number_of_beats(log: WorkflowLog) -> None:
    join(log, "n1")
    peers = HeldCalls()
    sender = plain_sender(log, peers)
    stepper = Stepper(sender.main())
    waits = [stepper.waiting]
    for _ in range(FIRST_REPORTS_MAX + 2):
        for _, _, future in peers.calls:
            if not future.done():
                future.set_exception(CortexError("connection refused"))
        waits.append(stepper.resume())
    quick = Sleep(FIRST_REPORTS_INTERVAL_S)
    assert waits.count(quick) == FIRST_REPORTS_MAX
    assert waits[FIRST_REPORTS_MAX:] == [Sleep(2.0)] * 3


def heartbeat_at(clock: FakeClock, seq: int) -> Heartbeat:
    return signed_heartbeat(SECRET, "n2", "boot-a", seq, wall_ms(clock), RESOURCES, {}, 1)


def test_the_receiver_judges_freshness_and_ages_by_its_clock() -> None:
    sender_clock = FakeClock()
    clock = FakeClock()
    board = ResourceBoard(clock)
    receiver = HeartbeatReceiver(SECRET, board, window_s=4.0, clock=clock)
    receiver.receive(heartbeat_at(sender_clock, 1))
    report = board.get("n2")
    assert report is not None and report.received_at == clock.monotonic()
    clock.advance(3)
    assert board.age_s(report) == 3
    sender_clock.advance(-1.5)  # a report sent 4.5 s ago by this node's clock
    with pytest.raises(StaleHeartbeat, match=r"4\.5s old"):
        receiver.receive(heartbeat_at(sender_clock, 2))


@pytest.fixture
def listener() -> Iterator[tuple[str, ResourceBoard]]:
    board = ResourceBoard()
    receiver = HeartbeatReceiver(SECRET, board, window_s=10.0)
    listener = PeerListener("n2", "127.0.0.1:0", SECRET, max_streams=2)
    listener.start(PeerServicer(receiver, None, None, None))  # type: ignore[arg-type]
    yield f"127.0.0.1:{listener.port}", board
    listener.stop(0)


def test_peer_client_heartbeats_are_futures_with_cortex_errors(
    listener: tuple[str, ResourceBoard],
) -> None:
    address, board = listener
    client = PeerClient("n1", SECRET)
    stranger = PeerClient("n1", "not-the-cluster-secret")
    try:
        now_ms = wall_ms(SYSTEM_CLOCK)  # the listener's receiver reads the real clock
        report = signed_heartbeat(SECRET, "n1", "boot-a", 1, now_ms, RESOURCES, {}, 0)
        assert client.heartbeat(address, report, 5.0).result(10) is None
        assert board.get("n1") is not None
        with pytest.raises(FailedPrecondition, match="a replay"):
            client.heartbeat(address, report, 5.0).result(10)
        with pytest.raises(Unauthenticated):
            stranger.heartbeat(address, report, 5.0).result(10)
    finally:
        client.close()
        stranger.close()
    closed = client.heartbeat(address, report, 5.0)
    assert closed.done() and isinstance(closed.exception(), CortexError)
