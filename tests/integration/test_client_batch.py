"""`Client.submit_tasks` and `AsyncClient.submit_tasks` on a real 3-node
cluster: tasks described as submit_task's arguments come back as `Task`s in
order; a task refused alone comes back as its error, not raised; a malformed
task raises for the whole list; more than 1000 tasks go in several calls,
an error naming its task by its place in the whole list."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from cortex.client import AlreadyExists, AsyncClient, Client, CortexError, InvalidArgument, Task
from cortex.requests import MAX_SUBMIT_BATCH
from tests.cluster import Cluster, shared_cluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "client-batch")


@pytest.fixture
def cortex(cluster: Cluster) -> Iterator[Client]:
    with Client([n.grpc for n in cluster.nodes], token="", tls=False, timeout=60) as client:
        yield client


def task_count(cluster: Cluster) -> int:
    with Client(cluster.nodes[0].grpc, token="", tls=False, consistency="linearizable") as reader:
        return reader.list_tasks(page_size=1).total_size


def accepted(outcomes: list[Task | CortexError]) -> list[Task]:
    tasks = [outcome for outcome in outcomes if isinstance(outcome, Task)]
    assert len(tasks) == len(outcomes), outcomes
    return tasks


def test_tasks_come_back_in_order_and_run(cortex: Client) -> None:
    outcomes = cortex.submit_tasks(
        [
            {"command": ["echo", "argv"]},
            {"command": "echo shell; echo err >&2", "priority": 8, "timeout": 60},
            {"command": ["sh", "-c", 'echo "$GREETING"'], "env": {"GREETING": "hi"}},
            {"type": "noop", "options": {"exit_code": 0}},
        ]
    )
    tasks = accepted(outcomes)
    assert len({task.id for task in tasks}) == 4
    assert tasks[1].priority == 8 and tasks[3].type == "noop"
    # Every task got a key the client made, so a retried call adds none.
    assert all(task.idempotency_key.startswith("client-") for task in tasks)
    done = [cortex.wait_task(task.id, timeout=60) for task in tasks]
    assert [task.state for task in done] == ["completed"] * 4
    assert [task.result.stdout if task.result else None for task in done[:3]] == [
        b"argv\n",
        b"shell\n",
        b"hi\n",
    ]


def test_keys_deduplicate_and_a_conflict_is_returned_not_raised(
    cortex: Client, cluster: Cluster
) -> None:
    before = task_count(cluster)
    tasks = [
        {"command": ["echo", "a"], "idempotency_key": "client-batch-a"},
        {"command": ["echo", "a"], "idempotency_key": "client-batch-a"},
        {"command": ["echo", "other"], "idempotency_key": "client-batch-a"},
        {"command": ["echo", "b"], "idempotency_key": "client-batch-b"},
    ]
    first = cortex.submit_tasks(tasks)
    assert isinstance(first[0], Task) and isinstance(first[1], Task)
    assert first[1].id == first[0].id
    assert isinstance(first[2], AlreadyExists)
    assert "client-batch-a" in str(first[2]) and first[0].id in str(first[2])
    assert isinstance(first[3], Task)
    again = cortex.submit_tasks([tasks[0], tasks[3]])
    assert [task.id for task in accepted(again)] == [first[0].id, first[3].id]
    assert task_count(cluster) == before + 2


def test_a_malformed_task_raises_for_the_whole_list(cortex: Client, cluster: Cluster) -> None:
    before = task_count(cluster)
    with pytest.raises(InvalidArgument, match=r"^tasks\[1\]: .*priorty"):
        cortex.submit_tasks([{"command": ["true"]}, {"command": ["true"], "priorty": 3}])
    with pytest.raises(InvalidArgument, match=r"^tasks\[0\]: describe a task as a mapping"):
        cortex.submit_tasks(["echo hi"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match=r"^tasks\[2\]\.spec\.priority"):
        cortex.submit_tasks([{"type": "noop"}, {"type": "noop"}, {"type": "noop", "priority": 99}])
    assert task_count(cluster) == before
    assert cortex.submit_tasks([]) == []


def test_more_than_a_call_holds_goes_in_several_calls(cortex: Client, cluster: Cluster) -> None:
    before = task_count(cluster)
    tasks = [{"type": "noop", "idempotency_key": f"many-{i}"} for i in range(MAX_SUBMIT_BATCH)]
    bad = {"type": "noop", "priority": 99, "idempotency_key": "many-bad"}
    # The second call is refused whole, naming its task by its place in the list;
    # the first call's tasks stay submitted.
    with pytest.raises(InvalidArgument, match=rf"^tasks\[{MAX_SUBMIT_BATCH + 1}\]\.spec"):
        cortex.submit_tasks([*tasks, {"type": "noop"}, bad])
    assert task_count(cluster) == before + MAX_SUBMIT_BATCH
    fixed = [*tasks, {"type": "noop", "idempotency_key": "many-last"}, {**bad, "priority": 1}]
    outcomes = accepted(cortex.submit_tasks(fixed))
    assert len(outcomes) == MAX_SUBMIT_BATCH + 2
    assert [task.idempotency_key for task in outcomes] == [t["idempotency_key"] for t in fixed]
    assert len({task.id for task in outcomes}) == MAX_SUBMIT_BATCH + 2
    assert task_count(cluster) == before + MAX_SUBMIT_BATCH + 2


def test_the_asyncio_client_submits_tasks(cluster: Cluster) -> None:
    async def scenario() -> None:
        async with AsyncClient([n.grpc for n in cluster.nodes], token="", tls=False) as cortex:
            outcomes = await cortex.submit_tasks(
                [
                    {"command": "echo async", "idempotency_key": "async-a"},
                    {"command": "echo changed", "idempotency_key": "async-a"},
                ]
            )
            assert isinstance(outcomes[0], Task) and isinstance(outcomes[1], AlreadyExists)
            done = await cortex.wait_task(outcomes[0].id, timeout=60)
            assert done.state == "completed" and done.result is not None
            assert done.result.stdout == b"async\n"
            with pytest.raises(InvalidArgument, match=r"^tasks\[0\]\.spec"):
                await cortex.submit_tasks([{"command": ["true"], "priority": 99}])

    asyncio.run(scenario())
