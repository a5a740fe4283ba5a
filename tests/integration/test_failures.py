"""Surviving failures on real clusters: dead nodes, failing tasks, leader
loss, drains, cancels, zombies and timeouts. The failure timeout is
shortened to keep the tests quick."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter

import pytest

from cortex.errors import FailedPrecondition
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, completion_counts, pid_alive, shell_spec, wait_until

pytestmark = pytest.mark.cluster

FAST = ["--failure-timeout", "3", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]


def _fast_cluster(make_cluster, size: int = 3) -> Cluster:
    return make_cluster(size, extra_args=FAST)


def _events(client, task_id: str) -> list[pb.TaskEvent]:
    return list(client.get_task(task_id, include_events=True).events)


def _node(cluster: Cluster, node_id: str):
    return next(n for n in cluster.nodes if n.node_id == node_id)


def _wait_running(client, task_id: str, timeout: float = 30) -> pb.Task:
    return wait_until(lambda: (t := client.get_task(task_id)).state == "running" and t, timeout,
                      what=f"task {task_id} running")  # fmt: skip


def test_killed_worker_task_is_retried_elsewhere_with_backoff(make_cluster, tmp_path):
    cluster = _fast_cluster(make_cluster)
    leader = cluster.leader()
    victim = cluster.followers()[0]
    marker = tmp_path / "attempts"
    command = f'echo "$CORTEX_ATTEMPT $CORTEX_NODE_ID" >> {marker}; sleep 2; echo finished'
    spec = shell_spec(command, constraints=pb.Constraints(forbidden_nodes=[leader.node_id]),
                      retry_policy=pb.RetryPolicy(backoff_ms=500))  # fmt: skip
    with leader.client() as client:
        # Pin the first attempt to the victim by cordoning the other follower.
        other = next(n for n in cluster.followers() if n is not victim)
        client.cordon_node(other.node_id)
        task_id = client.submit_task(spec).task_id
        task = _wait_running(client, task_id)
        assert task.node == victim.node_id
        client.uncordon_node(other.node_id)
        victim.kill9()
        done = client.get_task_result(task_id, wait=True, timeout_ms=60_000)
        assert done.state == "completed", done
        assert done.attempt == 2 and done.node == other.node_id
        assert done.result.stdout.decode().strip() == "finished"
        events = _events(client, task_id)
    retried = [ev for ev in events if ev.event == "retried"]
    assert len(retried) == 1
    detail = json.loads(retried[0].detail_json)
    assert detail["delay_ms"] == 500 and "silent" in detail["reason"]
    assigned = [ev for ev in events if ev.event == "assigned"]
    assert [ev.attempt for ev in assigned] == [1, 2]
    assert assigned[1].ts_ms - retried[0].ts_ms >= 500
    assert [ev.event for ev in events].count("completed") == 1


def test_always_failing_task_backs_off_then_dead_letters_and_can_be_retried(make_cluster):
    cluster = _fast_cluster(make_cluster)
    spec = shell_spec("exit 7", retry_policy=pb.RetryPolicy(max_retries=3, backoff_ms=400))
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(spec).task_id
        task = client.get_task_result(task_id, wait=True, timeout_ms=60_000)
        assert task.state == "dead_letter" and task.result.exit_code == 7
        events = _events(client, task_id)
        retried = [ev for ev in events if ev.event == "retried"]
        assert [json.loads(ev.detail_json)["delay_ms"] for ev in retried] == [400, 800, 1600]
        assigned = [ev for ev in events if ev.event == "assigned"]
        assert [ev.attempt for ev in assigned] == [1, 2, 3, 4]
        for retry, next_assign, expected in zip(
            retried, assigned[1:], [400, 800, 1600], strict=True
        ):
            gap = next_assign.ts_ms - retry.ts_ms
            assert expected <= gap <= expected + 1500, (expected, gap)
        assert task_id in [t.id for t in client.list_dead_letter_tasks().tasks]

        with pytest.raises(FailedPrecondition):
            client.retry_dead_letter_task(client.submit_task(shell_spec(["true"])).task_id)
        again = client.retry_dead_letter_task(task_id)
        assert again.state in ("queued", "assigned", "running")
        wait_until(
            lambda: client.get_task(task_id).attempt >= 5, 30, what="the retried task to run"
        )
        final = client.get_task_result(task_id, wait=True, timeout_ms=60_000)
        assert final.state == "dead_letter" and final.attempt == 8


def test_leader_killed_with_100_tasks_in_flight_all_complete_exactly_once(make_cluster):
    cluster = _fast_cluster(make_cluster)
    leader = cluster.leader()
    followers = cluster.followers()
    clients = [n.client() for n in followers]
    ids = []
    for i in range(100):
        spec = shell_spec(["sh", "-c", f"sleep 0.{i % 10}; echo {i}"])
        ids.append(clients[i % 2].submit_task(spec, idempotency_key=f"lk-{i}").task_id)
    leader.kill9()
    with followers[0].client(timeout_s=60) as client:
        for task_id in ids:
            task = client.get_task_result(task_id, wait=True, timeout_ms=90_000)
            assert task.state == "completed", (task_id, task.state)
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
        running = client.submit_task(shell_spec("sleep 2; echo done", constraints=pinned)).task_id
        _wait_running(client, running)
        # Work submitted during the drain goes elsewhere; work pinned to the
        # draining node waits until it is uncordoned.
        node = client.drain_node(target.node_id, deadline_ms=60_000)
        assert node.status == "draining"
        movable = [client.submit_task(shell_spec(["echo", "moved"])).task_id for _ in range(10)]
        stuck = client.submit_task(shell_spec(["echo", "pinned"], constraints=pinned)).task_id
        for task_id in movable:
            task = client.get_task_result(task_id, wait=True, timeout_ms=30_000)
            assert task.state == "completed" and task.node != target.node_id
        first = client.get_task_result(running, wait=True, timeout_ms=30_000)
        assert first.state == "completed" and first.node == target.node_id and first.attempt == 1
        reasons = wait_until(lambda: list(client.get_task(stuck).pending_reasons), 15)
        assert any("draining" in r for r in reasons), reasons
        assert client.get_task(stuck).state == "queued"
        client.uncordon_node(target.node_id)
        after = client.get_task_result(stuck, wait=True, timeout_ms=30_000)
        assert after.state == "completed" and after.node == target.node_id


def test_drain_deadline_requeues_running_task_without_spending_a_retry(make_cluster):
    cluster = _fast_cluster(make_cluster)
    target = cluster.followers()[0]
    with cluster.nodes[0].client() as client:
        blocker = client.submit_task(shell_spec("sleep 30", constraints=pb.Constraints(
            target_node=target.node_id))).task_id  # fmt: skip
        _wait_running(client, blocker)
        client.drain_node(target.node_id, deadline_ms=1_000)
        wait_until(lambda: client.get_task(blocker).state != "running", 20, what="drain deadline")
        moved = client.get_task(blocker, include_events=True)
        assert moved.state == "queued"
        requeued = [ev for ev in moved.events if ev.event == "requeued"]
        assert requeued and "draining" in json.loads(requeued[0].detail_json)["reason"]
        retried = [ev for ev in moved.events if ev.event == "retried"]
        assert not retried, "a drain must not spend a retry"
        client.cancel_task(blocker)


def test_cancel_running_task_kills_its_process_group(make_cluster, tmp_path):
    cluster = _fast_cluster(make_cluster)
    pid_file = tmp_path / "pids"
    command = f"sleep 600 & echo $! >> {pid_file}; echo $$ >> {pid_file}; wait"
    with cluster.nodes[1].client() as client:
        task_id = client.submit_task(shell_spec(command)).task_id
        _wait_running(client, task_id)
        pids = wait_until(lambda: pid_file.exists() and len(pid_file.read_text().split()) == 2
                          and [int(p) for p in pid_file.read_text().split()], 20)  # fmt: skip
        assert all(pid_alive(p) for p in pids)
        cancelled = client.cancel_task(task_id)
        assert cancelled.state == "cancelled"
    wait_until(lambda: not any(pid_alive(p) for p in pids), 2.0, interval=0.05,
               what="the task's processes to die")  # fmt: skip
    for node in cluster.nodes:
        with node.client() as client:
            wait_until(lambda c=client: c.get_task(task_id).state == "cancelled", 10)


def test_cancelled_queued_task_never_starts(make_cluster, tmp_path):
    cluster = _fast_cluster(make_cluster)
    marker = tmp_path / "ran"
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(shell_spec(f"touch {marker}", constraints=pb.Constraints(
            node_labels=["nowhere"]))).task_id  # fmt: skip
        assert client.cancel_task(task_id).state == "cancelled"
        sentinel = client.submit_task(shell_spec(["true"])).task_id
        assert client.get_task_result(sentinel, wait=True, timeout_ms=30_000).state == "completed"
        assert client.get_task(task_id).state == "cancelled"
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
        assert client.cordon_node(other.node_id).status == "cordoned"
        task_id = client.submit_task(shell_spec(command, constraints=pb.Constraints(
            forbidden_nodes=[leader.node_id]), retry_policy=pb.RetryPolicy(backoff_ms=100))).task_id  # fmt: skip
        task = _wait_running(client, task_id)
        assert task.node == zombie.node_id
        client.uncordon_node(other.node_id)
        zombie_pid = int(wait_until(lambda: (tmp_path / "pid.1").exists()
                                    and (tmp_path / "pid.1").read_text().strip(), 10))  # fmt: skip
        os.kill(zombie.process.pid, signal.SIGSTOP)
        try:
            done = client.get_task_result(task_id, wait=True, timeout_ms=60_000)
            assert done.state == "completed" and done.attempt == 2 and done.node == other.node_id
        finally:
            os.kill(zombie.process.pid, signal.SIGCONT)
        assert done.result.stdout == b"attempt 2\n"
        assert pid_alive(zombie_pid), "the paused node's attempt should still be running"
        cluster.wait_converged(timeout=60)
        wait_until(lambda: not pid_alive(zombie_pid), 15, what="the zombie attempt killed")
        final = client.get_task(task_id, include_events=True)
    assert final.state == "completed" and final.result.stdout == b"attempt 2\n"
    assert [ev.event for ev in final.events].count("completed") == 1
    # A report the zombie may still have sent was fenced off, not applied.
    assert not any(ev.event == "attempt_failed" and ev.attempt == 1 for ev in final.events)


def test_task_over_timeout_is_killed_and_retried(make_cluster):
    cluster = _fast_cluster(make_cluster)
    spec = shell_spec(
        ["sleep", "30"], timeout_ms=500, retry_policy=pb.RetryPolicy(max_retries=1, backoff_ms=100)
    )
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(spec).task_id
        task = client.get_task_result(task_id, wait=True, timeout_ms=30_000)
        assert task.state == "dead_letter" and task.attempt == 2
        assert task.result.timed_out
        events = _events(client, task_id)
    failures = [
        json.loads(ev.detail_json)["reason"] for ev in events if ev.event == "attempt_failed"
    ]
    assert failures == ["timed out after 500 ms"] * 2
    assert Counter(ev.event for ev in events)["retried"] == 1


def test_graceful_shutdown_drains_the_node_and_a_restart_makes_it_active(make_cluster):
    cluster = make_cluster(3, extra_args=[*FAST[:-2], "--shutdown-drain", "30"])
    leader = cluster.leader()
    worker = cluster.followers()[0]
    with leader.client() as client:
        spec = shell_spec(
            "sleep 2; echo done", constraints=pb.Constraints(target_node=worker.node_id)
        )
        task_id = client.submit_task(spec).task_id
        _wait_running(client, task_id)
        worker.stop(timeout=40)  # SIGTERM: the running task may finish first

        def worker_row() -> pb.NodeInfo:
            return next(n for n in client.list_nodes().nodes if n.node_id == worker.node_id)

        assert (worker_row().status, worker_row().status_reason) == (
            "draining", "graceful shutdown",
        )  # fmt: skip
        task = client.get_task_result(task_id, wait=True, timeout_ms=30_000)
        assert (task.state, task.node) == ("completed", worker.node_id)

        worker.start(peers=cluster.peers)
        wait_until(lambda: worker_row().status == "active", 30, what="the node active again")
        again = client.submit_task(spec).task_id
        assert client.get_task_result(again, wait=True, timeout_ms=30_000).state == "completed"
