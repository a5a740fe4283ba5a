"""A node's peer address in the replicated state: NODE_JOIN carries it,
entries written before it existed still decode (with none), and a database
from before migration 5 gains the column with its rows intact."""

from __future__ import annotations

import json
from pathlib import Path

from cortex.state.entries import Entry, NodeJoin, decode_batch, encode_batch
from cortex.state.machine import StateMachine
from cortex.state.queries import StateReader
from cortex.state.schema import MIGRATIONS, connect


def _join_batch(payload: dict[str, object]) -> bytes:
    entry = Entry.create(NodeJoin("n1", "127.0.0.1:1", "127.0.0.1:2"), node="n1", ts=1000)
    raw = json.loads(encode_batch([entry]))
    raw[0]["payload"] = payload
    return json.dumps(raw).encode()


def test_a_join_records_the_peer_address_and_an_older_one_records_none(tmp_path: Path) -> None:
    machine = StateMachine(str(tmp_path / "state.db"))
    try:
        batch = encode_batch(
            [
                Entry.create(
                    NodeJoin("n1", "127.0.0.1:1", "127.0.0.1:2", peer_address="127.0.0.1:3"),
                    node="n1",
                    ts=1000,
                )
            ]
        )
        assert machine.apply_batch(1, batch) == [{"ok": True, "status": "active"}]
        older = {"node_id": "n2", "raft_address": "127.0.0.1:4", "grpc_address": "127.0.0.1:5"}
        (entry,) = decode_batch(_join_batch(older))
        assert isinstance(entry, Entry) and entry.decode_payload() == NodeJoin(
            "n2", "127.0.0.1:4", "127.0.0.1:5"
        )
        assert machine.apply_batch(2, _join_batch(older))[0]["ok"]  # type: ignore[index]
        peers = {n.id: n.peer_address for n in StateReader(machine.path).nodes()}
        assert peers == {"n1": "127.0.0.1:3", "n2": ""}
        wrong = {**older, "peer_address": 7}
        assert not machine.apply_batch(3, _join_batch(wrong))[0]["ok"]  # type: ignore[index]
    finally:
        machine.close()


def test_migration_5_adds_the_peer_address_to_existing_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    conn = connect(path)
    for number, script in enumerate(MIGRATIONS[:4], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.execute(
        "INSERT INTO nodes (id, raft_address, grpc_address, status, labels, executors,"
        " resources, joined_at, updated_at) VALUES ('n1', 'r', 'g', 'active', '{}', '[]', '{}',"
        " 1, 1)"
    )
    conn.close()
    StateMachine(path).close()
    (node,) = StateReader(path).nodes()
    assert (node.id, node.grpc_address, node.peer_address) == ("n1", "g", "")
