"""The order of journal syncs, acknowledgements and applies on real pysyncobj
nodes (three Raft members in this process, over loopback TCP, each with its
own journal and SQLite file). An entry counts as appended on a node only once
it is synced there: no node acknowledges an append, and none applies an
entry, before a sync that covers it. Without `raft_sync` the same run shows
acknowledgements nothing covers, so the check can fail. Followers apply a
committed entry while the leader still applies it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cortex.raft.group as group_module
from cortex.errors import Unavailable
from cortex.raft import Proposer, RaftGroup, RaftSettings
from cortex.raft.journal import DurableJournal
from cortex.raft.transport import DurableTransport
from cortex.state import StateMachine
from cortex.state import entries as e
from tests.cluster import free_ports, wait_until

Event = tuple[str, str, int]  # kind, node, raft index


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def record(self, kind: str, node: str, index: int) -> None:
        with self._lock:
            self.events.append((kind, node, index))

    def uncovered(self) -> list[Event]:
        """Acknowledgements and applies of an index that node had not synced."""
        synced: dict[str, int] = {}
        bad = []
        with self._lock:
            for kind, node, index in self.events:
                if kind == "sync":
                    synced[node] = max(synced.get(node, 0), index)
                elif index > synced.get(node, 0):
                    bad.append((kind, node, index))
        return bad

    def count(self, kind: str) -> int:
        return sum(1 for k, _, _ in self.events if k == kind)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()

    class RecordingJournal(DurableJournal):
        def sync(self) -> None:
            before = self.stats().syncs
            super().sync()
            if self.stats().syncs > before:
                recorder.record("sync", Path(self.directory).name, self.last_index)

    class RecordingTransport(DurableTransport):
        def _deliver(self, node: Any, message: Any) -> bool:
            if isinstance(message, dict) and message.get("type") == "next_node_idx":
                if message.get("success"):
                    name = Path(self._journal.directory).name
                    recorder.record("ack", name, message["next_node_idx"] - 1)
            return super()._deliver(node, message)

        def _onMessageReceived(self, node: Any, message: Any) -> None:  # noqa: N802
            if isinstance(message, dict) and message.get("type") == "next_node_idx":
                if message.get("success"):
                    name = Path(self._journal.directory).name
                    recorder.record("answer", name, message["next_node_idx"] - 1)
            super()._onMessageReceived(node, message)

    monkeypatch.setattr(group_module, "DurableJournal", RecordingJournal)
    monkeypatch.setattr(group_module, "DurableTransport", RecordingTransport)
    return recorder


@pytest.fixture
def members(tmp_path: Path, recorder: Recorder, request: pytest.FixtureRequest) -> Iterator[
    list[tuple[RaftGroup, StateMachine, Proposer]]
]:  # fmt: skip
    sync: bool = request.param
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    started = []
    for number, address in enumerate(addresses, 1):
        name = f"n{number}"
        machine = StateMachine(str(tmp_path / name / "state.db"))
        machine.add_listener(lambda index, _changes, n=name: recorder.record("apply", n, index))
        settings = RaftSettings(
            self_address=address,
            peers=[a for a in addresses if a != address],
            data_dir=str(tmp_path / name),
            secret="sync-order-test-secret",
            sync=sync,
        )
        group = RaftGroup(settings, machine)
        started.append((group, machine, Proposer(group)))
    yield started
    for group, _machine, proposer in started:
        proposer.stop()
        group.destroy()
    deadline = time.monotonic() + 10
    while any(g.tick_thread_alive() for g, _, _ in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    for _, machine, _ in started:
        machine.close()


def _propose_from_every_member(members: list[tuple[RaftGroup, StateMachine, Proposer]]) -> None:
    wait_until(lambda: all(g.leader_address for g, _, _ in members), 30, what="a leader")

    failures: list[BaseException] = []

    def propose(group: RaftGroup, proposer: Proposer, entry: e.Entry) -> dict[str, Any]:
        """An election under load ("missing_leader") does not say the entry
        was not applied: it is proposed again, the same, once a leader is
        known (applying it twice submits the task once)."""
        for _ in range(5):
            try:
                return proposer.propose_one(entry, timeout=30)
            except Unavailable:
                wait_until(lambda: group.leader_address, 30, what="a leader again")
        return proposer.propose_one(entry, timeout=30)

    def submit(group: RaftGroup, proposer: Proposer, prefix: str) -> None:
        try:
            for number in range(60):
                entry = e.Entry.create(
                    e.TaskSubmit(f"{prefix}-{number}", {"command": ["true"]}), prefix
                )
                assert propose(group, proposer, entry)["ok"]
        except BaseException as err:
            failures.append(err)

    threads = [
        threading.Thread(target=submit, args=(group, proposer, f"p{i}-{t}"))
        for i, (group, _, proposer) in enumerate(members)
        for t in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    target = max(machine.applied_index for _, machine, _ in members)
    wait_until(lambda: all(m.applied_index >= target for _, m, _ in members), 30,
               what="every member to apply everything")  # fmt: skip
    digests = {machine.digest() for _, machine, _ in members}
    assert len(digests) == 1


@pytest.mark.parametrize("members", [True], indirect=True, ids=["raft_sync"])
def test_no_append_is_acknowledged_or_applied_before_its_sync(members, recorder: Recorder):
    _propose_from_every_member(members)
    assert recorder.count("ack") > 100 and recorder.count("apply") > 100
    assert recorder.count("sync") > 0
    assert recorder.uncovered() == []


@pytest.mark.parametrize("members", [True], indirect=True, ids=["raft_sync"])
def test_a_leader_syncs_its_entries_before_it_reads_the_answers(members, recorder: Recorder):
    """The leader syncs what its tick logged (and sent) before it polls for
    the followers' answers, so its own sync overlaps theirs: no answer it
    reads names an entry it has not synced yet. Syncing after the poll
    instead, it read the first answer before its own sync for about a fifth
    of the entries."""
    _propose_from_every_member(members)
    assert recorder.count("answer") > 100
    assert [event for event in recorder.uncovered() if event[0] == "answer"] == []


@pytest.mark.parametrize("members", [False], indirect=True, ids=["no_raft_sync"])
def test_without_raft_sync_acknowledgements_are_not_covered(members, recorder: Recorder):
    _propose_from_every_member(members)
    assert recorder.count("sync") == 0
    uncovered = recorder.uncovered()
    assert any(kind == "ack" for kind, _, _ in uncovered)
    assert any(kind == "apply" for kind, _, _ in uncovered)


@pytest.mark.parametrize("members", [True], indirect=True, ids=["raft_sync"])
def test_followers_apply_an_entry_while_its_leader_still_applies_it(members):
    """The leader sends a new commit index before it applies what the index
    covers: with the leader's apply of an entry held, its followers apply
    the entry meanwhile, in the same term. They used to hear of the commit
    only after the leader's apply, or from a new leader once the silent one
    timed out."""
    held, release = threading.Event(), threading.Event()

    def hold(_index: int, changes: list[Any]) -> None:
        if any(change.task_id == "slow" for change in changes):
            held.set()
            release.wait(30)

    _propose_from_every_member(members)  # a settled cluster, every member level
    leader, leader_machine, proposer = wait_until(
        lambda: next((m for m in members if m[0].is_leader), None), 30, what="a leader"
    )
    term = leader.raftCurrentTerm
    leader_machine.add_listener(hold)
    entry = e.Entry.create(e.TaskSubmit("slow", {"command": ["true"]}), "n1")
    try:
        future = proposer.submit(entry)
        wait_until(held.is_set, 30, what="the leader to apply the entry")
        index = leader_machine.applied_index
        followers = [machine for group, machine, _ in members if group is not leader]
        wait_until(lambda: all(m.applied_index >= index for m in followers), 10,
                   what="the followers to apply it while the leader's apply is held")  # fmt: skip
        assert {group.raftCurrentTerm for group, _, _ in members} == {term}
    finally:
        release.set()
    assert future.result(timeout=30)["ok"]
