"""Keyset page tokens: a listing pages by the last item's (submit_index, id),
so tasks submitted while a client pages never repeat or shift an item; a
token only works with the filters and order it was issued for; anything
else a client passes as a token is refused. Driven through the public
servicer over a real StateMachine (tests/api_harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cortex.api.page_tokens import MAX_PAGE_SIZE, PageTokens, page_size
from cortex.errors import InvalidArgument
from cortex.state import entries as e
from cortex.state.paging import PageKey
from cortex.v1 import cortex_pb2 as pb
from tests.api_harness import Aborted, ApiState

SHELL = {"command": ["true"]}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiState]:
    state = ApiState(tmp_path)
    yield state
    state.close()


def submit(api: ApiState, *task_ids: str) -> None:
    """Each task in its own entry: its own submit index."""
    for task_id in task_ids:
        assert api.log.one(e.TaskSubmit(task_id, SHELL))["ok"]


def list_tasks(api: ApiState, **fields: Any) -> pb.ListTasksResponse:
    response: pb.ListTasksResponse = api.call("ListTasks", pb.ListTasksRequest(**fields))
    return response


def refusal(api: ApiState, method: str, request: object) -> str:
    with pytest.raises(Aborted) as refused:
        api.call(method, request)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return refused.value.message


def test_pages_stay_stable_while_tasks_are_submitted(api: ApiState) -> None:
    submit(api, *(f"t{n:02}" for n in range(10)))
    # Two in one entry: the same submit index, told apart by id.
    api.log.apply(e.TaskSubmit("t10a", SHELL), e.TaskSubmit("t10b", SHELL))
    seen: list[str] = []
    added: list[str] = []
    page = list_tasks(api, page_size=4)
    assert page.total_size == 12
    assert [t.id for t in page.tasks] == ["t10b", "t10a", "t09", "t08"]  # newest first
    seen += [t.id for t in page.tasks]
    while page.next_page_token:
        added.append(f"new{len(seen)}")
        submit(api, added[-1])  # lands before the cursor: never listed
        page = list_tasks(api, page_size=4, page_token=page.next_page_token)
        seen += [t.id for t in page.tasks]
    assert seen == ["t10b", "t10a", *(f"t{n:02}" for n in range(9, -1, -1))]
    assert added == ["new4", "new8"] and page.total_size == 12 + 2

    oldest: list[str] = []
    page = list_tasks(api, page_size=5, order=pb.LIST_ORDER_OLDEST_FIRST)
    oldest += [t.id for t in page.tasks]
    while page.next_page_token:
        page = list_tasks(
            api, page_size=5, order=pb.LIST_ORDER_OLDEST_FIRST, page_token=page.next_page_token
        )
        oldest += [t.id for t in page.tasks]
    assert oldest == [*reversed(seen), *added]
    assert len(set(oldest)) == len(oldest)


def test_a_token_only_works_with_its_filters_and_order(api: ApiState) -> None:
    submit(api, "a", "b", "c")
    queued = [pb.TASK_STATE_QUEUED]
    token = list_tasks(api, page_size=1, states=queued).next_page_token
    assert token
    # Same filters (a repeated state changes nothing): the next page.
    again = list_tasks(api, page_size=1, states=queued * 2, page_token=token)
    assert [t.id for t in again.tasks] == ["b"]
    for other in (
        pb.ListTasksRequest(page_size=1, page_token=token),
        pb.ListTasksRequest(page_size=1, page_token=token, states=queued, type="noop"),
        pb.ListTasksRequest(
            page_size=1, page_token=token, states=queued, order=pb.LIST_ORDER_OLDEST_FIRST
        ),
    ):
        assert "page_token was issued for other filters" in refusal(api, "ListTasks", other)
    # Nor in another listing.
    refused = refusal(api, "ListDeadLetterTasks", pb.ListDeadLetterTasksRequest(page_token=token))
    assert "page_token was issued for other filters" in refused
    # The page size may change between pages.
    assert [t.id for t in list_tasks(api, states=queued, page_token=token).tasks] == ["b", "a"]


@pytest.mark.parametrize("token", ["5", "abc", "eyJ2IjoxfQ", "!!!", "e30"])
def test_a_token_the_node_did_not_issue_is_refused(api: ApiState, token: str) -> None:
    message = refusal(api, "ListTasks", pb.ListTasksRequest(page_token=token))
    assert "page_token" in message and "is not a next_page_token" in message
    refusal(api, "ListWorkflows", pb.ListWorkflowsRequest(page_token=token))


def test_tokens_round_trip_and_name_nothing_of_the_filters() -> None:
    tokens = PageTokens("tasks", {"states": ["queued"], "node_id": "secret-node"})
    token = tokens.issue(PageKey(42, "t-1"))
    assert "secret-node" not in token and "=" not in token
    assert tokens.read(token) == PageKey(42, "t-1")
    assert tokens.issue(None) == "" and tokens.read("") is None
    with pytest.raises(InvalidArgument, match="other filters"):
        PageTokens("workflows", tokens.filters).read(token)


def test_page_sizes(api: ApiState) -> None:
    assert page_size(0) == 100 and page_size(7) == 7 and page_size(5000) == MAX_PAGE_SIZE
    with pytest.raises(InvalidArgument, match="page_size must not be negative"):
        page_size(-1)
    assert "page_size" in refusal(api, "ListTasks", pb.ListTasksRequest(page_size=-1))


def test_dead_letters_and_workflows_page_the_same_way(api: ApiState) -> None:
    submit(api, "d1", "d2", "d3", "alive")
    for task_id in ("d1", "d2", "d3"):
        assert api.log.one(e.TaskDeadLetter(task_id, 0, "out of retries"))["ok"]
    page = api.call("ListDeadLetterTasks", pb.ListDeadLetterTasksRequest(page_size=2))
    assert [t.id for t in page.tasks] == ["d3", "d2"] and page.total_size == 3
    rest = api.call(
        "ListDeadLetterTasks",
        pb.ListDeadLetterTasksRequest(page_size=2, page_token=page.next_page_token),
    )
    assert [t.id for t in rest.tasks] == ["d1"] and not rest.next_page_token

    definition = 'name: w{n}\ntasks:\n  a: {{spec: {{command: "true"}}}}\n'
    flows = [api.log.submit(definition.format(n=n))[0] for n in range(3)]
    page = api.call("ListWorkflows", pb.ListWorkflowsRequest(page_size=2))
    assert [w.id for w in page.workflows] == [flows[2], flows[1]] and page.total_size == 3
    rest = api.call(
        "ListWorkflows", pb.ListWorkflowsRequest(page_size=2, page_token=page.next_page_token)
    )
    assert [w.id for w in rest.workflows] == [flows[0]] and not rest.next_page_token
    running = pb.ListWorkflowsRequest(
        states=[pb.WORKFLOW_STATE_RUNNING], page_token=page.next_page_token
    )
    assert "other filters" in refusal(api, "ListWorkflows", running)
