"""Drives a real StateMachine through workflow lifecycles without a cluster:
payloads go in at increasing Raft indexes (as pysyncobj would apply them),
the leader's decisions come from the real decision logic, and every batch
is kept so it can be replayed into a second database."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.queries import StateReader
from cortex.workflows.decisions import Evaluator, decide
from cortex.workflows.definition import parse_definition
from cortex.workflows.engine import task_nodes
from cortex.workflows.operations import submit_payloads
from cortex.workflows.sandbox import ConditionSandbox

NODES = ("n1", "n2", "n3")


class WorkflowLog:
    def __init__(self, path: Path) -> None:
        self.machine = StateMachine(str(path))
        self.reader = StateReader(str(path))
        self.index = 0
        self.ts = 1_000
        self.batches: list[tuple[int, bytes]] = []
        for node in NODES:
            self.one(e.NodeJoin(node, f"{node}:1", f"{node}:2", executors=["shell", "noop"]))

    def close(self) -> None:
        self.machine.close()

    def apply(self, *payloads: e.Payload, node: str = "n1") -> list[dict[str, Any]]:
        self.index += 1
        self.ts += 10
        data = e.encode_batch([e.Entry.create(p, node=node, ts=self.ts) for p in payloads])
        self.batches.append((self.index, data))
        results = self.machine.apply_batch(self.index, data)
        assert results is not None
        return results

    def one(self, payload: e.Payload, node: str = "n1") -> dict[str, Any]:
        (result,) = self.apply(payload, node=node)
        return result

    # -- workflows -------------------------------------------------------------------

    def submit(
        self, text: str, sandbox: ConditionSandbox | None = None, key: str | None = None
    ) -> tuple[str, dict[str, str]]:
        """Submits a definition; returns the workflow id and task ids by key."""
        payloads = submit_payloads(parse_definition(text, "", sandbox), str(uuid.uuid4()), key)
        ids: dict[str, str] = {}
        for payload in payloads:
            result = self.one(payload)
            assert result["ok"], result
            assert isinstance(payload, e.WorkflowSubmit | e.WorkflowTasks)
            ids.update({t["key"]: t["task_id"] for t in payload.tasks})
        return result["workflow_id"], ids

    def advance(self, workflow_id: str, evaluate: Evaluator | None) -> list[dict[str, Any]]:
        """What the leader's engine does for one workflow: decide, propose."""
        workflow = self.reader.get_workflow(workflow_id)
        assert workflow is not None
        decisions = decide(task_nodes(workflow), workflow.context, evaluate)
        if not decisions:
            return []
        self.one(e.WorkflowAdvance(workflow_id, [d.to_entry() for d in decisions], self.index))
        return [d.to_entry() for d in decisions]

    def settle(self, workflow_id: str, evaluate: Evaluator | None) -> None:
        """Advances until nothing more can be decided."""
        while self.advance(workflow_id, evaluate):
            pass

    def state(self, task_id: str) -> str:
        task = self.reader.get_task(task_id)
        assert task is not None
        return task.state

    def start(self, task_id: str, node: str = "n1") -> int:
        task = self.reader.get_task(task_id)
        assert task is not None and task.state == "queued", task
        attempt = task.attempt + 1
        placed = self.one(e.TaskAssign([{"task_id": task_id, "node": node, "attempt": attempt}]))
        assert placed["placed"] == 1, placed
        assert self.one(e.TaskStarted(task_id, attempt, node), node=node)["ok"]
        return attempt

    def complete(
        self, task_id: str, node: str = "n1", exit_code: int = 0, **result: Any
    ) -> dict[str, Any]:
        attempt = self.start(task_id, node)
        outcome = {"exit_code": exit_code, "stdout": "", "stderr": "", **result}
        if exit_code == 0:
            return self.one(e.TaskComplete(task_id, attempt, node, outcome), node=node)
        return self.one(e.TaskFailed(task_id, attempt, node, f"exit code {exit_code}", outcome),
                        node=node)  # fmt: skip

    def events(self, task_id: str | None = None) -> list[sqlite3.Row]:
        conn = sqlite3.connect(self.machine.path)
        conn.row_factory = sqlite3.Row
        try:
            if task_id is None:
                return conn.execute("SELECT * FROM task_events ORDER BY seq").fetchall()
            return conn.execute(
                "SELECT * FROM task_events WHERE task_id = ? ORDER BY seq", (task_id,)
            ).fetchall()
        finally:
            conn.close()

    def replay_into(self, path: Path) -> StateMachine:
        """A second machine fed the same batches (in the same order)."""
        other = StateMachine(str(path))
        for index, data in self.batches:
            other.apply_batch(index, data)
        return other
