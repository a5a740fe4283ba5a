"""Listing tasks filtered by several states (each state's rows merged in
index order rather than sorted after an IN) gives, page by page in either
order, exactly the matching tasks in submission order, with the total of all
of them; with other filters too."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.state import entries as e
from tests.state_reads import all_pages
from tests.workflow_sim import NODES, WorkflowLog

STATES = ("queued", "assigned", "running", "completed", "cancelled")


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkflowLog]:
    """Twenty tasks in turn left queued, assigned, running, completed and
    cancelled, on the nodes in turn; two submitted per entry, so some share
    a submit index."""
    log = WorkflowLog(Path(tmp_path_factory.mktemp("states")) / "state.db")
    for pair in range(10):
        log.apply(*(e.TaskSubmit(f"t{2 * pair + k:02d}", {"type": "noop"}) for k in range(2)))
    for number in range(20):
        task_id, node = f"t{number:02d}", NODES[number % len(NODES)]
        target = STATES[number % len(STATES)]
        if target == "cancelled":
            assert log.one(e.TaskCancel(task_id, "test"))["ok"]
        if target in ("assigned", "running", "completed"):
            assert log.one(e.TaskAssign([{"task_id": task_id, "node": node, "attempt": 1}]))["ok"]
        if target in ("running", "completed"):
            assert log.one(e.TaskStarted(task_id, 1, node), node=node)["ok"]
        if target == "completed":
            assert log.one(e.TaskComplete(task_id, 1, node, {"exit_code": 0}), node=node)["ok"]
    yield log
    log.close()


@pytest.mark.parametrize("newest_first", [False, True])
@pytest.mark.parametrize("size", [1, 3, 100])
def test_several_states_page_in_submission_order(
    log: WorkflowLog, size: int, newest_first: bool
) -> None:
    everything = log.reader.list_tasks(limit=1000, newest_first=newest_first).tasks
    assert len(everything) == 20
    for count in (2, 3, 5):
        for states in itertools.combinations(STATES, count):
            got, totals = all_pages(
                log.reader, size, states=list(states), newest_first=newest_first
            )
            expected = [t.id for t in everything if t.state in states]
            assert [t.id for t in got] == expected, states
            assert totals == {len(expected)}


def test_several_states_with_a_node(log: WorkflowLog) -> None:
    got, totals = all_pages(log.reader, 2, states=["assigned", "completed", "running"], node="n2")
    everything = log.reader.list_tasks(limit=1000).tasks
    expected = [
        t.id
        for t in everything
        if t.state in ("assigned", "completed", "running") and t.node == "n2"
    ]
    assert expected and [t.id for t in got] == expected
    assert totals == {len(expected)}


@pytest.mark.parametrize("task_type", [None, "noop", "shell"])
@pytest.mark.parametrize("node", [None, *NODES])
def test_totals_from_the_counters_match_the_rows(
    log: WorkflowLog, task_type: str | None, node: str | None
) -> None:
    """The total of a listing filtered by state, type and node only comes from
    the counters the triggers keep; it is the number of matching tasks."""
    everything = log.reader.list_tasks(limit=1000).tasks
    for count in (0, 1, 2):
        for states in itertools.combinations(STATES, count):
            page = log.reader.list_tasks(
                states=list(states), task_type=task_type, node=node, limit=1
            )
            expected = [
                t
                for t in everything
                if (not states or t.state in states)
                and (task_type is None or t.type == task_type)
                and (node is None or t.node == node)
            ]
            assert page.total == len(expected), (states, task_type, node)
    assert log.reader.counts_by_state() == {state: 4 for state in STATES}


def test_active_counts_by_node_from_the_counters_match_the_rows(log: WorkflowLog) -> None:
    everything = log.reader.list_tasks(limit=1000).tasks
    expected: dict[str, int] = {}
    for task in everything:
        if task.state in ("assigned", "running") and task.node is not None:
            expected[task.node] = expected.get(task.node, 0) + 1
    assert expected and log.reader.active_counts_by_node() == expected
