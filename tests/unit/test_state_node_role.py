"""A node's role in the replicated state: NODE_JOIN carries it ("voter" by
default, so entries written before observers existed replay as they did),
apply records it deterministically (the same digest on every replay), an
observer needs no Raft address, and a database from before migration 7
gains the column with every existing node a voter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cortex.state.digest import full_digest
from cortex.state.entries import Entry, NodeJoin, decode_batch, encode_batch
from cortex.state.machine import StateMachine
from cortex.state.queries import StateReader
from cortex.state.schema import MIGRATIONS, REPLICATED_TABLES, connect


def _batch(payload: dict[str, Any], ts: int = 1000) -> bytes:
    """A NODE_JOIN batch with exactly `payload` (older entries lack fields)."""
    entry = Entry.create(NodeJoin("x", "127.0.0.1:1", "127.0.0.1:2"), node="n1", ts=ts)
    raw = json.loads(encode_batch([entry]))
    raw[0]["payload"] = payload
    # Fixed id and trace: two machines applying the "same" entry must see the same bytes.
    raw[0]["id"] = f"entry-{payload['node_id']}-{ts}"
    raw[0]["trace"] = {"span_id": "0" * 16, "parent_span_id": None}
    return json.dumps(raw).encode()


def _join(node_id: str, raft: str, grpc: str, ts: int = 1000, **fields: Any) -> bytes:
    return _batch({"node_id": node_id, "raft_address": raft, "grpc_address": grpc, **fields}, ts)


# Voters old-style (no role), a voter and an observer new-style, a refused
# role, and an observer that later comes back as a voter.
HISTORY = [
    _join("v1", "127.0.0.1:7100", "127.0.0.1:7200"),
    _join("v2", "127.0.0.1:7101", "127.0.0.1:7201", role="voter"),
    _join("o1", "", "127.0.0.1:7202", role="observer", peer_address="127.0.0.1:7302"),
    _join("o2", "", "127.0.0.1:7203", role="witness"),
    _join("o3", "", "127.0.0.1:7204", role="observer"),
    _join("o3", "127.0.0.1:7104", "127.0.0.1:7204", ts=2000, role="voter"),
]


def _apply_all(machine: StateMachine, batches: list[bytes]) -> list[dict[str, Any]]:
    results = []
    for index, batch in enumerate(batches, start=2):
        outcome = machine.apply_batch(index, batch)
        results.extend(outcome or [])
    return results


def test_an_entry_without_a_role_decodes_as_a_voter() -> None:
    (entry,) = decode_batch(_join("v1", "127.0.0.1:7100", "127.0.0.1:7200"))
    assert isinstance(entry, Entry)
    assert entry.decode_payload() == NodeJoin("v1", "127.0.0.1:7100", "127.0.0.1:7200")
    assert NodeJoin("v1", "r:1", "g:2").role == "voter"


def test_apply_records_each_role_and_refuses_unknown_ones(tmp_path: Path) -> None:
    machine = StateMachine(str(tmp_path / "state.db"))
    try:
        results = _apply_all(machine, HISTORY)
        assert [r["ok"] for r in results] == [True, True, True, False, True, True]
        assert results[3]["reason"].startswith("invalid_payload: ")
        assert "witness" in results[3]["reason"]
        nodes = {n.id: n for n in StateReader(machine.path).nodes()}
        assert {node_id: n.role for node_id, n in nodes.items()} == {
            "v1": "voter",
            "v2": "voter",
            "o1": "observer",
            "o3": "voter",
        }
        assert nodes["o1"].raft_address == ""
        assert nodes["o3"].raft_address == "127.0.0.1:7104"
    finally:
        machine.close()


def test_a_voter_needs_a_raft_address_an_observer_none(tmp_path: Path) -> None:
    machine = StateMachine(str(tmp_path / "state.db"))
    try:
        (voter,) = machine.apply_batch(2, _join("v1", "", "127.0.0.1:7200")) or []
        assert not voter["ok"] and voter["reason"].startswith("invalid_payload: ")
        (observer,) = machine.apply_batch(3, _join("o1", "", "g:1", role="observer")) or []
        assert observer["ok"]
        (nameless,) = machine.apply_batch(4, _join("o2", "", "", role="observer")) or []
        assert not nameless["ok"] and nameless["reason"].startswith("invalid_payload: ")
    finally:
        machine.close()


def test_replaying_the_same_entries_gives_the_same_digest(tmp_path: Path) -> None:
    first = StateMachine(str(tmp_path / "a.db"))
    second = StateMachine(str(tmp_path / "b.db"))
    try:
        _apply_all(first, HISTORY)
        _apply_all(second, HISTORY)
        digest = first.digest()
        assert second.digest() == digest
        # The running digest covers the role column like every other.
        conn = connect(first.path)
        assert full_digest(conn, list(REPLICATED_TABLES)) == digest
        conn.close()
        # A restart replays the journal from the start: applied entries are skipped.
        _apply_all(first, HISTORY)
        assert first.digest() == digest
    finally:
        first.close()
        second.close()
    reopened = StateMachine(str(tmp_path / "a.db"))
    try:
        assert reopened.digest() == digest
    finally:
        reopened.close()


def test_the_role_is_part_of_the_digest(tmp_path: Path) -> None:
    voter = StateMachine(str(tmp_path / "voter.db"))
    observer = StateMachine(str(tmp_path / "observer.db"))
    try:
        voter.apply_batch(2, _join("n1", "", "g:1", role="voter"))
        observer.apply_batch(2, _join("n1", "", "g:1", role="observer"))
        assert voter.digest() != observer.digest()
    finally:
        voter.close()
        observer.close()


def test_migration_7_makes_every_existing_node_a_voter(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    conn = connect(path)
    for number, script in enumerate(MIGRATIONS[:6], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.execute(
        "INSERT INTO nodes (id, raft_address, grpc_address, status, labels, executors,"
        " resources, joined_at, updated_at) VALUES ('n1', 'r:1', 'g:1', 'active', '{}', '[]',"
        " '{}', 1, 1)"
    )
    conn.close()
    StateMachine(path).close()
    (node,) = StateReader(path).nodes()
    assert (node.id, node.raft_address, node.role) == ("n1", "r:1", "voter")
