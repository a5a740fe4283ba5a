"""Cortex's two corrections to what pysyncobj does with messages it receives
(`cortex.raft.transport.guard_incoming`), on the messages themselves; the
simulator's regression seeds show each one matters in a running cluster."""

from __future__ import annotations

from typing import Any

from cortex.raft.transport import guard_incoming


class _Leader:
    """Just the attribute the guard reads: a leader's next index per node."""

    def __init__(self, next_index: dict[str, int]) -> None:
        self._SyncObj__raftNextIndex = next_index


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


def test_anything_else_passes_unchanged() -> None:
    leader = _Leader({"n2": 12})
    for message in (b"raw", None, {"type": "request_vote", "term": 4}, {"no": "type"}):
        assert guard_incoming(leader, "n2", message) == message
