"""Read consistency on one node, driven by hand: the gate's waits and
refusals, writes naming an id this node does not know yet, and the leader's
read barriers shared by the readers that arrive
while one is in flight."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from cortex.api.consistency import ReadGate, caught_up_before_not_found
from cortex.errors import InvalidArgument, NotFound, Unavailable, UnknownId
from cortex.raft.read_barrier import ReadBarriers
from cortex.state.entries import Entry
from cortex.v1 import cortex_pb2 as pb


class AppliedIndex:
    """The state machine's applied index and its wait, as StateMachine has them."""

    def __init__(self, index: int = 0) -> None:
        self._index = index
        self._changed = threading.Condition()

    @property
    def applied_index(self) -> int:
        return self._index

    def advance(self, index: int) -> None:
        with self._changed:
            self._index = index
            self._changed.notify_all()

    def wait_applied(self, index: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._index >= index, timeout)


class Raft:
    def __init__(self, leader: bool = True, commit_index: int = 0) -> None:
        self.is_leader = leader
        self.leader_address: str | None = "127.0.0.1:7100"
        self.raftCommitIndex = commit_index


def gate(state: AppliedIndex, read_index: Any = None, max_wait_s: float = 2.0) -> ReadGate:
    def no_read_index(timeout_s: float) -> int:
        raise AssertionError("no read index expected")

    return ReadGate("n1", state, Raft(commit_index=50), read_index or no_read_index, max_wait_s)


def options(consistency: int, min_index: int = 0) -> pb.ReadOptions:
    return pb.ReadOptions(consistency=consistency, min_index=min_index)  # type: ignore[arg-type]


def test_a_stale_read_never_waits() -> None:
    served = gate(AppliedIndex(3)).before_read(options(pb.READ_CONSISTENCY_STALE, 99), None)
    assert served == pb.READ_CONSISTENCY_STALE


def test_a_session_read_waits_until_its_index_is_applied() -> None:
    state = AppliedIndex(3)
    threading.Timer(0.05, state.advance, (12,)).start()
    served = gate(state).before_read(options(pb.READ_CONSISTENCY_UNSPECIFIED, 12), None)
    assert served == pb.READ_CONSISTENCY_SESSION
    assert state.applied_index == 12


def test_a_session_read_the_node_cannot_catch_up_with_is_refused() -> None:
    with pytest.raises(Unavailable, match="applied Raft index 3, behind the index 40"):
        gate(AppliedIndex(3), max_wait_s=0.05).before_read(
            options(pb.READ_CONSISTENCY_SESSION, 40), None
        )


class Canceller:
    """A write handler that looks a task up in the state it has applied: the
    task exists from index 7 on."""

    def __init__(self, state: AppliedIndex, read_index: int, max_wait_s: float = 2.0) -> None:
        self._reads = gate(state, lambda timeout_s: read_index, max_wait_s)
        self.state = state
        self.proposed = 0

    @caught_up_before_not_found
    def CancelTask(self, request: str, context: Any) -> str:  # noqa: N802 (gRPC's name)
        if self.state.applied_index < 7:
            raise UnknownId(f"no task with id {request}")
        self.proposed += 1
        if request == "refused":
            raise NotFound("task refused could not be cancelled: unknown_task")
        return "cancelled"


def test_a_write_naming_an_id_not_applied_here_yet_catches_up_and_finds_it() -> None:
    state = AppliedIndex(5)
    threading.Timer(0.05, state.advance, (9,)).start()
    assert Canceller(state, read_index=9).CancelTask("t1", None) == "cancelled"
    assert state.applied_index == 9


def test_an_id_unknown_after_catching_up_is_not_found() -> None:
    canceller = Canceller(AppliedIndex(5), read_index=5)
    with pytest.raises(UnknownId, match="no task with id t1"):
        canceller.CancelTask("t1", None)
    assert canceller.proposed == 0


def test_a_node_that_cannot_catch_up_says_so_rather_than_not_found() -> None:
    canceller = Canceller(AppliedIndex(5), read_index=9, max_wait_s=0.05)
    with pytest.raises(Unavailable, match="behind the index 9"):
        canceller.CancelTask("t1", None)


def test_a_refusal_by_apply_is_not_proposed_again() -> None:
    canceller = Canceller(AppliedIndex(8), read_index=8)
    with pytest.raises(NotFound, match="could not be cancelled"):
        canceller.CancelTask("refused", None)
    assert canceller.proposed == 1


def test_a_negative_min_index_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="min_index"):
        gate(AppliedIndex(3)).before_read(options(pb.READ_CONSISTENCY_SESSION, -1), None)


def test_a_linearizable_read_waits_for_the_read_index() -> None:
    state = AppliedIndex(5)
    asked: list[float] = []

    def read_index(timeout_s: float) -> int:
        asked.append(timeout_s)
        threading.Timer(0.05, state.advance, (9,)).start()
        return 9

    served = gate(state, read_index).before_read(options(pb.READ_CONSISTENCY_LINEARIZABLE), None)
    assert served == pb.READ_CONSISTENCY_LINEARIZABLE
    assert state.applied_index == 9 and len(asked) == 1


def test_the_header_says_what_the_answer_reflects() -> None:
    header = gate(AppliedIndex(7)).header(pb.READ_CONSISTENCY_STALE)
    assert (header.node_id, header.applied_index, header.leader_commit_index) == ("n1", 7, 50)
    assert header.consistency == pb.READ_CONSISTENCY_STALE


class Submitter:
    """Records each proposed batch; the test settles them."""

    def __init__(self) -> None:
        self.proposed: list[tuple[list[Entry], Future[list[dict[str, Any]]]]] = []

    def submit(self, entry: Entry) -> Future[dict[str, Any]]:
        raise AssertionError("barriers go through submit_all")

    def submit_all(self, entries: list[Entry]) -> Future[list[dict[str, Any]]]:
        future: Future[list[dict[str, Any]]] = Future()
        self.proposed.append((entries, future))
        return future


def _reader(barriers: ReadBarriers, results: list[Any]) -> threading.Thread:
    def read() -> None:
        try:
            results.append(barriers.read_index(5.0))
        except Unavailable as err:
            results.append(err)

    thread = threading.Thread(target=read)
    thread.start()
    return thread


def _until(condition: Any) -> None:
    deadline = threading.Event()
    for _ in range(500):
        if condition():
            return
        deadline.wait(0.01)
    raise AssertionError("condition not reached")


def test_readers_arriving_during_a_barrier_share_the_next_one() -> None:
    state = AppliedIndex(10)
    submitter = Submitter()
    barriers = ReadBarriers("n1", submitter, lambda: state.applied_index)
    first: list[Any] = []
    later: list[Any] = []
    threads = [_reader(barriers, first)]
    _until(lambda: len(submitter.proposed) == 1)
    threads += [_reader(barriers, later) for _ in range(5)]
    _until(lambda: barriers.waiting == 6)
    # The five wait for a barrier proposed after they arrived, not the one in flight.
    assert len(submitter.proposed) == 1
    state.advance(11)
    submitter.proposed[0][1].set_result([{"ok": True}])
    _until(lambda: len(submitter.proposed) == 2 and first == [11])
    assert later == []
    assert [entry.type for entry in submitter.proposed[1][0]] == ["READ_BARRIER"]
    state.advance(12)
    submitter.proposed[1][1].set_result([{"ok": True}])
    for thread in threads:
        thread.join(5)
    assert later == [12] * 5
    assert len(submitter.proposed) == 2


def test_a_barrier_that_does_not_commit_fails_its_readers() -> None:
    submitter = Submitter()
    barriers = ReadBarriers("n1", submitter, lambda: 0)
    results: list[Any] = []
    thread = _reader(barriers, results)
    _until(lambda: len(submitter.proposed) == 1)
    submitter.proposed[0][1].set_exception(Unavailable("entry not committed (LEADER_CHANGED)"))
    thread.join(5)
    assert len(results) == 1 and isinstance(results[0], Unavailable)
    assert "LEADER_CHANGED" in str(results[0])


class StoppedSubmitter(Submitter):
    """A proposer that refuses at once, as a stopping node's does."""

    def submit_all(self, entries: list[Entry]) -> Future[list[dict[str, Any]]]:
        raise RuntimeError("proposer stopped")


def test_a_barrier_refused_at_once_fails_its_reader_with_unavailable() -> None:
    barriers = ReadBarriers("n1", StoppedSubmitter(), lambda: 0)
    with pytest.raises(Unavailable, match="proposer stopped"):
        barriers.read_index(1.0)
    assert barriers.waiting == 0
