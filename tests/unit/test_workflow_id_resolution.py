"""A workflow named by its id or a unique prefix (`task list --workflow`,
`WatchEvents`) is found by its row alone: naming a workflow of thousands of
tasks costs what naming one of a few does, so a listing filtered by a large
workflow does not count its tasks again on every page."""

from __future__ import annotations

import json

import pytest

from cortex.errors import NotFound
from cortex.workflows.operations import WorkflowOperations
from cortex.workflows.sandbox import ConditionSandbox
from tests.workflow_sim import WorkflowLog


def _operations(log: WorkflowLog) -> WorkflowOperations:
    # Resolving reads only: no entry is proposed.
    return WorkflowOperations(
        "n1",
        None,  # type: ignore[arg-type]
        log.machine,
        log.reader,
        5.0,
        sandbox=ConditionSandbox(),
    )


def _submit(log: WorkflowLog, name: str, tasks: int) -> str:
    definition = {"name": name, "tasks": {f"t{i}": {"type": "noop"} for i in range(tasks)}}
    workflow_id, _ = log.submit(json.dumps(definition))
    return workflow_id


def _steps(log: WorkflowLog, operations: WorkflowOperations, workflow_id: str) -> int:
    """SQLite virtual machine steps of the reader's connection while resolving."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = log.reader._conn()
    conn.set_progress_handler(count, 1)
    try:
        assert operations.resolve_id(workflow_id) == workflow_id
    finally:
        conn.set_progress_handler(None, 1)
    return steps


def test_naming_a_large_workflow_costs_what_naming_a_small_one_does(log: WorkflowLog) -> None:
    operations = _operations(log)
    small = _submit(log, "small", 2)
    large = _submit(log, "large", 400)
    assert _steps(log, operations, large) == _steps(log, operations, small)


def test_a_workflow_is_named_by_its_id_or_a_unique_prefix(log: WorkflowLog) -> None:
    operations = _operations(log)
    first = _submit(log, "first", 3)
    second = _submit(log, "second", 3)
    assert operations.resolve_id(first) == first
    assert operations.filter_id(second[:12]) == second
    unknown = ("0" if first[0] != "0" else "f") * 8
    with pytest.raises(NotFound):
        operations.resolve_id(unknown)
    # A listing's filter naming no workflow (any more) matches nothing.
    assert operations.filter_id("gone-workflow") == "gone-workflow"
    assert operations.filter_id("") is None
