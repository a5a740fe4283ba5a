"""DAG workflows: definitions and their validation, the JavaScript condition
sandbox, the leader's pure decision logic and engine loop, and the workflow
operations every interface offers."""

from cortex.workflows.condition_input import condition_input
from cortex.workflows.decisions import ConditionRequest, Decision, TaskNode, decide
from cortex.workflows.definition import (
    TaskDefinition,
    WorkflowDefinition,
    load_document,
    parse_definition,
    validate_definition,
)
from cortex.workflows.engine import WorkflowEngine
from cortex.workflows.operations import WorkflowOperations, WorkflowSubmitOutcome, submit_payloads
from cortex.workflows.sandbox import ConditionOutcome, ConditionSandbox, SandboxUnavailable

__all__ = [
    "ConditionOutcome",
    "ConditionRequest",
    "ConditionSandbox",
    "Decision",
    "SandboxUnavailable",
    "TaskDefinition",
    "TaskNode",
    "WorkflowDefinition",
    "WorkflowEngine",
    "WorkflowOperations",
    "WorkflowSubmitOutcome",
    "condition_input",
    "decide",
    "load_document",
    "parse_definition",
    "submit_payloads",
    "validate_definition",
]
