"""Cortex's two corrections to what pysyncobj does with messages it receives
(`cortex.raft.transport.guard_incoming`), on the messages themselves; the
simulator's regression seeds show each one matters in a running cluster."""

from __future__ import annotations

from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
import pytest

from cortex.raft.transport import (
    AckHold,
    gather_chunks,
    guard_incoming,
    keep_matching_entries,
)


class _Leader:
    """Just what the guard reads of a leader: its next and match index per
    node, and whether it leads."""

    def __init__(
        self, next_index: dict[str, int], match_index: dict[str, int] | None = None
    ) -> None:
        self._SyncObj__raftNextIndex = next_index
        self._SyncObj__raftMatchIndex = match_index if match_index is not None else {}
        self.leads = True

    def _isLeader(self) -> bool:  # noqa: N802
        return self.leads


def _append(**fields: Any) -> dict[str, Any]:
    return {"type": "append_entries", "term": 3, "commit_index": 40, **fields}


def test_an_append_without_a_log_position_loses_its_commit_index() -> None:
    snapshot_chunk = _append(serialized=b"...", transmission="process")
    guarded = guard_incoming(_Leader({}), "n2", snapshot_chunk)
    assert guarded["commit_index"] == 0
    assert snapshot_chunk["commit_index"] == 40, "the message it was given is left as it was"
    assert {k: v for k, v in guarded.items() if k != "commit_index"} == {
        k: v for k, v in snapshot_chunk.items() if k != "commit_index"
    }


def test_an_append_checked_against_the_log_keeps_its_commit_index() -> None:
    regular = _append(prevLogIdx=39, prevLogTerm=3, entries=[])
    assert guard_incoming(_Leader({}), "n2", regular) == regular


def _refusal(next_index: int, *, reset: bool = True, success: bool = False) -> dict[str, Any]:
    return {
        "type": "next_node_idx",
        "next_node_idx": next_index,
        "reset": reset,
        "success": success,
        "term": 3,
    }


def test_a_late_refusal_cannot_move_the_next_index_forward() -> None:
    leader = _Leader({"n2": 12})
    assert guard_incoming(leader, "n2", _refusal(30))["next_node_idx"] == 12


def test_a_refusal_may_move_the_next_index_back() -> None:
    leader = _Leader({"n2": 12})
    assert guard_incoming(leader, "n2", _refusal(7))["next_node_idx"] == 7


def test_acceptances_and_unknown_nodes_pass_unchanged() -> None:
    leader = _Leader({"n2": 12})
    accepted = _refusal(30, success=True)
    assert guard_incoming(leader, "n2", accepted) == accepted
    no_reset = _refusal(30, reset=False)
    assert guard_incoming(leader, "n2", no_reset) == no_reset
    assert guard_incoming(leader, "n9", _refusal(30))["next_node_idx"] == 30


def test_a_late_acceptance_raises_the_match_index_but_not_the_next_index_back() -> None:
    """Acknowledged after a sync, an acceptance names an index the leader
    has sent past: pysyncobj would set the next index back to it and send
    those entries again."""
    leader = _Leader({"n2": 40}, {"n2": 20})
    accepted = _refusal(31, reset=False, success=True)
    assert guard_incoming(leader, "n2", accepted) == accepted
    assert leader._SyncObj__raftMatchIndex == {"n2": 30}
    assert leader._SyncObj__raftNextIndex == {"n2": 40}


@pytest.mark.parametrize(
    ("next_index", "match_index", "leads"),
    [(31, 20, True), (25, 20, True), (40, 30, True), (40, 35, True), (40, 20, False)],
    ids=["at-the-next-index", "past-it", "no-news", "older", "not-leading"],
)
def test_other_acceptances_are_left_to_pysyncobj(
    next_index: int, match_index: int, leads: bool
) -> None:
    leader = _Leader({"n2": next_index}, {"n2": match_index})
    leader.leads = leads
    guard_incoming(leader, "n2", _refusal(31, reset=False, success=True))
    assert leader._SyncObj__raftMatchIndex == {"n2": match_index}


def test_anything_else_passes_unchanged() -> None:
    leader = _Leader({"n2": 12})
    for message in (b"raw", None, {"type": "request_vote", "term": 4}, {"no": "type"}):
        assert guard_incoming(leader, "n2", message) == message


# -------------------------------------------- appends that match the log


class _Follower:
    """Just what `keep_matching_entries` reads of pysyncobj: a follower's log
    of (command, index, term) from `first`."""

    def __init__(self, terms: list[int], first: int = 1) -> None:
        self.log = [(b"c%d" % i, i, term) for i, term in enumerate(terms, start=first)]

    def _SyncObj__getCurrentLogIndex(self) -> int:  # noqa: N802
        return self.log[-1][1]

    def _SyncObj__getCurrentLogTerm(self) -> int:  # noqa: N802
        return self.log[-1][2]

    def _SyncObj__getEntries(self, start: int, count: int) -> list[Any]:  # noqa: N802
        offset = start - self.log[0][1]
        return [] if offset < 0 else self.log[offset : offset + count]


def _resend(follower: _Follower, previous: int, count: int, **fields: Any) -> dict[str, Any]:
    entries = [
        follower.log[i - follower.log[0][1]] for i in range(previous + 1, previous + 1 + count)
    ]
    prev_term = follower.log[previous - follower.log[0][1]][2]
    return _append(prevLogIdx=previous, prevLogTerm=prev_term, entries=entries, **fields)


def test_a_resent_range_the_log_holds_keeps_the_entries_after_it() -> None:
    follower = _Follower([1] * 10 + [2] * 10)  # entries 1..20
    message = _resend(follower, 5, 3, commit_index=18)
    kept, verified_next = keep_matching_entries(follower, message)
    assert verified_next == 9, "the acceptance names what the append verified: 6..8"
    assert kept["prevLogIdx"] == 20 and kept["prevLogTerm"] == 2 and kept["entries"] == []
    assert kept["commit_index"] == 8, "the commit index goes no further than the append"
    assert message["prevLogIdx"] == 5, "the message it was given is left as it was"


def test_an_append_reaching_past_the_log_adds_only_what_is_new() -> None:
    follower = _Follower([1] * 10 + [2] * 10)
    message = _resend(follower, 15, 5, commit_index=40)
    message["entries"].append((b"new", 21, 2))
    kept, verified_next = keep_matching_entries(follower, message)
    assert (kept["prevLogIdx"], kept["entries"], verified_next) == (20, [(b"new", 21, 2)], 22)
    assert kept["commit_index"] == 21


def test_a_heartbeat_behind_the_log_keeps_it() -> None:
    follower = _Follower([1] * 20)
    kept, verified_next = keep_matching_entries(follower, _resend(follower, 12, 0, commit_index=30))
    assert (kept["prevLogIdx"], kept["commit_index"], verified_next) == (20, 12, 13)


@pytest.mark.parametrize(
    "change",
    ["conflicting-entry", "previous-term", "after-the-log", "before-the-log", "chunk"],
)
def test_appends_that_do_not_just_match_pass_unchanged(change: str) -> None:
    follower = _Follower([1] * 10 + [2] * 10, first=1)
    message = _resend(follower, 5, 3)
    if change == "conflicting-entry":
        message["entries"][1] = (b"other", 7, 3)
    elif change == "previous-term":
        message["prevLogTerm"] = 9
    elif change == "after-the-log":
        message = _append(prevLogIdx=20, prevLogTerm=2, entries=[(b"new", 21, 2)])
    elif change == "before-the-log":
        follower = _Follower([1] * 10, first=11)  # 1..10 compacted away
        message = _append(prevLogIdx=5, prevLogTerm=1, entries=[(b"c6", 6, 1)])
    else:
        message["transmission"] = "process"
    assert keep_matching_entries(follower, message) == (message, None)


def _chunks(entry: tuple[bytes, int, int], size: int) -> list[dict[str, Any]]:
    """The chunks of `entry` as pysyncobj 0.3.17's leader sends them, its
    labelling included (it measures the command, not the pickle)."""
    data = pysyncobj_pickle.dumps(entry)
    chunks = []
    for pos in range(0, len(data), size):
        if pos == 0:
            kind = "start"
        elif pos + size >= len(entry[0]):
            kind = "finish"
        else:
            kind = "process"
        chunks.append(
            _append(prevLogIdx=entry[1] - 1, prevLogTerm=1, transmission=kind,
                    data=data[pos : pos + size])
        )  # fmt: skip
    return chunks


def _receive_chunks(follower: Any, chunks: list[dict[str, Any]]) -> list[Any]:
    """What reaches pysyncobj of each chunk; its own gathering of "start"
    and "process" chunks is done here as it does it."""
    passed = []
    for chunk in chunks:
        message = gather_chunks(follower, chunk)
        if message.get("transmission") == "start":
            follower._SyncObj__recvTransmission = message["data"]
        elif message.get("transmission") == "process":
            follower._SyncObj__recvTransmission += message["data"]
        passed.append(message)
    return passed


def test_the_last_chunk_of_an_entry_becomes_the_append_of_the_whole_entry() -> None:
    follower = _Follower([1] * 5)
    entry = (b"x" * 300, 6, 1)
    passed = _receive_chunks(follower, _chunks(entry, 128))
    assert [m.get("transmission") for m in passed] == ["start", "process", None]
    assert passed[-1]["entries"] == [entry] and "data" not in passed[-1]
    assert follower._SyncObj__recvTransmission == ""


def test_a_chunk_labelled_last_before_the_end_of_the_pickle_waits_for_the_rest() -> None:
    """The leader says "finish" for a chunk that ends inside the pickle's
    last few dozen bytes: it is taken as "process", and the entry is whole
    at the real last chunk (unpickling it failed on the Raft thread)."""
    follower = _Follower([1] * 5)
    size = 128
    command = next(
        b"y" * n
        for n in range(300, 600)
        if len(pysyncobj_pickle.dumps((b"y" * n, 6, 1))) > (n // size + 1) * size
        and (n // size + 1) * size >= n
    )
    entry = (command, 6, 1)
    chunks = _chunks(entry, size)
    assert [c["transmission"] for c in chunks][-2:] == ["finish", "finish"], "mislabelled"
    passed = _receive_chunks(follower, chunks)
    assert [m.get("transmission") for m in passed][-2:] == ["process", None]
    assert passed[-1]["entries"] == [entry]


def test_an_entry_resent_in_chunks_is_compared_once_whole() -> None:
    follower = _Follower([1] * 10 + [2] * 10)
    passed = _receive_chunks(follower, _chunks(follower.log[5], 4))  # entry 6, held
    kept, verified_next = keep_matching_entries(follower, passed[-1])
    assert verified_next == 7
    assert (kept["prevLogIdx"], kept["entries"], kept["commit_index"]) == (20, [], 6)


def test_a_chunked_entry_that_differs_passes_whole() -> None:
    follower = _Follower([1] * 10 + [2] * 10)
    passed = _receive_chunks(follower, _chunks((b"other", 6, 3), 4))
    assert passed[-1]["entries"] == [(b"other", 6, 3)]
    assert keep_matching_entries(follower, passed[-1]) == (passed[-1], None)


def test_other_messages_pass_unchanged() -> None:
    follower = _Follower([1] * 5)
    for message in (_refusal(3), {"type": "request_vote", "term": 4}, b"raw", None):
        assert keep_matching_entries(follower, message) == (message, None)


class _Journal:
    dirty = False

    def sync(self) -> None:
        pass


def test_the_acceptance_of_a_kept_append_names_the_verified_entries() -> None:
    follower = _Follower([1] * 20)
    sent: list[tuple[Any, Any]] = []
    acks = AckHold(_Journal(), lambda node, message: sent.append((node, message)) or True)

    def pysyncobj_accepts(node: Any, message: dict[str, Any]) -> None:
        # What pysyncobj answers an append that matches where it starts.
        acks.send(node, {"type": "next_node_idx", "next_node_idx": message["prevLogIdx"] + 1,
                         "reset": False, "success": True})  # fmt: skip
        acks.send("n3", {"type": "next_node_idx", "next_node_idx": 99, "reset": False,
                         "success": True})  # fmt: skip

    acks.receive(follower, "n1", _resend(follower, 5, 3), pysyncobj_accepts)
    assert sent[0] == ("n1", {"type": "next_node_idx", "next_node_idx": 9, "reset": False,
                              "success": True})  # fmt: skip
    assert sent[1][1]["next_node_idx"] == 99, "only the answer to the rewritten append"
    acks.send("n1", {"type": "next_node_idx", "next_node_idx": 21, "reset": False, "success": True})
    assert sent[2][1]["next_node_idx"] == 21, "and only while it is handled"
