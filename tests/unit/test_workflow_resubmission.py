"""A large workflow travels in parts. A client's retry with the same
idempotency key, after the answer to its first try was lost, carries on with
the workflow that try began, even when this node had not yet seen it (its
first entry then finds the key taken), instead of leaving it half-submitted
until the leader cancels it."""

from __future__ import annotations

import json
from typing import Any

from cortex.state import entries as e
from cortex.workflows.definition import parse_definition
from cortex.workflows.operations import PART_MAX_TASKS, WorkflowOperations, submit_payloads
from cortex.workflows.sandbox import ConditionSandbox
from tests.workflow_sim import WorkflowLog

TASKS = PART_MAX_TASKS * 2 + 5
FIRST = "5f0c2a53-8d4e-4b6a-9c1e-2f7d3b9a6e41"


def _definition() -> str:
    tasks = {f"t{i}": {"type": "noop"} for i in range(TASKS)}
    return json.dumps({"name": "wide", "tasks": tasks})


class _AppliesAtOnce:
    """The proposer the operations see: each entry applied to the one state
    machine at once, like a committed entry on a one-node cluster."""

    def __init__(self, log: WorkflowLog) -> None:
        self._log = log
        self.proposed: list[e.Payload] = []

    def propose_one(self, entry: e.Entry, timeout_s: float) -> dict[str, Any]:
        payload = entry.decode_payload()
        self.proposed.append(payload)
        return self._log.one(payload)


def _operations(log: WorkflowLog, proposer: _AppliesAtOnce, reader: Any) -> WorkflowOperations:
    return WorkflowOperations(
        "n1",
        proposer,  # type: ignore[arg-type]
        log.machine,
        reader,
        5.0,
        sandbox=ConditionSandbox(),
    )


class _BlindOnce:
    """A reader that has not yet applied the first try: the key is unknown to
    it the first time it is asked, as on a lagging node."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._asked = False

    def workflow_by_idempotency_key(self, key: str) -> str | None:
        if not self._asked:
            self._asked = True
            return None
        return self._reader.workflow_by_idempotency_key(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def test_a_retry_finishes_the_submission_its_lost_first_try_began(log: WorkflowLog) -> None:
    text = _definition()
    definition = parse_definition(text, "json", ConditionSandbox())
    # The first try: its first entry committed, then the client lost the answer.
    first = submit_payloads(definition, FIRST, "flow-1")
    assert len(first) == 3
    assert log.one(first[0])["ok"]

    proposer = _AppliesAtOnce(log)
    outcome = _operations(log, proposer, _BlindOnce(log.reader)).submit(
        text, "json", idempotency_key="flow-1"
    )
    assert (outcome.workflow_id, outcome.created) == (FIRST, False)
    view = log.reader.get_workflow(FIRST, with_tasks=False)
    assert view is not None and view.state == "running"
    # Its own first entry found the key taken; then the first try's parts 1 and 2.
    assert [type(p).__name__ for p in proposer.proposed] == [
        "WorkflowSubmit", "WorkflowTasks", "WorkflowTasks",
    ]  # fmt: skip
    parts = [p for p in proposer.proposed if isinstance(p, e.WorkflowTasks)]
    assert [p.workflow_id for p in parts] == [FIRST, FIRST]


def test_a_retry_of_a_workflow_already_in_sends_nothing_more(log: WorkflowLog) -> None:
    text = _definition()
    proposer = _AppliesAtOnce(log)
    operations = _operations(log, proposer, log.reader)
    done = operations.submit(text, "json", idempotency_key="flow-2")
    assert done.created and len(proposer.proposed) == 3
    again = operations.submit(text, "json", idempotency_key="flow-2")
    assert (again.workflow_id, again.created) == (done.workflow_id, False)
    assert len(proposer.proposed) == 3
