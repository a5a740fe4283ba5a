"""The spans Cortex makes, as the rest of the node asks for them. `Tracer`
itself is tracing switched off: it makes no span, and hands back the trace
context a submission or an attempt passes on (the client's, or a fresh
one), so the only cost of a submit is one traceparent parsed or made.
`cortex.tracing.otel` is the tracer that records spans.

Spans follow OpenTelemetry's messaging conventions where they apply: a
submission is a PRODUCER span, each attempt a CONSUMER span that is a child
of (and linked to) its task's stored context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cortex.state.traceparent import TraceParent

AttributeValue = str | bool | int | float | Sequence[str]
Attributes = Mapping[str, AttributeValue]

# OpenTelemetry semantic conventions (messaging, process).
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
MESSAGING_OPERATION_NAME = "messaging.operation.name"
MESSAGING_DESTINATION = "messaging.destination.name"
MESSAGING_MESSAGE_ID = "messaging.message.id"
MESSAGING_BATCH_COUNT = "messaging.batch.message_count"
PROCESS_EXIT_CODE = "process.exit.code"
# Cortex's own.
NODE_ID = "cortex.node.id"
TASK_ID = "cortex.task.id"
TASK_TYPE = "cortex.task.type"
TASK_ATTEMPT = "cortex.task.attempt"
TASK_CREATED = "cortex.task.created"
EXECUTOR_TYPE = "cortex.executor.type"
WORKFLOW_ID = "cortex.workflow.id"
WORKFLOW_NAME = "cortex.workflow.name"
WORKFLOW_STATE = "cortex.workflow.state"
WORKFLOW_TASK_KEY = "cortex.workflow.task_key"
CONDITION_OUTCOME = "cortex.condition.outcome"

MESSAGING_SYSTEM_NAME = "cortex"
# Where submitted tasks wait to be run: the destination of every message.
TASK_QUEUE = "tasks"

SUBMIT_TASK = "submit task"
SUBMIT_WORKFLOW = "submit workflow"
RUN_TASK = "run task"
RUN_WORKFLOW = "run workflow"
EVALUATE_CONDITION = "evaluate condition"


class Span:
    """An open span; with tracing off, only the context it passes on (None
    for an attempt of a task that has none)."""

    def __init__(self, context: TraceParent | None) -> None:
        self.context = context

    @property
    def traceparent(self) -> str | None:
        return str(self.context) if self.context is not None else None

    def end(self, error: str | None = None, attributes: Attributes | None = None) -> None:
        """Ends the span with `attributes` added, failed with `error` as its
        status when given."""


class Tracer:
    """Tracing off: no span is made or sent."""

    enabled = False

    def submit_task(self, incoming: TraceParent | None, task_id: str, task_type: str) -> Span:
        """A PRODUCER span for submitting a task, a child of the client's
        context; its context is what the task keeps. Off: the client's
        context, or a new trace's."""
        return Span(incoming or TraceParent.new())

    def submit_workflow(
        self, incoming: TraceParent | None, workflow_id: str, name: str, tasks: int
    ) -> Span:
        """`submit_task` for a workflow of `tasks` tasks."""
        return Span(incoming or TraceParent.new())

    def attempt(self, stored: str | None, task_id: str, attempt: int, executor: str) -> Span:
        """A CONSUMER span for one attempt, a child of and linked to the
        task's stored context. Off: that context."""
        return Span(TraceParent.parse(stored))

    def record(
        self,
        name: str,
        parent: str | None,
        start_ns: int,
        end_ns: int,
        attributes: Attributes,
        error: str | None = None,
        context: str | None = None,
    ) -> None:
        """A finished INTERNAL span, after the fact: from `start_ns` to
        `end_ns` (ns since the epoch), a child of `parent`; with the span id
        of `context` when given (a span others already hang off)."""

    def shutdown(self) -> None:
        """Sends what is buffered and stops."""


NO_TRACING = Tracer()
