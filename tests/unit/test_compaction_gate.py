"""When the Raft log is compacted (`cortex.raft.compaction`): once the last
snapshot is past the floor, a compaction waits for the journal to reach its
share of that snapshot's size, and until then pysyncobj's thresholds are out
of reach. A real one-node group shows it: a first snapshot as pysyncobj
would take it, then none however many entries while held, one once released."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from cortex.raft import Proposer, RaftGroup, RaftSettings
from cortex.raft.compaction import CompactionGate, CompactionPolicy
from cortex.raft.group import SNAPSHOT_FILE
from cortex.state import StateMachine
from cortex.state import entries as e
from tests.cluster import free_ports, wait_until

MiB = 1024**2


def test_the_policy_holds_compaction_only_past_the_floor_and_below_the_share() -> None:
    policy = CompactionPolicy(min_entries=5000, min_time_s=300, log_ratio=0.5, floor_bytes=64 * MiB)
    assert not policy.held(journal_bytes=1, snapshot_bytes=63 * MiB)  # small: as pysyncobj would
    assert not policy.held(journal_bytes=1, snapshot_bytes=0)  # no snapshot yet
    assert policy.held(journal_bytes=10 * MiB, snapshot_bytes=100 * MiB)
    assert not policy.held(journal_bytes=50 * MiB, snapshot_bytes=100 * MiB)
    assert not dataclasses.replace(policy, log_ratio=0).held(1, 10**12)


def test_a_nodes_place_moves_its_wait_within_the_spread() -> None:
    policy = CompactionPolicy(min_entries=1, min_time_s=1, log_ratio=0.5, floor_bytes=0, spread=0.2)
    snapshot = 100 * MiB
    # The first in the spread waits for half the snapshot, the last for 0.6 of it.
    assert not policy.held(50 * MiB, snapshot, place=0.0)
    assert policy.held(50 * MiB, snapshot, place=1.0)
    assert policy.held(59 * MiB, snapshot, place=1.0)
    assert not policy.held(60 * MiB, snapshot, place=1.0)
    assert policy.held(54 * MiB, snapshot, place=0.5)
    assert not policy.held(56 * MiB, snapshot, place=0.5)


def test_the_gate_waits_where_the_nodes_place_says(tmp_path: Path) -> None:
    snapshot = tmp_path / "raft.snapshot"
    snapshot.write_bytes(b"x" * 1000)
    policy = CompactionPolicy(min_entries=50, min_time_s=7, log_ratio=1, floor_bytes=100, spread=1)
    journal = _Journal()
    journal.size_bytes = 1500  # past 1000 (place 0), short of 2000 (place 1)
    first = CompactionGate(_Conf(), policy, journal, str(snapshot), lambda: 100.0, lambda: 0.0)
    last = CompactionGate(_Conf(), policy, journal, str(snapshot), lambda: 100.0, lambda: 0.99)
    assert not first.held and last.held
    # Below the floor, pysyncobj's own thresholds, as much longer.
    snapshot.write_bytes(b"x" * 10)
    conf = _Conf()
    CompactionGate(conf, policy, journal, str(snapshot), lambda: 100.0, lambda: 0.5)
    assert (conf.logCompactionMinEntries, conf.logCompactionMinTime) == (75, 10.5)


class _Conf:
    logCompactionMinEntries = 0  # noqa: N815 (pysyncobj's names)
    logCompactionMinTime = 0.0  # noqa: N815


class _Journal:
    size_bytes = 0


def test_the_gate_sets_pysyncobjs_thresholds_and_looks_once_a_second(tmp_path: Path) -> None:
    snapshot = tmp_path / "raft.snapshot"
    conf, journal, now = _Conf(), _Journal(), [100.0]
    policy = CompactionPolicy(min_entries=50, min_time_s=7, log_ratio=2, floor_bytes=100, spread=0)
    gate = CompactionGate(conf, policy, journal, str(snapshot), lambda: now[0])
    # No snapshot yet: pysyncobj's own thresholds, judged once made.
    assert (conf.logCompactionMinEntries, conf.logCompactionMinTime) == (50, 7)
    assert not gate.held and gate.checks == 1
    snapshot.write_bytes(b"x" * 1000)
    now[0] += 1.0
    gate.tick()
    assert gate.held and conf.logCompactionMinEntries > 10**15
    assert conf.logCompactionMinTime > 10**12
    journal.size_bytes = 2000
    gate.tick()  # within the second: not looked at again
    assert gate.held and gate.checks == 2
    now[0] += 1.0
    gate.tick()
    assert not gate.held and (conf.logCompactionMinEntries, conf.logCompactionMinTime) == (50, 7)
    assert gate.checks == 3


def test_a_gate_made_next_to_a_large_snapshot_holds_from_the_start(tmp_path: Path) -> None:
    """A node restarting: pysyncobj's first look at its thresholds must
    already find them held, or it compacts at once."""
    snapshot = tmp_path / "raft.snapshot"
    snapshot.write_bytes(b"x" * 1000)
    conf, journal = _Conf(), _Journal()
    policy = CompactionPolicy(min_entries=50, min_time_s=7, log_ratio=2, floor_bytes=100)
    gate = CompactionGate(conf, policy, journal, str(snapshot), lambda: 100.0)
    assert gate.held and conf.logCompactionMinEntries > 10**15 and gate.checks == 1


@pytest.fixture
def one_node(tmp_path: Path):  # type: ignore[no-untyped-def]
    machine = StateMachine(str(tmp_path / "state.db"))
    settings = RaftSettings(
        self_address=f"127.0.0.1:{free_ports(1)[0]}",
        peers=[],
        data_dir=str(tmp_path),
        secret="compaction-gate-test-secret",
        compaction_min_entries=20,
        compaction_min_time_s=300.0,
        # Once there is a snapshot: far beyond what the test writes.
        compaction_log_ratio=1000.0,
        compaction_floor_bytes=0,
    )
    group = RaftGroup(settings, machine)
    proposer = Proposer(group, commit_timeout_s=5.0)
    yield group, proposer
    proposer.stop()
    group.destroy()
    deadline = time.monotonic() + 10
    while group.tick_thread_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    machine.close()


def _submit(proposer: Proposer, prefix: str, count: int) -> None:
    for i in range(count):
        entry = e.Entry.create(e.TaskSubmit(f"{prefix}-{i}", {"command": ["true"]}), "n1")
        assert proposer.propose_one(entry, timeout=10)["ok"]


def test_a_real_group_compacts_only_once_the_gate_lets_it(tmp_path: Path, one_node) -> None:  # type: ignore[no-untyped-def]
    group, proposer = one_node
    snapshot = tmp_path / SNAPSHOT_FILE
    wait_until(lambda: group.is_leader, 30, what="the one node to lead")
    # No snapshot yet: the first compaction comes as pysyncobj would take it.
    _submit(proposer, "first", 30)
    wait_until(snapshot.exists, 15, what="the first snapshot")
    wait_until(lambda: len(group.journal) < 20, 15, what="the journal compacted")
    first = snapshot.stat()
    # The gate looks at the files once a second: until it has seen the new
    # snapshot, pysyncobj's own thresholds still apply, and 20 more entries
    # could start a second snapshot.
    wait_until(lambda: group.compaction.held, 15, what="the gate to see the snapshot")
    _submit(proposer, "held", 60)
    # Three times pysyncobj's threshold of entries, and two looks at the
    # files since: held, so no second snapshot.
    seen = group.compaction.checks
    wait_until(lambda: group.compaction.checks >= seen + 2, 10, what="two more checks")
    assert group.compaction.held
    assert len(group.journal) > 60
    assert (snapshot.stat().st_mtime_ns, snapshot.stat().st_size) == (
        first.st_mtime_ns,
        first.st_size,
    )
    group.compaction.policy = dataclasses.replace(group.compaction.policy, log_ratio=0)
    wait_until(lambda: len(group.journal) < 20, 15, what="the journal compacted once released")
    assert snapshot.stat().st_mtime_ns != first.st_mtime_ns


def test_the_voters_of_a_group_take_distinct_places(tmp_path: Path) -> None:
    """Three real groups of one cluster: each its own place in the spread,
    by Raft address, so no two wait for the same share of their snapshot."""
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    settings = [
        RaftSettings(
            self_address=address,
            peers=[a for a in addresses if a != address],
            data_dir=str(tmp_path / f"node-{i}"),
            secret="compaction-place-test-secret",
        )
        for i, address in enumerate(addresses)
    ]
    machines, groups = [], []
    try:
        for i, node_settings in enumerate(settings):
            machines.append(StateMachine(str(tmp_path / f"state-{i}.db")))
            groups.append(RaftGroup(node_settings, machines[-1]))
        places = [g._compaction_place(s) for g, s in zip(groups, settings, strict=True)]
        assert sorted(places) == [0.0, 1 / 3, 2 / 3]
        assert places == [sorted(addresses).index(a) / 3 for a in addresses]
        # Before pysyncobj knows the members (the gate's first look), the same.
        unmade = object.__new__(RaftGroup)
        assert [unmade._compaction_place(s) for s in settings] == places
    finally:
        for group in groups:
            group.destroy()
        for machine in machines:
            machine.close()
