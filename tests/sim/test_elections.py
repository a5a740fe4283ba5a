"""Elections that should not happen, and ones that must: a voter cut off
from the others, or whose Raft thread was held up, comes back to the leader
it left, at the same term, instead of deposing it; a leader cut off is
replaced; a voter that did raise its term unseen is not stranded at it.
Run in the simulator (real pysyncobj, simulated network and clock), where a
cut drops a link's messages and a pause holds a node between two passes of
its Raft loop with its messages waiting, as a stalled tick does."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pysyncobj.syncobj

from cortex.sim.harness import SimConfig, Simulation, _pinned
from cortex.sim.node import SimNode

SECOND_US = 1_000_000


def _leader(sim: Simulation) -> SimNode | None:
    leaders = [
        n
        for n in sim.nodes.values()
        if n.running and not n.paused and n.group is not None and n.group.is_leader
    ]
    return leaders[0] if len(leaders) == 1 else None


def _term(node: SimNode) -> int:
    assert node.group is not None
    return int(node.group._SyncObj__raftCurrentTerm)


def _terms(sim: Simulation) -> list[int]:
    return [_term(n) for n in sim.nodes.values()]


def _commit_index(node: SimNode) -> int:
    assert node.group is not None
    return int(node.group._SyncObj__raftCommitIndex)


def _run_for(sim: Simulation, seconds: float, until: Callable[[], bool] | None = None) -> None:
    sim._run_until(sim.clock.now_us + int(seconds * SECOND_US), until=until)


@contextmanager
def _settled_cluster(tmp_path: Path) -> Iterator[tuple[Simulation, SimNode]]:
    """Three simulated nodes with a leader every follower has heard from."""
    sim = Simulation(SimConfig(seed=7, duration_s=30), str(tmp_path))
    with _pinned(sim.clock, sim.rng, None):
        try:
            for node in sim.nodes.values():
                sim.start_node(node)
            _run_for(sim, 10, until=lambda: _leader(sim) is not None)
            leader = _leader(sim)
            assert leader is not None, "no leader within 10 simulated seconds"
            _run_for(sim, 2)
            yield sim, leader
        finally:
            for node in sim.nodes.values():
                if node.running:
                    node.fail_stop("end of test")


def _cut(sim: Simulation, links: set[tuple[SimNode, SimNode]]) -> set[tuple[str, str]]:
    cut = {(a.address, b.address) for a, b in links}
    sim.network.cut.update(cut)
    return cut


def _isolate(sim: Simulation, node: SimNode) -> set[tuple[str, str]]:
    others = [n for n in sim.nodes.values() if n is not node]
    return _cut(sim, {(node, o) for o in others} | {(o, node) for o in others})


def test_a_follower_paused_past_its_election_deadline_leaves_the_leader_in_place(
    tmp_path: Path,
) -> None:
    with _settled_cluster(tmp_path) as (sim, leader):
        term = _term(leader)
        follower = next(n for n in sim.nodes.values() if n is not leader)
        for paused_s in (2, 3, 5):
            follower.paused = True
            # Well past the longest election timeout (1.4 s).
            _run_for(sim, paused_s)
            sim.faults._resume(follower.id)
            _run_for(sim, 2)
            assert _leader(sim) is leader, f"the leader changed after a {paused_s} s pause"
            assert _terms(sim) == [term] * len(sim.nodes)


def test_a_follower_cut_off_comes_back_to_the_same_leader_at_the_same_term(
    tmp_path: Path,
) -> None:
    """Without pre-vote it stood again and again while cut off (term 7 after
    6 s) and deposed the leader on its return."""
    with _settled_cluster(tmp_path) as (sim, leader):
        term = _term(leader)
        follower = next(n for n in sim.nodes.values() if n is not leader)
        cut = _isolate(sim, follower)
        _run_for(sim, 6)
        assert _term(follower) == term, "the follower raised its term while cut off"
        sim.network.cut.difference_update(cut)
        _run_for(sim, 3)
        assert _leader(sim) is leader
        assert _terms(sim) == [term] * len(sim.nodes)
        assert _commit_index(follower) == _commit_index(leader)


def test_a_follower_cut_off_and_held_up_within_its_ticks_asks_before_standing(
    tmp_path: Path,
) -> None:
    """The deadline passing between the look before the tick and the
    tick's own look (the thread descheduled there, or a slow write of its
    term) must not let pysyncobj stand without a pre-vote: a cut-off
    follower did, on a loaded machine, and came back at a higher term."""
    with _settled_cluster(tmp_path) as (sim, leader):
        term = _term(leader)
        follower = next(n for n in sim.nodes.values() if n is not leader)
        assert follower.group is not None
        group = follower.group
        journal = group._SyncObj__raftLog
        once_a_second = journal.onOneSecondTimer
        held_up = 0

        def held_up_past_the_deadline() -> None:
            # pysyncobj's tick calls this before it looks at the deadline.
            nonlocal held_up
            deadline_us = int(group._SyncObj__raftElectionDeadline * SECOND_US)
            if deadline_us >= sim.clock.now_us:
                sim.clock.now_us = deadline_us + 1
                held_up += 1
            once_a_second()

        journal.onOneSecondTimer = held_up_past_the_deadline
        _isolate(sim, follower)
        _run_for(sim, 6)
        assert held_up >= 3
        assert _term(follower) == term, "the follower stood without asking while cut off"


def test_pysyncobj_asks_whether_it_is_connected_only_as_it_stands() -> None:
    """`RaftGroup` answers pysyncobj's `__connectedToAnyone` as "may stand
    now": that holds only while pysyncobj asks it at the one place, its
    tick's election check, and nowhere else (an upgrade must keep it so)."""
    source = inspect.getsource(pysyncobj.syncobj.SyncObj)
    asks = [line.strip() for line in source.splitlines() if "self.__connectedToAnyone()" in line]
    assert asks == [
        "if self.__raftElectionDeadline < monotonicTime() and self.__connectedToAnyone():"
    ]


def test_a_follower_the_leader_cannot_reach_does_not_depose_it(tmp_path: Path) -> None:
    """One way only: the follower hears nothing from the leader but still
    reaches everyone. Without pre-vote it deposed the leader every election
    timeout, each new leader at a higher term, for as long as the cut lasted."""
    with _settled_cluster(tmp_path) as (sim, leader):
        term = _term(leader)
        follower = next(n for n in sim.nodes.values() if n is not leader)
        cut = _cut(sim, {(leader, follower)})
        _run_for(sim, 6)
        assert _leader(sim) is leader
        assert _term(leader) == term
        sim.network.cut.difference_update(cut)
        _run_for(sim, 3, until=lambda: _commit_index(follower) == _commit_index(leader))
        assert _leader(sim) is leader
        assert _commit_index(follower) == _commit_index(leader)


def test_a_leader_cut_off_is_replaced_and_follows_on_its_return(tmp_path: Path) -> None:
    with _settled_cluster(tmp_path) as (sim, leader):
        term = _term(leader)
        cut = _isolate(sim, leader)

        def replaced() -> bool:
            now = _leader(sim)
            return now is not None and now is not leader

        # The old leader steps down after leader_fallback_timeout_s (5 s),
        # long after the others elect one of their own.
        _run_for(sim, 5, until=replaced)
        successor = next(
            (n for n in sim.nodes.values() if n is not leader and n.group and n.group.is_leader),
            None,
        )
        assert successor is not None, "the two others elected no leader within 5 s"
        assert _term(successor) > term
        sim.network.cut.difference_update(cut)

        def following() -> bool:
            return (
                _leader(sim) is successor
                and len(set(_terms(sim))) == 1
                and _commit_index(leader) == _commit_index(successor)
            )

        _run_for(sim, 5, until=following)
        assert following(), (_terms(sim), _commit_index(leader), _commit_index(successor))


def test_a_voter_that_raised_its_term_unseen_is_not_stranded(tmp_path: Path) -> None:
    """A voter cut off just after a majority said they would vote for it
    stands at a term the others never hear of. pysyncobj's leader never
    learns a term from the answers to its appends, and voters hearing from
    it refuse a pre-vote: the voter must not stay refused at its term for
    good. Asked by it, the others take its term, and a leader is elected at
    a term every node shares."""
    with _settled_cluster(tmp_path) as (sim, leader):
        term = _term(leader)
        voter = next(n for n in sim.nodes.values() if n is not leader)
        cut = _isolate(sim, voter)
        assert voter.group is not None
        # What standing unseen leaves behind.
        voter.group._SyncObj__setCurrentTerm(term + 3, voter.group._SyncObj__selfNode.id)
        voter.group._SyncObj__setState(1)
        _run_for(sim, 2)
        sim.network.cut.difference_update(cut)

        def one_term_and_leader() -> bool:
            now = _leader(sim)
            return (
                now is not None
                and len(set(_terms(sim))) == 1
                and _commit_index(voter) == _commit_index(now)
            )

        _run_for(sim, 10, until=one_term_and_leader)
        assert one_term_and_leader(), (_terms(sim), _leader(sim))
        assert _terms(sim)[0] > term + 3


def test_malformed_pre_vote_messages_change_nothing(tmp_path: Path) -> None:
    """A peer holding the secret but sending nonsense: no exception on the
    Raft thread, no term taken, no vote counted."""
    with _settled_cluster(tmp_path) as (sim, leader):
        term = _term(leader)
        follower = next(n for n in sim.nodes.values() if n is not leader)
        assert follower.group is not None and leader.group is not None
        pre_vote = follower.group._pre_vote
        assert pre_vote is not None
        sender = leader.group._SyncObj__selfNode
        for message in (
            {"type": "cortex_pre_vote"},
            {"type": "cortex_pre_vote", "term": "9", "round": 1, "last_log_index": 1,
             "last_log_term": 1},
            {"type": "cortex_pre_vote", "term": True, "round": 1, "last_log_index": 1,
             "last_log_term": 1},
            {"type": "cortex_pre_vote", "term": 2, "round": None, "last_log_index": [],
             "last_log_term": {}},
            {"type": "cortex_pre_vote_reply", "term": "99", "granted": True},
            {"type": "cortex_pre_vote_reply", "term": term, "granted": "yes", "round": 1,
             "asked": term + 1},
        ):  # fmt: skip
            assert pre_vote.handles(sender, message)
        _run_for(sim, 2)
        assert _leader(sim) is leader
        assert _terms(sim) == [term] * len(sim.nodes)
