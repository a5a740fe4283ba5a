"""A follower whose Raft thread was held up past its election deadline (a
journal sync behind a busy disk, a long apply) while the leader kept sending
reads what arrived before it looks at the deadline: the leader stays, at the
same term. Without that, it stood for election at once and its higher term
deposed a leader that never stopped. Run in the simulator (real pysyncobj,
simulated network and clock), where a pause holds a node between two passes
of its Raft loop with the leader's messages waiting, as a stalled tick does."""

from __future__ import annotations

from pathlib import Path

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


def test_a_follower_paused_past_its_election_deadline_leaves_the_leader_in_place(
    tmp_path: Path,
) -> None:
    sim = Simulation(SimConfig(seed=7, duration_s=30), str(tmp_path))
    with _pinned(sim.clock, sim.rng, None):
        try:
            for node in sim.nodes.values():
                sim.start_node(node)
            sim._run_until(10 * SECOND_US, until=lambda: _leader(sim) is not None)
            leader = _leader(sim)
            assert leader is not None, "no leader within 10 simulated seconds"
            # Settled: every follower has heard from it.
            sim._run_until(sim.clock.now_us + 2 * SECOND_US)
            term = _term(leader)
            follower = next(n for n in sim.nodes.values() if n is not leader)
            for paused_s in (2, 3, 5):
                follower.paused = True
                # Well past the longest election timeout (1.4 s).
                sim._run_until(sim.clock.now_us + paused_s * SECOND_US)
                sim.faults._resume(follower.id)
                sim._run_until(sim.clock.now_us + 2 * SECOND_US)
                assert _leader(sim) is leader, f"the leader changed after a {paused_s} s pause"
                assert [_term(n) for n in sim.nodes.values()] == [term] * len(sim.nodes)
        finally:
            for node in sim.nodes.values():
                if node.running:
                    node.fail_stop("end of test")
