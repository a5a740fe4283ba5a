"""Translation of workflow views into protobuf messages."""

from __future__ import annotations

from cortex.api.convert import state_counts, struct, timestamp
from cortex.proto_enums import enum_value
from cortex.state.workflow_queries import WorkflowTaskView, WorkflowView
from cortex.v1 import cortex_pb2 as pb


def workflow_task_to_proto(task: WorkflowTaskView) -> pb.WorkflowTask:
    message = pb.WorkflowTask(
        key=task.key,
        task_id=task.task_id,
        type=task.type,
        state=enum_value(pb.TaskState, task.state),
        attempt=task.attempt,
        node_id=task.node or "",
        depends_on=task.depends_on,
        condition=task.condition or "",
        skip_reason=task.skip_reason or "",
        start_time=timestamp(task.started_at),
        finish_time=timestamp(task.finished_at),
    )
    # A skipped task, or one that never ran, has no result: no exit code.
    if task.result is not None:
        message.exit_code = int(task.result.get("exit_code") or 0)
    return message


def workflow_to_proto(workflow: WorkflowView) -> pb.Workflow:
    """The workflow with its tasks (none in listings, where `tasks` is empty)."""
    return pb.Workflow(
        id=workflow.id,
        name=workflow.name,
        state=enum_value(pb.WorkflowState, workflow.state),
        context=struct(workflow.context),
        tasks=[workflow_task_to_proto(t) for t in workflow.tasks],
        create_time=timestamp(workflow.created_at),
        finish_time=timestamp(workflow.completed_at),
        error=workflow.error or "",
        task_counts=state_counts(workflow.task_counts),
        submit_index=workflow.submit_index,
        traceparent=workflow.traceparent or "",
    )
