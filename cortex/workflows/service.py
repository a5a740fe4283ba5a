"""Workflow operations every interface offers: submit (validate, then propose
WORKFLOW_SUBMIT), status, list, cancel."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from cortex.errors import FailedPrecondition, InvalidArgument, NotFound
from cortex.raft.proposer import Proposer
from cortex.refusals import refusal_error
from cortex.requests import check_id, check_idempotency_key, check_states, parse_page
from cortex.spec import DEFAULT_MAX_SPEC_BYTES
from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.queries import StateReader
from cortex.state.workflow_queries import WorkflowPage, WorkflowView
from cortex.state.workflow_rules import WORKFLOW_STATES, WORKFLOW_TERMINAL_STATES
from cortex.workflows.definition import WorkflowDefinition, parse_definition
from cortex.workflows.sandbox import ConditionSandbox

MAX_REASON_CHARS = 2000


@dataclass(frozen=True)
class WorkflowSubmitOutcome:
    workflow_id: str
    created: bool
    raft_index: int


def submit_payload(
    definition: WorkflowDefinition, idempotency_key: str | None = None
) -> e.WorkflowSubmit:
    """The WORKFLOW_SUBMIT payload for a validated definition, with fresh ids."""
    return e.WorkflowSubmit(
        workflow_id=str(uuid.uuid4()),
        name=definition.name,
        tasks=[
            {
                "key": task.key,
                "task_id": str(uuid.uuid4()),
                "spec": task.spec.model_dump(mode="json"),
                "depends_on": list(task.depends_on),
                "condition": task.condition,
            }
            for task in definition.tasks
        ],
        context=dict(definition.context),
        idempotency_key=idempotency_key or None,
    )


class WorkflowService:
    def __init__(
        self,
        node_id: str,
        proposer: Proposer,
        machine: StateMachine,
        reader: StateReader,
        propose_timeout_s: float,
        max_spec_bytes: int = DEFAULT_MAX_SPEC_BYTES,
        sandbox: ConditionSandbox | None = None,
    ) -> None:
        self.node_id = node_id
        self.sandbox = sandbox or ConditionSandbox()
        self._proposer = proposer
        self._machine = machine
        self._reader = reader
        self._timeout = propose_timeout_s
        self._max_spec_bytes = max_spec_bytes

    def submit(
        self, text: str, fmt: str = "", idempotency_key: str | None = None
    ) -> WorkflowSubmitOutcome:
        """Validates everything first (nothing is written on any error), then
        proposes the whole DAG as one entry."""
        check_idempotency_key(idempotency_key)
        definition = parse_definition(text, fmt, self.sandbox, self._max_spec_bytes)
        if idempotency_key:
            known = self._reader.workflow_by_idempotency_key(idempotency_key)
            if known is not None:
                return WorkflowSubmitOutcome(known, False, self._machine.applied_index)
        entry = e.Entry.create(submit_payload(definition, idempotency_key), self.node_id)
        result = self._proposer.propose_one(entry, self._timeout)
        if not result.get("ok"):
            raise refusal_error(result, "workflow rejected")
        return WorkflowSubmitOutcome(
            result["workflow_id"], bool(result["created"]), self._machine.applied_index
        )

    def get(self, workflow_id: str) -> WorkflowView:
        check_id(workflow_id, "workflow_id")
        workflow = self._reader.get_workflow(workflow_id)
        if workflow is None:
            raise NotFound(f"no workflow with id {workflow_id}")
        return workflow

    def list_workflows(
        self, states: list[str] | None = None, page_size: int = 100, page_token: str = ""
    ) -> WorkflowPage:
        check_states(states, WORKFLOW_STATES, "workflow")
        limit, offset = parse_page(page_size, page_token)
        return self._reader.list_workflows(states, limit, offset)

    def cancel(self, workflow_id: str, reason: str = "") -> WorkflowView:
        workflow = self.get(workflow_id)
        if workflow.state in WORKFLOW_TERMINAL_STATES:
            raise FailedPrecondition(f"workflow {workflow_id} is already {workflow.state}")
        if len(reason) > MAX_REASON_CHARS:
            raise InvalidArgument(f"reason is longer than {MAX_REASON_CHARS} characters")
        entry = e.Entry.create(
            e.WorkflowCancel(workflow_id, reason or "cancelled by request"), self.node_id
        )
        result = self._proposer.propose_one(entry, self._timeout)
        current = self.get(workflow_id)
        if not result.get("ok") and current.state != "cancelled":
            raise refusal_error(result, f"workflow {workflow_id} could not be cancelled")
        return current

    def close(self) -> None:
        self.sandbox.close()
