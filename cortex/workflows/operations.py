"""Workflow operations every interface offers: submit (validate, then propose
WORKFLOW_SUBMIT), status, list, cancel."""

from __future__ import annotations

import heapq
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from cortex.errors import (
    AlreadyExists,
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
    UnknownId,
)
from cortex.id_prefixes import resolve_prefix
from cortex.raft.proposer import Proposer
from cortex.refusals import refusal_error
from cortex.requests import check_id, check_idempotency_key, check_states
from cortex.spec import DEFAULT_MAX_SPEC_BYTES, TaskTypes
from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.paging import CreatedWindow, PageKey
from cortex.state.queries import StateReader
from cortex.state.traceparent import TraceParent
from cortex.state.workflow_queries import WorkflowPage, WorkflowView
from cortex.state.workflow_rules import WORKFLOW_STATES, WORKFLOW_TERMINAL_STATES
from cortex.tracing import NO_TRACING, Span, Tracer
from cortex.workflows.definition import (
    WorkflowDefinition,
    definition_digest,
    parse_definition,
)
from cortex.workflows.sandbox import ConditionSandbox

MAX_REASON_CHARS = 2000


@dataclass(frozen=True)
class WorkflowSubmitOutcome:
    workflow_id: str
    created: bool
    # At or past the Raft index its last part committed at.
    raft_index: int


@dataclass(frozen=True)
class WorkflowWrite:
    """A workflow as a write left it, and the Raft index the write committed at."""

    workflow: WorkflowView
    raft_index: int


# A workflow travels in parts of at most this many tasks and bytes, so no
# single Raft entry takes long to replicate or apply.
PART_MAX_TASKS = 100
PART_MAX_BYTES = 256 * 1024


def _dependency_order(definition: WorkflowDefinition) -> list[int]:
    """Positions of the tasks in an order where each comes after everything
    it depends on, keeping definition order wherever that allows."""
    position = {task.key: i for i, task in enumerate(definition.tasks)}
    waiting = {i: len(task.depends_on) for i, task in enumerate(definition.tasks)}
    dependents: dict[int, list[int]] = {}
    for i, task in enumerate(definition.tasks):
        for dependency in task.depends_on:
            dependents.setdefault(position[dependency], []).append(i)
    ready = [i for i, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for dependent in dependents.get(i, ()):
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, dependent)
    return order


def submit_payloads(
    definition: WorkflowDefinition,
    workflow_id: str,
    idempotency_key: str | None = None,
    digest: str | None = None,
    traceparent: str | None = None,
    run_traceparent: str | None = None,
) -> list[e.Payload]:
    """The entries that submit a validated definition: one WORKFLOW_SUBMIT,
    then WORKFLOW_TASKS parts for a large one. Task ids derive from the
    workflow id and the task key, so a retry builds exactly the same parts.
    `digest` is the definition's (`definition_digest`), if known already;
    the trace contexts are the submission's and the run's (WorkflowSubmit)."""
    namespace = uuid.UUID(workflow_id)
    parts: list[list[dict[str, Any]]] = [[]]
    size = 0
    for position in _dependency_order(definition):
        task = definition.tasks[position]
        item = {
            "key": task.key,
            "task_id": str(uuid.uuid5(namespace, task.key)),
            "spec": task.spec.model_dump(mode="json"),
            "depends_on": list(task.depends_on),
            "condition": task.condition,
            "pos": position,
        }
        item_size = len(json.dumps(item))
        if parts[-1] and (len(parts[-1]) >= PART_MAX_TASKS or size + item_size > PART_MAX_BYTES):
            parts.append([])
            size = 0
        parts[-1].append(item)
        size += item_size
    head: list[e.Payload] = [
        e.WorkflowSubmit(
            workflow_id=workflow_id,
            name=definition.name,
            tasks=parts[0],
            context=dict(definition.context),
            idempotency_key=idempotency_key or None,
            total_tasks=len(definition.tasks) if len(parts) > 1 else 0,
            definition_digest=digest or definition_digest(definition),
            traceparent=traceparent,
            run_traceparent=run_traceparent,
        )
    ]
    return head + [e.WorkflowTasks(workflow_id, number, part) for number, part in
                   enumerate(parts[1:], 1)]  # fmt: skip


class WorkflowOperations:
    def __init__(
        self,
        node_id: str,
        proposer: Proposer,
        machine: StateMachine,
        reader: StateReader,
        propose_timeout_s: float,
        max_spec_bytes: int = DEFAULT_MAX_SPEC_BYTES,
        sandbox: ConditionSandbox | None = None,
        tracer: Tracer = NO_TRACING,
        task_types: TaskTypes | None = None,
    ) -> None:
        self.node_id = node_id
        self._task_types = task_types
        self.sandbox = sandbox or ConditionSandbox()
        self._tracer = tracer
        self._proposer = proposer
        self._machine = machine
        self._reader = reader
        self._timeout = propose_timeout_s
        self._max_spec_bytes = max_spec_bytes

    def submit(
        self,
        text: str,
        fmt: str = "",
        idempotency_key: str | None = None,
        traceparent: str | None = None,
    ) -> WorkflowSubmitOutcome:
        """Validates everything first (nothing is written on any error), then
        proposes the DAG: one entry, or for a large one a first entry and its
        parts, one after the other. The workflow runs once the last part is
        in; a submission given up half-way is cancelled by the leader, and one
        retried with the same idempotency key carries on where it stopped.
        The workflow keeps the submission's trace context, in the trace
        `traceparent` (a client's W3C header; ignored when malformed) or a
        new one, and its tasks a child of it: its run's."""
        check_idempotency_key(idempotency_key)
        definition = parse_definition(
            text, fmt, self.sandbox, self._max_spec_bytes, self._task_types
        )
        digest = definition_digest(definition)
        workflow_id = e.new_id()
        span = self._tracer.submit_workflow(
            TraceParent.parse(traceparent), workflow_id, definition.name, len(definition.tasks)
        )
        try:
            outcome = self._submit(definition, digest, workflow_id, idempotency_key, span)
        except CortexError as err:
            span.end(error=str(err))
            raise
        span.end()
        return outcome

    def _submit(
        self,
        definition: WorkflowDefinition,
        digest: str,
        workflow_id: str,
        idempotency_key: str | None,
        span: Span,
    ) -> WorkflowSubmitOutcome:
        resume_from, created = 0, True
        run = span.context.child() if span.context is not None else None
        if idempotency_key:
            known = self._reader.workflow_by_idempotency_key(idempotency_key)
            if known is not None:
                resume = self._resumable(known, idempotency_key, definition, digest)
                if resume is None:
                    return WorkflowSubmitOutcome(known, False, self._machine.applied_index)
                workflow_id, resume_from, created = known, resume, False
        # Twice at most: the first entry may find the key already taken by a
        # submission this node had not seen (an earlier try whose answer was
        # lost, or another client's); its remaining parts are sent then.
        while True:
            payloads = submit_payloads(definition, workflow_id, idempotency_key, digest,
                                       span.traceparent, str(run) if run else None)  # fmt: skip
            for number, payload in enumerate(payloads[resume_from:], resume_from):
                result = self._propose_part(payload)
                if not result.get("ok"):
                    doing = "workflow rejected" if number == 0 else (
                        f"part {number} of workflow {workflow_id} rejected"
                    )  # fmt: skip
                    raise refusal_error(result, doing)
                if number == 0 and result["workflow_id"] != workflow_id:
                    break
            else:
                return WorkflowSubmitOutcome(workflow_id, created, self._machine.applied_index)
            known = result["workflow_id"]
            resume = self._resumable(known, idempotency_key or "", definition, digest)
            if resume is None:
                return WorkflowSubmitOutcome(known, False, self._machine.applied_index)
            workflow_id, resume_from, created = known, resume, False

    def _resumable(
        self, known: str, idempotency_key: str, definition: WorkflowDefinition, digest: str
    ) -> int | None:
        """The part to carry on from when the workflow `known` (named by the
        key) is still being submitted; None when it is in already. Raises
        AlreadyExists when it was submitted with another definition (apply
        refuses such a submission too, should two race)."""
        stored = self._reader.workflow_digest(known)
        if stored and stored != digest:
            raise AlreadyExists(
                f"idempotency key {idempotency_key!r} is already used by workflow {known},"
                " submitted with a different definition"
            )
        view = self._reader.get_workflow(known, with_tasks=False)
        if view is None or view.state != "submitting":
            return None
        if view.total_tasks != len(definition.tasks):
            raise FailedPrecondition(
                f"idempotency key {idempotency_key} names workflow {known}, which is"
                f" being submitted with {view.total_tasks} tasks, not"
                f" {len(definition.tasks)}"
            )
        return view.parts

    def _propose_part(self, payload: e.Payload) -> dict[str, Any]:
        """Proposes one entry; retries it while the cluster is unavailable,
        which is safe since applying a part again changes nothing."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return self._proposer.propose_one(
                    e.Entry.create(payload, self.node_id),
                    max(deadline - time.monotonic(), 0.5),
                )
            except Unavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def get(self, workflow_id: str) -> WorkflowView:
        """The workflow with this id, or with the one id this unique prefix starts."""
        check_id(workflow_id, "workflow_id")
        workflow = self._reader.get_workflow(workflow_id)
        if workflow is None:
            full_id = resolve_prefix("workflow", workflow_id, self._reader.workflow_ids_with_prefix)
            workflow = self._reader.get_workflow(full_id)
        if workflow is None:
            raise UnknownId(f"no workflow with id {workflow_id}")
        return workflow

    def resolve_id(self, workflow_id: str) -> str:
        """The full id of the workflow an id or unique prefix names."""
        check_id(workflow_id, "workflow_id")
        if self._reader.has_workflow(workflow_id):
            return workflow_id
        return resolve_prefix("workflow", workflow_id, self._reader.workflow_ids_with_prefix)

    def filter_id(self, workflow_id: str) -> str | None:
        """A listing's workflow filter as a full id: None for no filter; an
        id no workflow has (any more) stays as given, matching nothing; an
        ambiguous prefix is InvalidArgument."""
        if not workflow_id:
            return None
        try:
            return self.resolve_id(workflow_id)
        except NotFound:
            return workflow_id

    def list_workflows(
        self,
        states: list[str] | None = None,
        limit: int = 100,
        after: PageKey | None = None,
        newest_first: bool = True,
        created: CreatedWindow | None = None,
    ) -> WorkflowPage:
        check_states(states, WORKFLOW_STATES, "workflow")
        return self._reader.list_workflows(states, limit, after, newest_first, created)

    def cancel(self, workflow_id: str, reason: str = "") -> WorkflowWrite:
        workflow = self.get(workflow_id)
        workflow_id = workflow.id
        if workflow.state in WORKFLOW_TERMINAL_STATES:
            raise FailedPrecondition(f"workflow {workflow_id} is already {workflow.state}")
        if len(reason) > MAX_REASON_CHARS:
            raise InvalidArgument(f"reason is longer than {MAX_REASON_CHARS} characters")
        payload = e.WorkflowCancel(workflow_id, reason or "cancelled by request")
        entry = e.Entry.create(payload, self.node_id)
        result = self._proposer.propose_one(entry, self._timeout)
        # One entry cancels a bounded number of tasks: carry on with the rest
        # (the leader does too, should this node stop half-way).
        deadline = time.monotonic() + self._timeout
        more, last = result, entry
        while more.get("ok") and more.get("remaining") and time.monotonic() < deadline:
            last = e.Entry.create(payload, self.node_id)
            more = self._proposer.propose_one(last, self._timeout)
        current = self.get(workflow_id)
        if not result.get("ok") and current.state != "cancelled":
            raise refusal_error(result, f"workflow {workflow_id} could not be cancelled")
        index = self._reader.entry_index(last.id) or self._machine.applied_index
        return WorkflowWrite(current, index)

    def close(self) -> None:
        self.sandbox.close()
