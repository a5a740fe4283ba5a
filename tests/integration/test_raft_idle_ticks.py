"""An idle group's Raft threads wake for what is due, not every tick period:
three voters in this process over loopback TCP (encrypted transport,
durable journals). Over two idle seconds a follower's Raft thread wakes
about once per heartbeat it receives (pysyncobj's own loop woke twenty
more times a second besides), the leader's heartbeats still arrive every
appendEntriesPeriod, and when the leader goes a follower still stands for
election at its deadline, its role listeners told once it leads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cortex.raft import RaftGroup, RaftSettings
from cortex.raft.group import IDLE_TICK_MAX_S
from cortex.state import StateMachine
from tests.cluster import free_ports, wait_until

SECRET = "idle-ticks-test-secret"
WINDOW_S = 2.0


@dataclass
class Counted:
    """A group, with its Raft thread's polls and the appends it received."""

    group: RaftGroup
    machine: StateMachine
    polls: int = 0
    appends: int = 0
    # What the group told its role listener (leading or not), each with
    # whether the node led as it was told.
    told: list[tuple[bool, bool]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def counts(self) -> tuple[int, int]:
        with self.lock:
            return self.polls, self.appends


def _start(root: Path, name: str, address: str, peers: list[str]) -> Counted:
    machine = StateMachine(str(root / name / "state.db"))
    settings = RaftSettings(
        self_address=address, peers=peers, data_dir=str(root / name), secret=SECRET
    )
    member = Counted(RaftGroup(settings, machine), machine)
    poller = member.group._poller
    poll = poller.poll

    def counted_poll(timeout: float) -> Any:
        with member.lock:
            member.polls += 1
        return poll(timeout)

    def look(node: Any, message: dict[str, Any]) -> None:
        if message.get("type") == "append_entries":
            with member.lock:
                member.appends += 1

    def role_changed(leading: bool) -> None:
        with member.lock:
            member.told.append((leading, member.group.is_leader))

    poller.poll = counted_poll
    member.group._watch_messages(look)
    member.group.add_role_listener(role_changed)
    return member


@pytest.fixture
def voters(tmp_path: Path) -> Iterator[list[Counted]]:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    members = [
        _start(tmp_path, f"v{i}", a, [p for p in addresses if p != a])
        for i, a in enumerate(addresses, 1)
    ]
    yield members
    for member in members:
        _stop(member)


def _stop(member: Counted) -> None:
    if not member.group.tick_thread_alive():
        return
    member.group.destroy()
    deadline = time.monotonic() + 10
    while member.group.tick_thread_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    member.machine.close()


def _leader(members: list[Counted]) -> Counted:
    return wait_until(
        lambda: next((m for m in members if m.group.is_leader), None), 30, what="a leader"
    )


def test_an_idle_follower_wakes_for_heartbeats_not_ticks(voters: list[Counted]) -> None:
    leader = _leader(voters)
    followers = [m for m in voters if m is not leader]
    # Past the election's own messages: both followers hear the leader.
    wait_until(lambda: all(m.counts()[1] >= 5 for m in followers), 30, what="heartbeats")
    before = [m.counts() for m in followers]
    time.sleep(WINDOW_S)  # the window measured: nothing happens in it on purpose
    after = [m.counts() for m in followers]
    for (polls0, appends0), (polls1, appends1), member in zip(
        before, after, followers, strict=True
    ):
        polls, appends = polls1 - polls0, appends1 - appends0
        # Heartbeats every 0.1 s: about twenty in the window.
        assert appends >= 8, f"only {appends} appends reached {member.group.selfNode}"
        # One poll per heartbeat, and a few for the timers that cap a wait.
        spare = WINDOW_S / IDLE_TICK_MAX_S + 4
        assert polls <= appends + spare, (
            f"{member.group.selfNode} woke {polls} times for {appends} heartbeats"
        )


def test_a_follower_still_stands_at_its_deadline(voters: list[Counted]) -> None:
    """Role listeners hear of a node becoming the leader and of it ceasing
    to be (a node's leader-only loops are woken by them)."""
    leader = _leader(voters)
    assert leader.told[-1] == (True, True)
    _stop(leader)
    rest = [m for m in voters if m is not leader]
    new = wait_until(
        lambda: next((m for m in rest if m.group.is_leader), None), 30, what="a new leader"
    )
    assert new.group.raft_role == "leader"
    assert new.told[-1] == (True, True)
    # Told as it happened: leading when told so, not leading when told not.
    assert all(leading == led for m in voters for leading, led in m.told), [m.told for m in voters]


def test_a_leader_without_its_quorum_is_told_it_no_longer_leads(voters: list[Counted]) -> None:
    leader = _leader(voters)
    for member in voters:
        if member is not leader:
            _stop(member)
    # pysyncobj's leader steps down after leaderFallbackTimeout (5 s) unheard.
    wait_until(lambda: not leader.group.is_leader, 30, what="the leader to step down")
    wait_until(lambda: leader.told[-1] == (False, False), 5, what="its role listener told")
