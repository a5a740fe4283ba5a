"""A follower does not acknowledge a commit announcement twice
(`cortex.raft.transport.AckHold`): the leader announces each new commit index
in an append with no entries, and pysyncobj answers it naming the next index
the follower has just named for the entries themselves. The messages here are
pysyncobj's; `_Follower` answers them as pysyncobj does."""

from __future__ import annotations

from typing import Any

from cortex.raft.transport import ACK_REPEAT_S, AckHold


class _Journal:
    def __init__(self) -> None:
        self.dirty = False
        self.syncs = 0

    def sync(self) -> None:
        self.syncs += 1
        self.dirty = False


class _Follower:
    """A follower's log (pysyncobj's accessors) that answers each append as
    pysyncobj does: appends its entries, then accepts, naming the index after
    its last entry."""

    def __init__(self, acks: AckHold, journal: _Journal) -> None:
        self.log: list[tuple[bytes, int, int]] = [(b"c1", 1, 1)]
        self._acks = acks
        self._journal = journal

    def _SyncObj__getCurrentLogIndex(self) -> int:  # noqa: N802
        return self.log[-1][1]

    def _SyncObj__getCurrentLogTerm(self) -> int:  # noqa: N802
        return self.log[-1][2]

    def _SyncObj__getEntries(self, start: int, count: int = 1) -> list[Any]:  # noqa: N802
        offset = start - self.log[0][1]
        return [] if offset < 0 else self.log[offset : offset + count]

    def receive(self, leader: str, message: dict[str, Any]) -> None:
        self._acks.receive(self, leader, message, self._handle)

    def _handle(self, leader: str, message: dict[str, Any]) -> None:
        for entry in message.get("entries", []):
            self.log.append(entry)
            self._journal.dirty = True
        self._acks.send(leader, {"type": "next_node_idx", "next_node_idx": message["prevLogIdx"]
                                 + 1 + len(message.get("entries", [])), "reset": False,
                                 "success": True})  # fmt: skip


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _setup() -> tuple[_Follower, _Journal, _Clock, list[tuple[str, dict[str, Any]]]]:
    sent: list[tuple[str, dict[str, Any]]] = []
    journal = _Journal()
    clock = _Clock()
    acks = AckHold(journal, lambda node, message: sent.append((node, message)) or True, clock)  # type: ignore[arg-type]
    return _Follower(acks, journal), journal, clock, sent


def _entries(follower: _Follower, term: int, commit: int, count: int = 1) -> dict[str, Any]:
    last = follower.log[-1]
    entries = [(b"c", last[1] + i, term) for i in range(1, count + 1)]
    return {"type": "append_entries", "term": term, "commit_index": commit, "entries": entries,
            "prevLogIdx": last[1], "prevLogTerm": last[2]}  # fmt: skip


def _announcement(follower: _Follower, term: int, commit: int) -> dict[str, Any]:
    last = follower.log[-1]
    return {"type": "append_entries", "term": term, "commit_index": commit, "entries": [],
            "prevLogIdx": last[1], "prevLogTerm": last[2]}  # fmt: skip


def _named(sent: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, int]]:
    return [(node, message["next_node_idx"]) for node, message in sent]


def test_an_announcement_right_after_the_entries_goes_unanswered() -> None:
    follower, journal, clock, sent = _setup()
    follower.receive("n1", _entries(follower, 2, commit=1))
    follower._acks.flush()
    assert _named(sent) == [("n1", 3)], "the entries are acknowledged after the sync"
    clock.now += ACK_REPEAT_S / 2
    follower.receive("n1", _announcement(follower, 2, commit=2))
    follower._acks.flush()
    assert _named(sent) == [("n1", 3)], "the announcement's answer would repeat it"
    # The next entries are acknowledged however soon they come.
    follower.receive("n1", _entries(follower, 2, commit=2, count=2))
    follower._acks.flush()
    assert _named(sent) == [("n1", 3), ("n1", 5)]


def test_an_announcement_while_the_entries_await_their_sync_adds_nothing() -> None:
    follower, journal, clock, sent = _setup()
    follower.receive("n1", _entries(follower, 2, commit=1))
    assert journal.dirty and sent == [], "held until the sync"
    follower.receive("n1", _announcement(follower, 2, commit=2))
    follower._acks.flush()
    assert _named(sent) == [("n1", 3)]
    assert journal.syncs == 1


def test_heartbeats_are_answered_once_per_repeat_period() -> None:
    follower, _, clock, sent = _setup()
    follower.receive("n1", _entries(follower, 2, commit=1))
    follower._acks.flush()
    for _ in range(6):
        clock.now += ACK_REPEAT_S * 0.4
        follower.receive("n1", _announcement(follower, 2, commit=2))
        follower._acks.flush()
    # 2.4 periods after the entries' acknowledgement: two more answers, each
    # the first heartbeat a full period after the last answer sent.
    assert _named(sent) == [("n1", 3)] * 3


def test_a_new_term_or_another_leader_is_always_answered() -> None:
    follower, _, clock, sent = _setup()
    follower.receive("n1", _entries(follower, 2, commit=1))
    follower._acks.flush()
    follower.receive("n1", _announcement(follower, 3, commit=2))
    follower._acks.flush()
    follower.receive("n2", _announcement(follower, 4, commit=2))
    follower._acks.flush()
    assert _named(sent) == [("n1", 3), ("n1", 3), ("n2", 3)], (
        "a leader of a new term learns where the follower stands from its first answer"
    )


def test_refusals_and_answers_outside_an_append_pass() -> None:
    follower, _, clock, sent = _setup()
    follower.receive("n1", _entries(follower, 2, commit=1))
    follower._acks.flush()
    refusal = {"type": "next_node_idx", "next_node_idx": 3, "reset": True, "success": False}
    follower._acks.receive(follower, "n1", _announcement(follower, 2, commit=2),
                           lambda node, _: follower._acks.send(node, refusal))  # fmt: skip
    follower._acks.send("n1", {"type": "next_node_idx", "next_node_idx": 3, "reset": False,
                               "success": True})  # fmt: skip
    follower._acks.flush()
    assert [m["success"] for _, m in sent] == [True, False, True]
