"""Surviving failures on real clusters: dead nodes, failing tasks, leader
loss, drains, cancels, zombies and timeouts. The failure timeout is
shortened to keep the tests quick."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest

from cortex.errors import FailedPrecondition
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, completion_counts, pid_alive, shell_spec, wait_until

pytestmark = pytest.mark.cluster

FAST = ["--failure-timeout", "3", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]


def _fast_cluster(make_cluster, size: int = 3) -> Cluster:
    return make_cluster(size, extra_args=FAST)


def _events(client, task_id: str) -> list[pb.Event]:
    return list(client.get_task(task_id, include_events=True).events)


def _ms(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)


def _node(cluster: Cluster, node_id: str):
    return next(n for n in cluster.nodes if n.node_id == node_id)


def _wait_running(client, task_id: str, timeout: float = 30) -> pb.Task:
    return wait_until(
        lambda: (t := client.get_task(task_id).task).state == pb.TASK_STATE_RUNNING and t,
        timeout,
        what=f"task {task_id} running",
    )


def test_killed_worker_task_is_retried_elsewhere_with_backoff(make_cluster, tmp_path):
    cluster = _fast_cluster(make_cluster)
    leader = cluster.leader()
    victim = cluster.followers()[0]
    marker = tmp_path / "attempts"
    command = f'echo "$CORTEX_ATTEMPT $CORTEX_NODE_ID" >> {marker}; sleep 2; echo finished'
    spec = shell_spec(command, constraints=pb.Constraints(forbidden_nodes=[leader.node_id]),
                      retry_policy=pb.RetryPolicy(backoff=_ms(500)))  # fmt: skip
    with leader.client() as client:
        # Pin the first attempt to the victim by cordoning the other follower.
        other = next(n for n in cluster.followers() if n is not victim)
        client.cordon_node(other.node_id)
        task_id = client.submit_task(spec).task.id
        task = _wait_running(client, task_id)
        assert task.node_id == victim.node_id
        client.uncordon_node(other.node_id)
        victim.kill9()
        done = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
        assert done.state == pb.TASK_STATE_COMPLETED, done
        assert done.attempt == 2 and done.node_id == other.node_id
        assert done.result.stdout.decode().strip() == "finished"
        events = _events(client, task_id)
    retried = [ev for ev in events if ev.type == pb.EVENT_TYPE_RETRIED]
    assert len(retried) == 1
    detail = dict(retried[0].detail)
    assert detail["delay_ms"] == 500 and "silent" in detail["reason"]
    assert retried[0].task_change.to_state == pb.TASK_STATE_QUEUED
    assigned = [ev for ev in events if ev.type == pb.EVENT_TYPE_ASSIGNED]
    assert [ev.attempt for ev in assigned] == [1, 2]
    assert assigned[1].time.ToMilliseconds() - retried[0].time.ToMilliseconds() >= 500
    assert [ev.type for ev in events].count(pb.EVENT_TYPE_COMPLETED) == 1


def test_always_failing_task_backs_off_then_dead_letters_and_can_be_retried(make_cluster):
    cluster = _fast_cluster(make_cluster)
    spec = shell_spec("exit 7", retry_policy=pb.RetryPolicy(max_retries=3, backoff=_ms(400)))
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(spec).task.id
        task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
        assert task.state == pb.TASK_STATE_DEAD_LETTER and task.result.exit_code == 7
        events = _events(client, task_id)
        retried = [ev for ev in events if ev.type == pb.EVENT_TYPE_RETRIED]
        assert [ev.detail["delay_ms"] for ev in retried] == [400, 800, 1600]
        assigned = [ev for ev in events if ev.type == pb.EVENT_TYPE_ASSIGNED]
        assert [ev.attempt for ev in assigned] == [1, 2, 3, 4]
        for retry, next_assign, expected in zip(
            retried, assigned[1:], [400, 800, 1600], strict=True
        ):
            gap = next_assign.time.ToMilliseconds() - retry.time.ToMilliseconds()
            assert expected <= gap <= expected + 1500, (expected, gap)
        assert task_id in [t.id for t in client.list_dead_letter_tasks().tasks]

        with pytest.raises(FailedPrecondition):
            client.retry_dead_letter_task(client.submit_task(shell_spec(["true"])).task.id)
        again = client.retry_dead_letter_task(task_id).task
        assert again.state in (
            pb.TASK_STATE_QUEUED, pb.TASK_STATE_ASSIGNED, pb.TASK_STATE_RUNNING
        )  # fmt: skip
        wait_until(
            lambda: client.get_task(task_id).task.attempt >= 5, 30, what="the retried task to run"
        )
        final = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
        assert final.state == pb.TASK_STATE_DEAD_LETTER and final.attempt == 8


def test_leader_killed_with_100_tasks_in_flight_all_complete_exactly_once(make_cluster):
    cluster = _fast_cluster(make_cluster)
    leader = cluster.leader()
    followers = cluster.followers()
    clients = [n.client() for n in followers]
    ids = []
    for i in range(100):
        spec = shell_spec(["sh", "-c", f"sleep 0.{i % 10}; echo {i}"])
        ids.append(clients[i % 2].submit_task(spec, idempotency_key=f"lk-{i}").task.id)
    leader.kill9()
    with followers[0].client(timeout_s=60) as client:
        for task_id in ids:
            task = client.get_task_result(task_id, wait=True, timeout_ms=90_000).task
            assert task.state == pb.TASK_STATE_COMPLETED, (task_id, task.state)
    for c in clients:
        c.close()
    leader.start(peers=cluster.peers)
    digest, _ = cluster.wait_converged(timeout=90)
    for node in cluster.nodes:
        counts = completion_counts(node)
        assert set(ids) <= set(counts)
        assert all(counts[i] == 1 for i in ids), node.node_id


def test_drain_finishes_running_moves_queued_and_uncordon_restores(make_cluster):
    cluster = _fast_cluster(make_cluster)
    target = cluster.followers()[0]
    with cluster.nodes[0].client() as client:
        pinned = pb.Constraints(target_node=target.node_id)
        running = client.submit_task(shell_spec("sleep 2; echo done", constraints=pinned)).task.id
        _wait_running(client, running)
        # Work submitted during the drain goes elsewhere; work pinned to the
        # draining node waits until it is uncordoned.
        drained = client.drain_node(target.node_id, deadline=timedelta(seconds=60))
        assert drained.node.status == pb.NODE_STATUS_DRAINING
        assert drained.commit_index and drained.header.applied_index >= drained.commit_index
        assert drained.node.drain_deadline.ToSeconds() > time.time() + 30
        movable = [client.submit_task(shell_spec(["echo", "moved"])).task.id for _ in range(10)]
        stuck = client.submit_task(shell_spec(["echo", "pinned"], constraints=pinned)).task.id
        for task_id in movable:
            task = client.get_task_result(task_id, wait=True, timeout_ms=30_000).task
            assert task.state == pb.TASK_STATE_COMPLETED and task.node_id != target.node_id
        first = client.get_task_result(running, wait=True, timeout_ms=30_000).task
        assert first.state == pb.TASK_STATE_COMPLETED
        assert first.node_id == target.node_id and first.attempt == 1
        reasons = wait_until(lambda: list(client.get_task(stuck).task.pending_reasons), 15)
        assert any("draining" in r for r in reasons), reasons
        assert client.get_task(stuck).task.state == pb.TASK_STATE_QUEUED
        client.uncordon_node(target.node_id)
        after = client.get_task_result(stuck, wait=True, timeout_ms=30_000).task
        assert after.state == pb.TASK_STATE_COMPLETED and after.node_id == target.node_id


def test_drain_deadline_requeues_running_task_without_spending_a_retry(make_cluster):
    cluster = _fast_cluster(make_cluster)
    target = cluster.followers()[0]
    with cluster.nodes[0].client() as client:
        blocker = client.submit_task(shell_spec("sleep 30", constraints=pb.Constraints(
            target_node=target.node_id))).task.id  # fmt: skip
        _wait_running(client, blocker)
        client.drain_node(target.node_id, deadline_ms=1_000)
        wait_until(lambda: client.get_task(blocker).task.state != pb.TASK_STATE_RUNNING, 20,
                   what="drain deadline")  # fmt: skip
        moved = client.get_task(blocker, include_events=True)
        assert moved.task.state == pb.TASK_STATE_QUEUED
        requeued = [ev for ev in moved.events if ev.type == pb.EVENT_TYPE_REQUEUED]
        assert requeued and "draining" in requeued[0].detail["reason"]
        retried = [ev for ev in moved.events if ev.type == pb.EVENT_TYPE_RETRIED]
        assert not retried, "a drain must not spend a retry"
        client.cancel_task(blocker)


def test_cancel_running_task_kills_its_process_group(make_cluster, tmp_path):
    cluster = _fast_cluster(make_cluster)
    pid_file = tmp_path / "pids"
    command = f"sleep 600 & echo $! >> {pid_file}; echo $$ >> {pid_file}; wait"
    with cluster.nodes[1].client() as client:
        task_id = client.submit_task(shell_spec(command)).task.id
        _wait_running(client, task_id)
        pids = wait_until(lambda: pid_file.exists() and len(pid_file.read_text().split()) == 2
                          and [int(p) for p in pid_file.read_text().split()], 20)  # fmt: skip
        assert all(pid_alive(p) for p in pids)
        cancelled = client.cancel_task(task_id)
        assert cancelled.task.state == pb.TASK_STATE_CANCELLED
        assert cancelled.commit_index and cancelled.header.applied_index >= cancelled.commit_index
    wait_until(lambda: not any(pid_alive(p) for p in pids), 2.0, interval=0.05,
               what="the task's processes to die")  # fmt: skip
    for node in cluster.nodes:
        with node.client() as client:
            wait_until(
                lambda c=client: c.get_task(task_id).task.state == pb.TASK_STATE_CANCELLED, 10
            )


def test_cancelled_queued_task_never_starts(make_cluster, tmp_path):
    cluster = _fast_cluster(make_cluster)
    marker = tmp_path / "ran"
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(shell_spec(f"touch {marker}", constraints=pb.Constraints(
            node_labels=["nowhere"]))).task.id  # fmt: skip
        assert client.cancel_task(task_id).task.state == pb.TASK_STATE_CANCELLED
        sentinel = client.submit_task(shell_spec(["true"])).task.id
        result = client.get_task_result(sentinel, wait=True, timeout_ms=30_000)
        assert result.task.state == pb.TASK_STATE_COMPLETED
        assert client.get_task(task_id).task.state == pb.TASK_STATE_CANCELLED
    assert not marker.exists()


def test_zombie_report_is_rejected_and_its_process_killed(make_cluster, tmp_path):
    cluster = _fast_cluster(make_cluster)
    leader = cluster.leader()
    zombie = cluster.followers()[0]
    pid_file = tmp_path / "pid"
    # The first attempt would outlive the test unless its node kills it.
    command = (f'echo $$ > {pid_file}.$CORTEX_ATTEMPT; '
               f'if [ "$CORTEX_ATTEMPT" = 1 ]; then sleep 120; fi; echo "attempt $CORTEX_ATTEMPT"')  # fmt: skip
    with leader.client() as client:
        # Pin the first attempt to the zombie by cordoning the other follower.
        other = next(n for n in cluster.followers() if n is not zombie)
        assert client.cordon_node(other.node_id).node.status == pb.NODE_STATUS_CORDONED
        task_id = client.submit_task(shell_spec(command, constraints=pb.Constraints(
            forbidden_nodes=[leader.node_id]), retry_policy=pb.RetryPolicy(backoff=_ms(100)))).task.id  # fmt: skip
        task = _wait_running(client, task_id)
        assert task.node_id == zombie.node_id
        client.uncordon_node(other.node_id)
        zombie_pid = int(wait_until(lambda: (tmp_path / "pid.1").exists()
                                    and (tmp_path / "pid.1").read_text().strip(), 10))  # fmt: skip
        os.kill(zombie.process.pid, signal.SIGSTOP)
        try:
            done = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            assert done.state == pb.TASK_STATE_COMPLETED
            assert done.attempt == 2 and done.node_id == other.node_id
        finally:
            os.kill(zombie.process.pid, signal.SIGCONT)
        assert done.result.stdout == b"attempt 2\n"
        assert pid_alive(zombie_pid), "the paused node's attempt should still be running"
        cluster.wait_converged(timeout=60)
        wait_until(lambda: not pid_alive(zombie_pid), 15, what="the zombie attempt killed")
        final = client.get_task(task_id, include_events=True)
    assert final.task.state == pb.TASK_STATE_COMPLETED
    assert final.task.result.stdout == b"attempt 2\n"
    assert [ev.type for ev in final.events].count(pb.EVENT_TYPE_COMPLETED) == 1
    # A report the zombie may still have sent was fenced off, not applied.
    assert not any(
        ev.type == pb.EVENT_TYPE_ATTEMPT_FAILED and ev.attempt == 1 for ev in final.events
    )


def test_task_over_timeout_is_killed_and_retried(make_cluster):
    cluster = _fast_cluster(make_cluster)
    spec = shell_spec(
        ["sleep", "30"],
        timeout=_ms(500),
        retry_policy=pb.RetryPolicy(max_retries=1, backoff=_ms(100)),
    )
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(spec).task.id
        task = client.get_task_result(task_id, wait=True, timeout_ms=30_000).task
        assert task.state == pb.TASK_STATE_DEAD_LETTER and task.attempt == 2
        assert task.result.timed_out and task.spec.timeout.ToMilliseconds() == 500
        events = _events(client, task_id)
    failures = [ev.detail["reason"] for ev in events if ev.type == pb.EVENT_TYPE_ATTEMPT_FAILED]
    assert failures == ["timed out after 500 ms"] * 2
    assert Counter(ev.type for ev in events)[pb.EVENT_TYPE_RETRIED] == 1


def test_graceful_shutdown_drains_the_node_and_a_restart_makes_it_active(make_cluster):
    cluster = make_cluster(3, extra_args=[*FAST[:-2], "--shutdown-drain", "30"])
    leader = cluster.leader()
    worker = cluster.followers()[0]
    with leader.client() as client:
        spec = shell_spec(
            "sleep 2; echo done", constraints=pb.Constraints(target_node=worker.node_id)
        )
        task_id = client.submit_task(spec).task.id
        _wait_running(client, task_id)
        worker.stop(timeout=40)  # SIGTERM: the running task may finish first

        def worker_row() -> pb.Node:
            return next(n for n in client.list_nodes().nodes if n.id == worker.node_id)

        assert (worker_row().status, worker_row().status_reason) == (
            pb.NODE_STATUS_DRAINING, "graceful shutdown",
        )  # fmt: skip
        task = client.get_task_result(task_id, wait=True, timeout_ms=30_000).task
        assert (task.state, task.node_id) == (pb.TASK_STATE_COMPLETED, worker.node_id)

        worker.start(peers=cluster.peers)
        wait_until(lambda: worker_row().status == pb.NODE_STATUS_ACTIVE, 30,
                   what="the node active again")  # fmt: skip
        again = client.submit_task(spec).task.id
        result = client.get_task_result(again, wait=True, timeout_ms=30_000)
        assert result.task.state == pb.TASK_STATE_COMPLETED
