"""The JSON API under `/api/v1/` that the web UI reads: tasks, their events
and output, nodes and workflows. Every read is of this node's own state
(stale: it may lag the leader by what it has not applied yet, and says how
far it got); output comes through the same stream as StreamTaskOutput, so a
task that ran elsewhere is relayed from its node. The shapes are the CLI's
`--json` ones (`cortex.api.views`), with a few fields the pages need.
Errors become HTTP statuses in `cortex.http.json_answers`."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from cortex.api.convert import event_to_proto, task_to_proto
from cortex.api.node_convert import node_to_proto
from cortex.api.page_tokens import PageTokens
from cortex.api.views import node_json, task_json, workflow_json
from cortex.api.workflow_convert import workflow_to_proto
from cortex.errors import InvalidArgument, NotFound
from cortex.http.api_requests import (
    BadParameter,
    OutputRequest,
    QueryParams,
    TaskListRequest,
    WorkflowListRequest,
    path_id,
)
from cortex.http.cluster_view import AskNodeState, cluster_json
from cortex.http.json_answers import ApiAnswer, error_answer
from cortex.http.node_load import NodeLoad, node_loads
from cortex.http.output_pages import OutputPage, read_output_page
from cortex.http.web_actions import MoreThanConfirmed, WebActions, changes_only, workflow_filter
from cortex.membership.administration import NodeAdministration
from cortex.membership.cluster_status import ClusterStatus
from cortex.output import StreamingService
from cortex.output.attempts import describe_attempt
from cortex.state.paging import PageKey
from cortex.state.queries import EventView, StateReader, TaskPage, TaskView
from cortex.state.task_match import TaskMatch
from cortex.task_operations import TaskOperations
from cortex.workflows.operations import WorkflowOperations

API_PREFIX = "/api/v1/"


class WebApi:
    def __init__(
        self,
        node_id: str,
        tasks: TaskOperations,
        workflows: WorkflowOperations,
        cluster: ClusterStatus,
        reader: StateReader,
        streaming: StreamingService,
        applied_index: Callable[[], int],
        nodes: NodeAdministration,
        ask_node_state: AskNodeState,
    ) -> None:
        """`ask_node_state(peer_address, timeout_s)`: another member's Raft
        view and digest (`cortex.api.peer_client.PeerClient.node_state`)."""
        self._node_id = node_id
        self._tasks = tasks
        self._workflows = workflows
        self._cluster = cluster
        self._reader = reader
        self._streaming = streaming
        self._applied_index = applied_index
        self._ask_node_state = ask_node_state
        self._actions = WebActions(tasks, workflows, nodes, self._one_node_json, self._task_json)

    def answer(self, path: str, query: str) -> ApiAnswer:
        """The answer to `GET path?query` (a path under `API_PREFIX`)."""
        try:
            if changes_only(_parts(path)):
                return _not_allowed("POST")
            return ApiAnswer(HTTPStatus.OK, {**self._route(path, query), "read": self._read()})
        except Exception as err:
            return error_answer(err, path)

    def act(self, path: str, query: str, body: bytes) -> ApiAnswer:
        """The answer to `POST path?query` with `body` (a path under `API_PREFIX`)."""
        try:
            parts = _parts(path)
            if _reads_only(parts):
                return _not_allowed("GET, HEAD")
            return ApiAnswer(
                HTTPStatus.OK, {**self._actions.route(parts, query, body), "read": self._read()}
            )
        except MoreThanConfirmed as err:
            return ApiAnswer(HTTPStatus.CONFLICT, {"error": str(err), "matched": err.matched})
        except Exception as err:
            return error_answer(err, path, "POST")

    def _read(self) -> dict[str, Any]:
        return {"node_id": self._node_id, "applied_index": self._applied_index(),
                "consistency": "stale"}  # fmt: skip

    def _route(self, path: str, query: str) -> dict[str, Any]:
        match _parts(path):
            case ["tasks"]:
                return self.list_tasks(TaskListRequest.from_query(query))
            case ["tasks", task_id]:
                _no_parameters(query)
                return self.get_task(path_id(task_id, "task id"))
            case ["tasks", task_id, "output"]:
                return self.task_output(path_id(task_id, "task id"),
                                        OutputRequest.from_query(query))  # fmt: skip
            case ["nodes"]:
                _no_parameters(query)
                return self.list_nodes()
            case ["workflows"]:
                return self.list_workflows(WorkflowListRequest.from_query(query))
            case ["workflows", workflow_id]:
                _no_parameters(query)
                return self.get_workflow(path_id(workflow_id, "workflow id"))
            case ["cluster"]:
                _no_parameters(query)
                return cluster_json(self._cluster, self._reader, self._ask_node_state)
        raise NotFound(
            f"no API at {path}; there are {API_PREFIX}tasks, tasks/ID, tasks/ID/output,"
            " nodes, workflows, workflows/ID and cluster"
        )

    # -- tasks --------------------------------------------------------------------

    def list_tasks(self, request: TaskListRequest) -> dict[str, Any]:
        workflow_id = workflow_filter(self._workflows, request.workflow)
        filters = {
            "states": sorted(request.states),
            "workflow_id": request.workflow,
            "node_id": request.node,
            "labels": [[label.key, label.value] for label in request.labels],
            "q": request.text,
        }
        tokens = PageTokens("web_tasks", filters, newest_first=True)
        after = _page_start(tokens, request.page_token)
        page = self._task_page(request, workflow_id, after)
        return {
            "tasks": [self._task_json(task) for task in page.tasks],
            "next_page_token": tokens.issue(page.next_key),
            "total": page.total,
        }

    def _task_page(
        self, request: TaskListRequest, workflow_id: str | None, after: PageKey | None
    ) -> TaskPage:
        match = TaskMatch(tuple((label.key, label.value) for label in request.labels), request.text)
        return self._tasks.list_tasks(
            list(request.states) or None, None, workflow_id, request.node or None,
            request.page_size, after, True, match=match,
        )  # fmt: skip

    def get_task(self, task_id: str) -> dict[str, Any]:
        task = self._tasks.get(task_id)
        events = self._tasks.events(task.id)
        data = self._task_json(task, self._tasks.pending_reasons(task), events)
        data["spec"] = task.spec
        attempts = (describe_attempt(task, events, n) for n in range(1, task.attempt + 1))
        data["attempts"] = [
            {
                "attempt": a.number,
                "node": a.node,
                "state": a.state,
                "active": a.active,
                "exit_code": a.exit_code,
                "error": a.error,
            }
            for a in attempts
            if a is not None
        ]
        return {"task": data}

    def _task_json(
        self,
        task: TaskView,
        reasons: list[str] | None = None,
        events: list[EventView] | None = None,
    ) -> dict[str, Any]:
        data = task_json(task_to_proto(task, reasons), [event_to_proto(e) for e in events or []])
        data |= {
            "labels": dict(task.spec.get("labels") or {}),
            "workflow_id": task.workflow_id,
            "workflow_key": task.workflow_key,
        }
        return data

    def task_output(self, task_id: str, request: OutputRequest) -> dict[str, Any]:
        task = self._tasks.get(task_id)
        page = read_output_page(
            self._streaming, task.id, request.attempt, request.offset, request.stream
        )
        return _output_json(page, request.stream)

    # -- nodes and workflows ------------------------------------------------------

    def list_nodes(self) -> dict[str, Any]:
        return {"nodes": [_node_json(load) for load in node_loads(self._cluster, self._reader)]}

    def _one_node_json(self, node_id: str) -> dict[str, Any]:
        load = next(load for load in node_loads(self._cluster, self._reader)
                    if load.view.node.id == node_id)  # fmt: skip
        return _node_json(load)

    def list_workflows(self, request: WorkflowListRequest) -> dict[str, Any]:
        tokens = PageTokens("web_workflows", {"states": sorted(request.states)}, True)
        after = _page_start(tokens, request.page_token)
        page = self._workflows.list_workflows(
            list(request.states) or None, request.page_size, after, True
        )
        return {
            "workflows": [workflow_json(workflow_to_proto(w)) for w in page.workflows],
            "next_page_token": tokens.issue(page.next_key),
            "total": page.total,
        }

    def get_workflow(self, workflow_id: str) -> dict[str, Any]:
        return {"workflow": workflow_json(workflow_to_proto(self._workflows.get(workflow_id)))}


def _no_parameters(query: str) -> None:
    QueryParams(query, ())


def _reads_only(parts: list[str]) -> bool:
    """Whether the path is one only read (GET, HEAD)."""
    match parts:
        case ["tasks" | "nodes" | "workflows" | "cluster"] | ["tasks" | "workflows", _]:
            return not changes_only(parts)
        case ["tasks", _, "output"]:
            return True
    return False


def _not_allowed(allowed: str) -> ApiAnswer:
    return ApiAnswer(
        HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"not allowed here: {allowed}"}, {"Allow": allowed}
    )


def _parts(path: str) -> list[str]:
    return [_segment(part) for part in path.removeprefix(API_PREFIX).split("/")]


def _segment(part: str) -> str:
    try:
        return unquote(part, errors="strict")
    except UnicodeDecodeError:
        raise BadParameter("path", f"{part!r} is not UTF-8 once decoded") from None


def _page_start(tokens: PageTokens, token: str) -> PageKey | None:
    try:
        return tokens.read(token)
    except InvalidArgument:
        raise BadParameter(
            "page_token",
            "not a next_page_token of this listing with these filters; list again without it",
        ) from None


def _node_json(load: NodeLoad) -> dict[str, Any]:
    return {
        **node_json(node_to_proto(load.view)),
        "up": load.up,
        "capacity": load.capacity,
        "used": load.used,
        "allocated": load.allocated,
    }


def _output_json(page: OutputPage, stream: str | None) -> dict[str, Any]:
    end = page.end
    return {
        "task_id": page.task_id,
        "attempt": page.attempt,
        "stream": stream,
        "offset": page.offset,
        "next_offset": page.next_offset,
        "text": page.data.decode("utf-8", errors="replace"),
        "more": page.more,
        "done": page.done,
        "end": None
        if end is None
        else {
            "state": end.state,
            "exit_code": end.exit_code,
            "error": end.error,
            "total_bytes": end.total_bytes,
            "interrupted": end.interrupted,
        },
    }
