"""Translation of workflow views into protobuf messages."""

from __future__ import annotations

import json

from cortex.state.workflow_queries import WorkflowTaskView, WorkflowView
from cortex.v1 import cortex_pb2 as pb


def workflow_task_to_proto(task: WorkflowTaskView) -> pb.WorkflowTask:
    message = pb.WorkflowTask(
        key=task.key,
        task_id=task.task_id,
        type=task.type,
        state=task.state,
        attempt=task.attempt,
        node=task.node or "",
        depends_on=task.depends_on,
        condition=task.condition or "",
        skip_reason=task.skip_reason or "",
        started_at_ms=task.started_at or 0,
        finished_at_ms=task.finished_at or 0,
    )
    if task.result is not None:
        message.has_result = True
        message.exit_code = int(task.result.get("exit_code") or 0)
    return message


def workflow_to_proto(workflow: WorkflowView) -> pb.Workflow:
    """The workflow with its tasks (none in listings, where `tasks` is empty)."""
    return pb.Workflow(
        id=workflow.id,
        name=workflow.name,
        state=workflow.state,
        context_json=json.dumps(workflow.context, sort_keys=True),
        tasks=[workflow_task_to_proto(t) for t in workflow.tasks],
        created_at_ms=workflow.created_at,
        completed_at_ms=workflow.completed_at or 0,
        error=workflow.error or "",
        task_counts=workflow.task_counts,
    )
