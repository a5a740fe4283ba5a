"""Schedules, limits per key and fair shares on real three-node clusters
(separate processes over loopback TCP):

- an `every 1s` schedule fires each slot exactly once while its leader is
  killed with `kill -9` twice (the killed node restarting from its snapshot
  and journal), at most one slot late per leader change, and the nodes end
  with equal digests;
- after the whole cluster stops for longer than the catch-up window, the
  slots inside the window fire once each and the older ones are recorded
  as missed;
- `max-running 2` never lets more than two of eight `sleep 1` tasks overlap,
  and a rate of 5/s spreads twenty starts over at least 3.6 s."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import ClusterNode, shell_spec, wait_until

COMPACTING = ["--compaction-min-entries", "50"]
SCHEDULED_TIME = "CORTEX_SCHEDULED_TIME"


def ms(stamp: object) -> int:
    return int(stamp.ToMilliseconds())  # type: ignore[attr-defined]


def all_tasks(node: ClusterNode) -> list[pb.Task]:
    tasks: list[pb.Task] = []
    token = ""
    with node.client() as client:
        while True:
            page = client.list_tasks(
                page_size=500, page_token=token, order=pb.LIST_ORDER_OLDEST_FIRST
            )
            tasks.extend(page.tasks)
            token = page.next_page_token
            if not token:
                return tasks


def slot_of(task: pb.Task) -> int:
    text = task.spec.env[SCHEDULED_TIME]
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def sleep_until(moment_ms: int) -> None:
    """Waits for a wall-clock moment (the schedule's, not a stand-in for an event)."""
    delay = moment_ms / 1000 - time.time()
    if delay > 0:
        time.sleep(delay)


def scheduled(node: ClusterNode) -> list[pb.Task]:
    return [t for t in all_tasks(node) if SCHEDULED_TIME in t.spec.env]


def test_every_slot_fires_once_while_the_leader_is_killed_twice(make_cluster):
    cluster = make_cluster(3, extra_args=COMPACTING)
    with cluster.leader().client() as client:
        created = client.create_schedule(
            "tick", every=timedelta(seconds=1), task=shell_spec([], type="noop"),
            overlap="allow_all",
        ).schedule  # fmt: skip
    anchor = ms(created.create_time)
    changes = []
    for kill_at in (anchor + 6_100, anchor + 12_100):
        # Just after a slot, so the next one falls due while nobody leads.
        sleep_until(kill_at)
        victim = cluster.leader()
        victim.kill9()
        survivor = next(n for n in cluster.nodes if n.alive)
        new_leader = wait_until(
            lambda: next((n for n in cluster.nodes if n.alive
                          and n.status().raft_role == pb.RAFT_ROLE_LEADER), None),
            30, what="a new leader",
        )  # fmt: skip
        changes.append((victim.node_id, new_leader.node_id))
        victim.start(peers=cluster.peers)
        cluster.wait_ready(timeout=60)
        assert survivor.alive
    sleep_until(anchor + 20_500)
    with cluster.leader().client() as client:
        paused = client.pause_schedule("tick").schedule
    last_slot = ms(paused.last_slot)
    assert last_slot >= anchor + 20_000
    cluster.wait_converged(timeout=60)
    tasks = scheduled(cluster.nodes[0])
    slots = sorted(slot_of(t) for t in tasks)
    expected = list(range(anchor + 1_000, last_slot + 1, 1_000))
    # Exactly once each: no duplicate scheduled time, none lost.
    assert slots == expected, (changes, sorted(set(expected) - set(slots)))
    late = [slot_of(t) for t in tasks if ms(t.create_time) - slot_of(t) > 1_000]
    print(f"slots {len(slots)}, leader changes {changes}, late {[s - anchor for s in late]}")
    assert len(late) <= len(changes)
    # Every node agrees, snapshots and restarts included.
    digests = {n.status().state_digest for n in cluster.nodes}
    assert len(digests) == 1
    assert any("snapshot written" in n.log_text() for n in cluster.nodes)


def test_a_full_cluster_stop_fires_what_the_window_holds_and_records_the_rest(make_cluster):
    cluster = make_cluster(3)
    with cluster.leader().client() as client:
        created = client.create_schedule(
            "catch-up", every=timedelta(seconds=1), task=shell_spec([], type="noop"),
            overlap="allow_all", catchup_window=timedelta(seconds=3),
        ).schedule  # fmt: skip
    anchor = ms(created.create_time)
    wait_until(lambda: len(scheduled(cluster.nodes[0])) >= 2, 30, what="two firings")
    for node in cluster.nodes:
        node.kill9()
    stopped_at = int(time.time() * 1000)
    sleep_until(stopped_at + 5_000)
    cluster.start()
    cluster.wait_ready(timeout=60)
    restarted_at = int(time.time() * 1000)
    leader = cluster.leader()

    def caught_up() -> pb.Schedule | None:
        with leader.client() as client:
            view = client.get_schedule("catch-up").schedule
        return view if ms(view.last_slot) >= restarted_at else None

    view = wait_until(caught_up, 30, what="the schedule to catch up")
    with leader.client() as client:
        view = client.pause_schedule("catch-up").schedule
    tasks = scheduled(leader)
    fired = sorted(slot_of(t) for t in tasks)
    missed: list[int] = []
    for firing in view.recent:
        if firing.action == pb.SCHEDULE_FIRING_ACTION_MISSED:
            first, last = ms(firing.first_slot), ms(firing.slot)
            missed.extend(range(first, last + 1, 1_000))
            assert firing.count == (last - first) // 1_000 + 1
    # Each slot once: fired or recorded missed, never both, none forgotten.
    assert len(fired) == len(set(fired)) and not set(fired) & set(missed)
    assert sorted(fired + missed) == list(range(anchor + 1_000, ms(view.last_slot) + 1, 1_000))
    assert missed and view.missed == len(missed)
    # Every slot fired late was inside the 3 s window when it was decided.
    outage = [t for t in tasks if stopped_at < slot_of(t) < restarted_at]
    assert outage and all(ms(t.create_time) - slot_of(t) <= 3_000 for t in outage)
    assert max(missed) < min(slot_of(t) for t in outage)
    print(f"down {(restarted_at - stopped_at) / 1000:.1f} s: {len(missed)} slots missed,"
          f" {len(outage)} fired late within the window")  # fmt: skip


def intervals(tasks: list[pb.Task]) -> list[tuple[int, int]]:
    return [(ms(t.start_time), ms(t.finish_time)) for t in tasks]


def most_overlapping(spans: list[tuple[int, int]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans])
    best = running = 0
    for _, step in edges:
        running += step
        best = max(best, running)
    return best


def test_max_running_and_rate_hold_cluster_wide(make_cluster):
    cluster = make_cluster(3)
    node = cluster.nodes[1]
    with node.client() as client:
        client.set_limit("deploy", max_running=2)
        ids = [
            client.submit_task(shell_spec(["sleep", "1"], concurrency_key="deploy")).task.id
            for _ in range(8)
        ]
        most = 0

        def done() -> bool:
            nonlocal most
            active = client.list_tasks(
                states=[pb.TASK_STATE_ASSIGNED, pb.TASK_STATE_RUNNING], page_size=100
            ).tasks
            most = max(most, len([t for t in active if t.id in ids]))
            tasks = [client.get_task(i).task for i in ids]
            return all(t.state == pb.TASK_STATE_COMPLETED for t in tasks)

        wait_until(done, 60, interval=0.05, what="eight deploys")
        tasks = [client.get_task(i).task for i in ids]
        assert most <= 2 and most_overlapping(intervals(tasks)) <= 2

        client.set_limit("api", rate_per_minute=300, burst=1)
        ids = [
            client.submit_task(shell_spec([], type="noop", concurrency_key="api")).task.id
            for _ in range(20)
        ]
        wait_until(
            lambda: all(client.get_task(i).task.state == pb.TASK_STATE_COMPLETED for i in ids),
            60, what="twenty rate-limited tasks",
        )  # fmt: skip
        starts = sorted(ms(client.get_task(i).task.start_time) for i in ids)
        print(f"20 starts at 5/s took {(starts[-1] - starts[0]) / 1000:.2f} s")
        assert starts[-1] - starts[0] >= 3_600
        limits = {limit.key: limit for limit in client.list_limits().limits}
        assert limits["deploy"].max_running == 2 and limits["api"].rate_per_minute == 300
    cluster.wait_converged()
