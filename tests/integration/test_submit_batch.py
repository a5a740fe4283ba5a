"""SubmitTasks on a real 3-node cluster: a batch creates every task and each
runs; idempotency keys deduplicate task by task, across calls and within
one; a key reused with another spec refuses that task alone; one malformed
task refuses the whole call and nothing of it is written; the size limits;
a follower takes a batch like the leader."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from cortex.api.client import CortexClient
from cortex.errors import InvalidArgument
from cortex.requests import MAX_SUBMIT_BATCH
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, shared_cluster, shell_spec

pytestmark = pytest.mark.cluster

ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS.value[0]


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "submit-batch")


def task_count(client: CortexClient) -> int:
    """Every task in the cluster, as of now (other clients' writes too)."""
    client.consistency = pb.READ_CONSISTENCY_LINEARIZABLE
    return client.list_tasks(page_size=1).total_size


def noop() -> pb.TaskSpec:
    return pb.TaskSpec(type="noop")


def test_a_batch_creates_every_task_in_order_and_each_completes(cluster: Cluster) -> None:
    with cluster.nodes[0].client() as client:
        before = task_count(client)
        specs = [shell_spec(["echo", f"task-{i}"]) for i in range(25)]
        reply = client.submit_tasks(specs, [f"order-{i}" for i in range(25)])
        assert len(reply.results) == 25
        assert all(r.created and not r.error and r.error_code == 0 for r in reply.results)
        assert reply.commit_index > 0
        ids = [r.task.id for r in reply.results]
        assert len(set(ids)) == 25
        assert task_count(client) == before + 25
        for i, task_id in enumerate(ids):
            task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            assert task.state == pb.TASK_STATE_COMPLETED, task
            # Results come back in the order of the request.
            assert task.result.stdout == f"task-{i}\n".encode()
            assert task.idempotency_key == f"order-{i}"


def test_per_task_keys_deduplicate_across_calls_and_within_one(cluster: Cluster) -> None:
    with cluster.nodes[1].client() as client:
        before = task_count(client)
        keys = [f"dedupe-{i}" for i in range(4)]
        first = client.submit_tasks([noop()] * 5, [*keys, keys[1]]).results
        assert [r.created for r in first] == [True, True, True, True, False]
        assert first[4].task.id == first[1].task.id
        assert len({r.task.id for r in first}) == 4

        again = client.submit_tasks([noop()] * 5, [*keys, "dedupe-new"]).results
        assert [r.created for r in again] == [False, False, False, False, True]
        assert [r.task.id for r in again[:4]] == [r.task.id for r in first[:4]]
        assert not any(r.error for r in again)
        assert task_count(client) == before + 5


def test_a_key_reused_with_another_spec_refuses_that_task_alone(cluster: Cluster) -> None:
    with cluster.nodes[0].client() as client:
        held = client.submit_task(shell_spec(["echo", "a"]), "conflict-held").task
        before = task_count(client)
        results = client.submit_tasks(
            [noop(), shell_spec(["echo", "b"]), noop()],
            ["conflict-1", "conflict-held", "conflict-2"],
        ).results
        assert results[0].created and results[2].created
        refused = results[1]
        assert not refused.HasField("task") and not refused.created
        assert refused.error_code == ALREADY_EXISTS
        assert "conflict-held" in refused.error and held.id in refused.error
        # Within one call: the second use of a key with another spec.
        inside = client.submit_tasks(
            [shell_spec(["echo", "c"]), shell_spec(["echo", "d"])], ["conflict-in", "conflict-in"]
        ).results
        assert inside[0].created
        assert inside[1].error_code == ALREADY_EXISTS and not inside[1].HasField("task")
        assert task_count(client) == before + 3


def test_one_malformed_task_refuses_the_whole_call_and_writes_nothing(cluster: Cluster) -> None:
    with cluster.nodes[2].client() as client:
        before = task_count(client)
        specs = [noop(), noop(), noop(), pb.TaskSpec(type="noop", priority=99), noop()]
        keys = [f"malformed-{i}" for i in range(5)]
        with pytest.raises(InvalidArgument, match=r"^tasks\[3\]\.spec\.priority"):
            client.submit_tasks(specs, keys)
        with pytest.raises(InvalidArgument, match=r"^tasks\[2\]\.idempotency_key"):
            client.submit_tasks([noop()] * 3, ["ok-a", "ok-b", "k" * 300])
        with pytest.raises(InvalidArgument, match=r"^tasks\[1\]\.spec"):
            client.submit_tasks([noop(), pb.TaskSpec(type="shell")], [])
        assert task_count(client) == before
        # Nothing was proposed: the good tasks' keys are still free.
        fixed = client.submit_tasks([noop()] * 5, keys).results
        assert all(r.created for r in fixed)
        assert task_count(client) == before + 5


def test_no_tasks_and_more_than_the_limit_are_refused(cluster: Cluster) -> None:
    with cluster.nodes[0].client() as client:
        before = task_count(client)
        with pytest.raises(InvalidArgument, match=r"1 to 1000 tasks \(got 0\)"):
            client.submit_tasks([])
        too_many = MAX_SUBMIT_BATCH + 1
        with pytest.raises(InvalidArgument, match=rf"1 to 1000 tasks \(got {too_many}\)"):
            client.submit_tasks([noop()] * too_many)
        assert task_count(client) == before


def test_a_follower_takes_a_batch(cluster: Cluster) -> None:
    follower = cluster.followers()[0]
    with follower.client() as client:
        specs = [shell_spec(["echo", f"via-follower-{i}"]) for i in range(3)]
        reply = client.submit_tasks(specs)
        assert all(r.created for r in reply.results)
        index = client.session_index
    leader = cluster.leader()
    with leader.client() as reader:
        reader.advance_session(index)
        for i, result in enumerate(reply.results):
            task = reader.get_task_result(result.task.id, wait=True, timeout_ms=60_000).task
            assert task.state == pb.TASK_STATE_COMPLETED
            assert task.result.stdout == f"via-follower-{i}\n".encode()
