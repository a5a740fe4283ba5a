"""Placement with the submission on a real 3-node cluster: with nothing
queued, a task submitted to the leader or to a follower (whose batch the
leader takes in forwarded) is assigned by the Raft entry that submits it;
behind a queued task, it waits for a scheduling round like any other. The
nodes agree on the state all along."""

from __future__ import annotations

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


def test_a_task_behind_a_queued_one_waits_for_a_round(make_cluster) -> None:
    cluster = make_cluster(3)
    with cluster.followers()[0].client() as client:
        # No node has this label: the task stays queued.
        stuck = client.submit_task(
            shell_spec(["true"], constraints=pb.Constraints(node_labels=["zone=none"]))
        ).task.id
        task_id = client.submit_task(pb.TaskSpec(type="noop")).task.id
        assert finished(client, task_id).state == pb.TASK_STATE_COMPLETED
        seen = indexes(client, task_id)
        assert seen["EVENT_TYPE_ASSIGNED"] > seen["EVENT_TYPE_SUBMITTED"], seen
        assert client.get_task(stuck).task.state == pb.TASK_STATE_QUEUED
    cluster.wait_converged()
