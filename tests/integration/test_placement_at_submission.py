"""Placement with the submission on a real 3-node cluster: with nothing
queued, a task submitted to the leader or to a follower (whose batch the
leader takes in forwarded) is assigned by the Raft entry that submits it;
so is one behind a queued task no node can take, once a scheduling round
has passed that task over. The nodes agree on the state all along."""

from __future__ import annotations

import time

import pytest

from cortex.api.client import CortexClient
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import shell_spec

pytestmark = pytest.mark.cluster


def indexes(client: CortexClient, task_id: str) -> dict[str, int]:
    """The Raft index of each of a task's events, by event type."""
    events = client.get_task(task_id, include_events=True).events
    return {pb.EventType.Name(event.type): event.raft_index for event in events}


def finished(client: CortexClient, task_id: str) -> pb.Task:
    return client.get_task_result(task_id, wait=True, timeout_ms=30_000).task


def test_an_idle_clusters_task_is_assigned_by_its_submission(make_cluster) -> None:
    cluster = make_cluster(3)
    leader = cluster.leader()
    for node in [leader, *cluster.followers()]:
        with node.client() as client:
            for _ in range(3):
                task_id = client.submit_task(pb.TaskSpec(type="noop")).task.id
                assert finished(client, task_id).state == pb.TASK_STATE_COMPLETED
                seen = indexes(client, task_id)
                assert seen["EVENT_TYPE_SUBMITTED"] == seen["EVENT_TYPE_ASSIGNED"], (
                    node.node_id,
                    seen,
                )
    cluster.wait_converged()


def test_a_task_no_node_can_take_holds_no_later_submission_behind_it(make_cluster) -> None:
    """Once a scheduling round has passed the stuck task over (it runs as
    soon as the task is queued), later tasks are assigned by the entries
    that submit them again. Before, one such task made every later one wait
    for a round."""
    cluster = make_cluster(3)
    with cluster.followers()[0].client() as client:
        # No node has this label: the task stays queued.
        stuck = client.submit_task(
            shell_spec(["true"], constraints=pb.Constraints(node_labels=["zone=none"]))
        ).task.id
        placed_with_submission = []
        deadline = time.monotonic() + 30
        while not placed_with_submission and time.monotonic() < deadline:
            task_id = client.submit_task(pb.TaskSpec(type="noop")).task.id
            assert finished(client, task_id).state == pb.TASK_STATE_COMPLETED
            seen = indexes(client, task_id)
            if seen["EVENT_TYPE_ASSIGNED"] == seen["EVENT_TYPE_SUBMITTED"]:
                placed_with_submission.append(task_id)
        assert placed_with_submission, "every task behind the stuck one waited for a round"
        assert client.get_task(stuck).task.state == pb.TASK_STATE_QUEUED
    cluster.wait_converged()
