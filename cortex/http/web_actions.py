"""The web API's changes (`POST /api/v1/...`): cancel a task; cancel, or
retry from the dead-letter queue, every task a listing's filters match; drain,
cordon or uncordon a node. Each goes through the same operations as the gRPC
API, proposed through Raft and answered once committed.

A bulk change acts on the tasks the filters match when it runs, at most the
number the user confirmed (`expected`): when more match by then, nothing is
changed and the answer (409) says how many, so the page can ask again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cortex.errors import FailedPrecondition, InvalidArgument, NotFound
from cortex.http.api_requests import (
    BadParameter,
    BulkRequest,
    DrainRequest,
    TaskListRequest,
    json_body,
)
from cortex.membership.administration import NodeAdministration
from cortex.membership.cluster_status import NodeStatusView
from cortex.state.paging import PageKey
from cortex.state.queries import TaskView
from cortex.state.task_match import TaskMatch
from cortex.task_operations import BulkOutcome, TaskOperations
from cortex.workflows.operations import WorkflowOperations

# Matching tasks are collected in pages of this many.
_COLLECT_PAGE = 1000


class MoreThanConfirmed(FailedPrecondition):
    """A bulk change's filters match more tasks than the user confirmed."""

    def __init__(self, matched: int, expected: int) -> None:
        super().__init__(
            f"{matched} tasks match now, more than the {expected} confirmed; confirm again"
        )
        self.matched = matched


@dataclass(frozen=True)
class BulkResult:
    matched: int
    outcomes: list[BulkOutcome]

    def json(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "acted": sum(1 for o in self.outcomes if o.acted),
            "unchanged": sum(1 for o in self.outcomes if not o.acted and not o.error),
            "errors": [{"task_id": o.task_id, "error": o.error} for o in self.outcomes if o.error],
        }


class WebActions:
    def __init__(
        self,
        tasks: TaskOperations,
        workflows: WorkflowOperations,
        nodes: NodeAdministration,
        node_json: Callable[[str], dict[str, Any]],
        task_json: Callable[[TaskView], dict[str, Any]],
    ) -> None:
        """`node_json(node_id)` and `task_json(task)`: how the API shows them."""
        self._tasks = tasks
        self._workflows = workflows
        self._nodes = nodes
        self._node_json = node_json
        self._task_json = task_json

    def route(self, parts: list[str], query: str, body: bytes) -> dict[str, Any]:
        match parts:
            case ["tasks", "cancel" | "retry" as change]:
                return self.bulk(change, BulkRequest.parse(query, body)).json()
            case ["tasks", task_id, "cancel"]:
                _no_query(query)
                reason = json_body(body, ("reason",)).get("reason") or ""
                if not isinstance(reason, str) or len(reason) > 512:
                    raise BadParameter("reason", "must be text of at most 512 characters")
                return {"task": self._task_json(self._tasks.cancel(task_id, reason).task)}
            case ["nodes", node_id, "drain"]:
                _no_query(query)
                deadline_ms = DrainRequest.parse(body).deadline_s * 1000
                return self._node(self._nodes.drain(node_id, deadline_ms))
            case ["nodes", node_id, "cordon"]:
                _no_query(query)
                json_body(body, ())
                return self._node(self._nodes.cordon(node_id))
            case ["nodes", node_id, "uncordon"]:
                _no_query(query)
                json_body(body, ())
                return self._node(self._nodes.uncordon(node_id))
        raise NotFound(
            "no change at this path; there are POST tasks/ID/cancel, tasks/cancel, tasks/retry"
            " and nodes/ID/drain|cordon|uncordon"
        )

    def _node(self, view: NodeStatusView) -> dict[str, Any]:
        return {"node": self._node_json(view.node.id)}

    def bulk(self, change: str, request: BulkRequest) -> BulkResult:
        task_ids = self._matching(request.filters, request.expected)
        if change == "cancel":
            outcomes = self._tasks.cancel_many(task_ids, "cancelled from the web UI")
        else:
            outcomes = self._tasks.retry_dead_letter_many(task_ids)
        return BulkResult(len(task_ids), outcomes)

    def _matching(self, filters: TaskListRequest, expected: int) -> list[str]:
        """Every task the filters match, newest first; MoreThanConfirmed when
        they are more than `expected`."""
        workflow_id = workflow_filter(self._workflows, filters.workflow)
        match = TaskMatch(tuple((label.key, label.value) for label in filters.labels), filters.text)
        found: list[str] = []
        after: PageKey | None = None
        while True:
            page = self._tasks.list_tasks(
                list(filters.states) or None, None, workflow_id, filters.node or None,
                _COLLECT_PAGE, after, True, match=match,
            )  # fmt: skip
            if page.total > expected:
                raise MoreThanConfirmed(page.total, expected)
            found.extend(task.id for task in page.tasks)
            if len(found) > expected:
                raise MoreThanConfirmed(len(found), expected)
            if page.next_key is None or not page.tasks:
                return found
            after = page.next_key


def changes_only(parts: list[str]) -> bool:
    """Whether the path is one of a change (POST only)."""
    match parts:
        case ["tasks", "cancel" | "retry"] | ["tasks", _, "cancel"]:
            return True
        case ["nodes", _, "drain" | "cordon" | "uncordon"]:
            return True
    return False


def _no_query(query: str) -> None:
    if query:
        raise BadParameter("query", "this change takes no query parameters")


def workflow_filter(workflows: WorkflowOperations, workflow: str) -> str | None:
    """`WorkflowOperations.filter_id`, an ambiguous prefix named as the
    `workflow` parameter."""
    try:
        return workflows.filter_id(workflow)
    except InvalidArgument as err:
        raise BadParameter("workflow", str(err)) from None
