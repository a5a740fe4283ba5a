"""The node views `StateReader.nodes` reads: made once per set of rows (their
JSON columns parsed once), and made again as soon as a row changes."""

from __future__ import annotations

from pathlib import Path

from cortex.state import entries as e
from tests.workflow_sim import WorkflowLog


def test_node_views_follow_every_change_of_the_rows(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    try:
        # The log's three nodes have joined.
        first = log.reader.nodes()
        again = log.reader.nodes()
        assert again == first and again is not first
        # Views of unchanged rows are the ones made before.
        assert [a is b for a, b in zip(first, again, strict=True)] == [True, True, True]

        log.one(e.NodeStatus("n2", "cordoned", "maintenance"))
        cordoned = log.reader.nodes()
        assert [(n.id, n.status, n.status_reason) for n in cordoned] == [
            ("n1", "active", ""), ("n2", "cordoned", "maintenance"), ("n3", "active", ""),
        ]  # fmt: skip
        assert cordoned[1].executors == first[1].executors == ["noop", "shell"]

        log.one(e.NodeLeave("n1"))
        assert [n.id for n in log.reader.nodes()] == ["n2", "n3"]
        removed = log.reader.nodes(include_removed=True)
        assert [(n.id, n.status) for n in removed] == [
            ("n1", "removed"), ("n2", "cordoned"), ("n3", "active"),
        ]  # fmt: skip
        assert [n.id for n in log.reader.nodes()] == ["n2", "n3"]
    finally:
        log.close()
