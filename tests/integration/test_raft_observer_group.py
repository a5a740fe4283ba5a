"""pysyncobj's read-only node as Cortex runs it (`RaftSettings(observer=True)`):
three voters and an observer in this process, over loopback TCP with the
encrypted, guarded transport and durable journals. A late observer catches
up from a snapshot, applies every entry to its own SQLite (same digest),
proposes through the leader, restarts by replaying its journal, never counts
towards a quorum and, once the voters lose theirs, knows no leader."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cortex.errors import Unavailable
from cortex.raft import Proposer, RaftGroup, RaftSettings
from cortex.raft.group import SNAPSHOT_FILE
from cortex.state import StateMachine
from cortex.state import entries as e
from tests.cluster import free_ports, wait_until

SECRET = "observer-group-test-secret"


@dataclass
class Member:
    name: str
    group: RaftGroup
    machine: StateMachine
    proposer: Proposer

    def stop(self) -> None:
        self.proposer.stop()
        self.group.destroy()
        deadline = time.monotonic() + 10
        while self.group.tick_thread_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.machine.close()


def _start(root: Path, name: str, address: str, peers: list[str], observer: bool = False) -> Member:
    machine = StateMachine(str(root / name / "state.db"))
    settings = RaftSettings(
        self_address=address,
        peers=peers,
        data_dir=str(root / name),
        secret=SECRET,
        # Voters compact early, so a late observer must take a snapshot.
        compaction_min_entries=20 if not observer else 5000,
        compaction_min_time_s=0.5 if not observer else 300.0,
        observer=observer,
    )
    group = RaftGroup(settings, machine)
    return Member(name, group, machine, Proposer(group, commit_timeout_s=5.0))


def _submit(member: Member, count: int, prefix: str) -> None:
    entries = [
        e.Entry.create(e.TaskSubmit(f"{prefix}-{i}", {"command": ["true"]}), member.name)
        for i in range(count)
    ]
    for entry in entries:
        assert member.proposer.propose_one(entry, timeout=10)["ok"]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[list[Member], list[str], list[Member]]]:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    voters = [
        _start(tmp_path, f"v{i}", a, [p for p in addresses if p != a])
        for i, a in enumerate(addresses, 1)
    ]
    observers: list[Member] = []
    yield voters, addresses, observers
    for member in [*observers, *voters]:
        if member.group.tick_thread_alive():
            member.stop()


def _leader(voters: list[Member]) -> Member:
    return wait_until(
        lambda: next((v for v in voters if v.group.is_leader), None), 30, what="a leader"
    )


def _caught_up(observer: Member, voters: list[Member]) -> bool:
    target = max(v.machine.applied_index for v in voters)
    return observer.machine.applied_index >= target and observer.machine.digest() in {
        v.machine.digest() for v in voters if v.machine.applied_index == target
    }


def test_a_late_observer_replicates_without_a_vote(
    cluster: tuple[list[Member], list[str], list[Member]], tmp_path: Path
) -> None:
    voters, addresses, observers = cluster
    leader = _leader(voters)
    _submit(leader, 60, "early")
    # The voters compacted their logs: the observer can only start from a snapshot.
    wait_until(
        lambda: all((tmp_path / v.name / SNAPSHOT_FILE).exists() for v in voters),
        30, what="the voters' snapshots",
    )  # fmt: skip
    _submit(leader, 5, "before-observer")

    observer = _start(tmp_path, "o1", "127.0.0.1:1", addresses, observer=True)
    observers.append(observer)
    wait_until(lambda: _caught_up(observer, voters), 30, what="the observer to catch up")
    assert (tmp_path / "o1" / SNAPSHOT_FILE).exists()  # the leader's, received

    group = observer.group
    assert group.raft_role == "observer"
    assert not group.is_leader
    assert group.members == sorted(addresses)
    assert group.leader_address == str(leader.group.selfNode)
    assert group.hasQuorum
    # The voters count three voters and take the observer as read-only.
    assert all(sorted(v.group.members) == sorted(addresses) for v in voters)
    assert leader.group.getStatus()["readonly_nodes_count"] == 1

    # An observer proposes through the leader, like a follower.
    _submit(observer, 5, "from-observer")
    wait_until(lambda: _caught_up(observer, voters), 30, what="every node to apply them")

    # Restarted, it replays its journal past what its database holds, and
    # applies nothing twice.
    digest, applied = observer.machine.digest(), observer.machine.applied_index
    observer.stop()
    observers.remove(observer)
    again = _start(tmp_path, "o1", "127.0.0.1:1", addresses, observer=True)
    observers.append(again)
    assert again.machine.digest() == digest and again.machine.applied_index == applied
    _submit(leader, 5, "after-restart")
    wait_until(lambda: _caught_up(again, voters), 30, what="the restarted observer")


def test_an_observer_does_not_count_towards_a_quorum(
    cluster: tuple[list[Member], list[str], list[Member]], tmp_path: Path
) -> None:
    voters, addresses, observers = cluster
    leader = _leader(voters)
    for name in ("o1", "o2"):
        observers.append(_start(tmp_path, name, "127.0.0.1:1", addresses, observer=True))
    _submit(leader, 3, "first")
    for observer in observers:
        wait_until(lambda o=observer: _caught_up(o, voters), 30, what="observers to catch up")

    # One voter of three gone: two voters still commit.
    follower = next(v for v in voters if v is not leader)
    follower.stop()
    survivors = [v for v in voters if v is not follower]
    _submit(observers[0], 2, "one-down")
    wait_until(lambda: _caught_up(observers[1], survivors), 30, what="the second observer")

    # Two gone: two observers and one voter make no quorum.
    second = next(v for v in survivors if v is not leader)
    second.stop()
    last = leader
    started = time.monotonic()
    with pytest.raises(Unavailable):
        _submit(last, 1, "no-quorum")
    assert time.monotonic() - started < 10
    for observer in observers:
        wait_until(
            lambda o=observer: o.group.leader_address is None and not o.group.hasQuorum,
            30, what="the observer to lose its leader",
        )  # fmt: skip
        with pytest.raises(Unavailable):
            _submit(observer, 1, "observer-no-quorum")
    assert not any(o.group.is_leader for o in observers)
