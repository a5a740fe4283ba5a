"""What retrying a dead-lettered workflow task means for its workflow.

A dead letter retried by an operator is queued again with a fresh retry
budget (`TASK_RETRY` in `cortex.state.transitions`). For a workflow task:

- while its workflow runs and none of the task's dependents has been decided
  yet, the task rejoins the workflow: the workflow carries on as if the task
  had not run out of retries, and may still complete;
- once its workflow has failed, the task runs on its own: the workflow stays
  failed (state, error, context and its other tasks unchanged) whatever the
  task does now;
- while its workflow runs but a dependent was already decided because of the
  dead letter, the retry is refused: the workflow is bound to fail, and the
  task may be retried on its own once it has;
- when its workflow was cancelled, the retry is refused: nothing of a
  cancelled workflow runs again."""

from __future__ import annotations

import sqlite3
from typing import Any

from cortex.state.reasons import ILLEGAL_TRANSITION, UNKNOWN_WORKFLOW, Rejected


def workflow_retry_scope(cur: sqlite3.Cursor, task: sqlite3.Row) -> dict[str, Any]:
    """For a dead-lettered workflow task about to be retried: its workflow,
    the workflow's state and whether the task rejoins it (else it runs on its
    own). Raises Rejected when the retry is refused."""
    workflow_id, key = task["workflow_id"], task["workflow_key"]
    row = cur.execute("SELECT state FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
    if row is None:
        raise Rejected(UNKNOWN_WORKFLOW, f"workflow {workflow_id} does not exist")
    state = row["state"]
    scope = {"workflow_id": workflow_id, "workflow_state": state}
    if state == "failed":
        return {**scope, "rejoined": False}
    if state != "running":
        raise Rejected(
            ILLEGAL_TRANSITION,
            f"task {key} belongs to workflow {workflow_id}, which is {state}: its tasks do not"
            " run again",
        )
    decided = cur.execute(
        "SELECT t.workflow_key AS key, t.state AS state FROM task_dependencies d"
        " CROSS JOIN tasks t ON t.workflow_id = d.workflow_id AND t.workflow_key = d.task_key"
        " WHERE d.workflow_id = ? AND d.depends_on_key = ? AND t.state != 'pending'"
        " ORDER BY t.rowid LIMIT 1",
        (workflow_id, key),
    ).fetchone()
    if decided is not None:
        raise Rejected(
            ILLEGAL_TRANSITION,
            f"task {key} cannot rejoin workflow {workflow_id}: its dependent {decided['key']} was"
            f" decided ({decided['state']}) while it was dead-lettered, so the workflow will"
            " fail; retry it once the workflow has ended, and it runs on its own",
        )
    return {**scope, "rejoined": True}
