"""Writes routed to the leader on a real 3-node cluster: every answer's
header names the leader, a client of a follower sends its writes there once
connected while its reads stay on its own node and still see its writes,
follows the leadership when the leader is killed, and with routing off
sends everything to its own node (which forwards writes); the public
clients (blocking and asyncio) write to the leader with their own node
stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from cortex.client import AsyncClient, Client
from cortex.errors import CortexError
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, shell_spec, wait_until

pytestmark = pytest.mark.cluster


def _submit(client: object, key: str) -> pb.SubmitTaskResponse:
    return client.submit_task(shell_spec(["true"], type="noop"), idempotency_key=key)  # type: ignore[attr-defined]


def test_a_followers_client_writes_to_the_leader_and_reads_on_its_node(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    leader = cluster.leader()
    follower = cluster.followers()[0]
    with follower.client() as client:
        first = _submit(client, "route-0")
        # The first write knows no leader yet: the follower answers it.
        assert first.header.node_id == follower.node_id
        assert first.header.leader_id == leader.node_id
        assert first.header.leader_grpc_address == leader.grpc
        assert client.leader_address == leader.grpc
        wait_until(
            lambda: _submit(client, "route-wait").header.node_id == leader.node_id,
            what="a write answered by the leader",
        )
        for number in range(1, 30):
            written = _submit(client, f"route-{number}")
            assert written.header.node_id == leader.node_id
            read = client.get_task(written.task.id)
            assert read.header.node_id == follower.node_id
            assert read.task.id == written.task.id
        # A key sent again is the same task, whichever node took it first.
        again = _submit(client, "route-0")
        assert not again.created and again.task.id == first.task.id
    digest, _ = cluster.wait_converged()
    assert digest


def test_a_leaders_client_keeps_writing_to_its_own_node(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    leader = cluster.leader()
    with leader.client() as client:
        for number in range(10):
            written = _submit(client, f"own-{number}")
            assert written.header.node_id == leader.node_id == written.header.leader_id
        assert client.leader_address == leader.grpc


def test_with_routing_off_a_follower_answers_every_write(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    leader = cluster.leader()
    follower = cluster.followers()[0]
    with follower.client(route_writes=False) as client:
        for number in range(10):
            written = _submit(client, f"off-{number}")
            assert written.header.node_id == follower.node_id
            assert written.header.leader_id == leader.node_id
        assert client.leader_address is None


def test_writes_follow_the_leadership_when_the_leader_is_killed(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    old = cluster.leader()
    follower = cluster.followers()[0]
    with follower.client(timeout_s=5) as client:
        wait_until(
            lambda: _submit(client, "before").header.node_id == old.node_id,
            what="a write answered by the leader",
        )
        old.kill9()
        new = cluster.leader()
        answers: list[str] = []

        def answered_by_new_leader() -> bool:
            key = f"after-{len(answers)}"
            try:
                answers.append(_submit(client, key).header.node_id)
            except CortexError:
                return False  # the write in flight when the leader died, or the election
            return answers[-1] == new.node_id

        wait_until(answered_by_new_leader, 60, what="a write answered by the new leader")
        assert client.leader_address == new.grpc
        # Every write acknowledged after the kill is readable on the client's node.
        for number, node_id in enumerate(answers):
            assert node_id in (new.node_id, follower.node_id)
            task = _submit(client, f"after-{number}").task
            assert not _submit(client, f"after-{number}").created
            assert client.get_task(task.id).task.id == task.id
    survivors: list[ClusterNode] = [n for n in cluster.nodes if n is not old]
    digest, _ = cluster.wait_converged(survivors)
    assert digest


def _connected_to_leader(client: Any) -> bool:
    route = client._route  # what the client's next write is sent over
    return route is not None and route.pick() is not None


def test_the_public_client_writes_to_the_leader_while_its_own_node_is_stopped(
    make_cluster: Callable[..., Cluster],
) -> None:
    """A write routed to the leader never touches the client's node: with
    that node stopped (SIGSTOP) it still commits on the other two."""
    cluster = make_cluster(3)
    leader = cluster.leader()
    follower = cluster.followers()[0]
    with Client(follower.grpc, token="", tls=False, timeout=5, retries=0) as client:
        client.submit_task(["true"], type="noop")
        assert client.leader_address == leader.grpc
        wait_until(
            lambda: client.submit_task(["true"]) and _connected_to_leader(client),
            what="a channel to the leader",
        )
        os.kill(follower.process.pid, signal.SIGSTOP)
        try:
            tasks = [client.submit_task(["true"], type="noop") for _ in range(5)]
        finally:
            os.kill(follower.process.pid, signal.SIGCONT)
        assert len({task.id for task in tasks}) == 5
        # The session carries the writes' indexes, so the follower, woken,
        # answers only once it has applied them: read-your-writes holds.
        assert all(client.get_task(task.id).id == task.id for task in tasks)
        index = client.session.index
    with Client(
        follower.grpc, token="", tls=False, route_writes=False, session_index=index
    ) as plain:
        assert all(plain.get_task(task.id).id == task.id for task in tasks)
        assert plain.leader_address is None


def test_the_asyncio_client_writes_to_the_leader_while_its_own_node_is_stopped(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    leader = cluster.leader()
    follower = cluster.followers()[0]

    async def run() -> list[str]:
        async with AsyncClient(follower.grpc, token="", tls=False, timeout=5, retries=0) as client:
            await client.submit_task(["true"], type="noop")
            assert client.leader_address == leader.grpc
            deadline = time.monotonic() + 30
            while not _connected_to_leader(client):
                assert time.monotonic() < deadline, "no channel to the leader"
                await client.submit_task(["true"])
                await asyncio.sleep(0.01)
            os.kill(follower.process.pid, signal.SIGSTOP)
            try:
                ids = [(await client.submit_task(["true"])).id for _ in range(5)]
            finally:
                os.kill(follower.process.pid, signal.SIGCONT)
            # Read from the woken follower: the session's index makes it wait
            # until it has applied the writes the leader answered.
            return [(await client.get_task(task_id)).id for task_id in ids]

    ids = asyncio.run(run())
    assert len(set(ids)) == 5
