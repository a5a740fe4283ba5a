"""A node whose disk fills up stops without recording anything it could not
apply, the others carry on, and once it has room again it catches up to the
same state: a local fault never becomes replicated state."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.errors import CortexError
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import ClusterNode, shell_spec, wait_until

pytestmark = pytest.mark.cluster

SMALL = "40m"
ROOMY = "600m"


def _can_mount() -> str | None:
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root (CI runs as root)"
    if shutil.which("mount") is None:
        return "no mount command"
    return None


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    why = _can_mount()
    if why:
        pytest.skip(why)
    mountpoint = tmp_path / "small-disk"
    mountpoint.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL},mode=0700", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def _applied_index(node: ClusterNode) -> int:
    conn = sqlite3.connect(f"file:{node.data_dir / 'state.db'}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM raft_meta WHERE key = 'applied_index'").fetchone()
        rejected = conn.execute(
            "SELECT detail FROM task_events WHERE event = 'rejected'"
        ).fetchall()
    finally:
        conn.close()
    for (detail,) in rejected:
        assert "full" not in (detail or "") and "disk" not in (detail or ""), detail
    return int(row[0])


def test_a_full_disk_stops_that_node_and_it_catches_up_after(make_cluster, small_disk):
    cluster = make_cluster(3, start=False)
    victim = cluster.nodes[2]
    victim.log_file = victim.log_path
    victim.data_dir = small_disk / victim.node_id
    cluster.start()
    cluster.wait_ready()
    others = [n for n in cluster.nodes if n is not victim]
    padding = "x" * 900_000
    submitted: list[str] = []
    with others[0].client() as client:
        for number in range(150):
            if not victim.alive:
                break
            spec = shell_spec(["true"], type="noop", env={"PAD": padding, "N": str(number)})
            try:
                submitted.append(client.submit_task(spec).task.id)
            except CortexError:
                # The full node may have been the leader; the others elect one.
                wait_until(lambda: others[0].status().leader_raft_address, 30, what="a new leader")
        wait_until(lambda: not victim.alive, 60, what="the node with the full disk to stop")
    assert victim.process is not None and victim.process.returncode not in (0, None)
    log = victim.log_text()
    assert "Stopping this node" in log, log[-3000:]
    assert "No space left on device" in log or "database or disk is full" in log, log[-3000:]
    print(next(line for line in log.splitlines() if "Stopping this node" in line))
    stopped_at = _applied_index(victim)
    assert stopped_at > 0

    # The other two keep accepting and completing work. When the stopped
    # node led, a submit may meet the election (not committed, leader
    # changed): retried under its idempotency key, as a client does.
    with others[0].client() as client:
        ids = [
            wait_until(
                lambda i=i: (
                    client.submit_task(
                        shell_spec(["echo", f"after {i}"]), f"full-disk-after-{i}"
                    ).task.id
                ),
                60,
                what=f"submit {i} accepted by the two nodes left",
            )
            for i in range(3)
        ]
        for task_id in ids:
            done = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            assert done.state == pb.TASK_STATE_COMPLETED, done
        for task_id in submitted:
            assert client.get_task(task_id).task.state in (
                pb.TASK_STATE_QUEUED, pb.TASK_STATE_ASSIGNED, pb.TASK_STATE_RUNNING,
                pb.TASK_STATE_COMPLETED,
            )  # fmt: skip

    subprocess.run(["mount", "-o", f"remount,size={ROOMY}", str(small_disk)], check=True)
    victim.start(peers=cluster.peers)
    cluster.wait_converged(timeout=120)
    assert _applied_index(victim) >= stopped_at
    with victim.client() as client:
        for number, task_id in enumerate(submitted):
            assert client.get_task(task_id).task.spec.env["N"] == str(number)
