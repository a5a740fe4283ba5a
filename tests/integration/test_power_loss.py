"""A power cut on every node at once, under a stream of submissions: each
node's data dir is rebuilt from what its journal had synced (tests/sync_ledger.py)
with its state database as the crash left it. With `raft_sync` no submission
a client saw acknowledged is lost once the cluster is back; without it the
journals lose entries the databases already applied, and the start-up check
refuses to run on such a data dir."""

from __future__ import annotations

import itertools
import os
import threading

import pytest

from cortex.errors import CortexError
from tests.cluster import Cluster, shell_spec, wait_until
from tests.sync_ledger import LAUNCHER, LEDGER_ENV, rebuild_as_after_power_loss

pytestmark = pytest.mark.cluster


def _ledger_cluster(make_cluster, extra_args: list[str]) -> Cluster:
    cluster = make_cluster(3, extra_args=extra_args, start=False)
    for node in cluster.nodes:
        node.launcher = LAUNCHER
        node.env = {LEDGER_ENV: str(node.data_dir.parent / f"{node.node_id}.ledger")}
    cluster.start()
    cluster.wait_ready()
    return cluster


def _submit_until_power_cut(cluster: Cluster, acked_target: int) -> list[str]:
    """Clients on every node submit until `acked_target` submissions are
    acknowledged, then every node is killed at once while they carry on."""
    acked: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    counter = itertools.count()

    def client_loop(node_index: int) -> None:
        with cluster.nodes[node_index].client(timeout_s=5) as client:
            while not stop.is_set():
                spec = shell_spec(["true"], type="noop", env={"N": str(next(counter))})
                try:
                    task_id = client.submit_task(spec).task.id
                except CortexError:
                    continue
                with lock:
                    acked.append(task_id)

    threads = [threading.Thread(target=client_loop, args=(i % 3,)) for i in range(6)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(acked) >= acked_target, 120, what=f"{acked_target} acknowledged")
    for node in cluster.nodes:  # as close to together as signals get
        assert node.process is not None
        os.kill(node.process.pid, 9)
    for node in cluster.nodes:
        node.kill9()
    stop.set()
    for thread in threads:
        thread.join(30)
    with lock:
        return list(acked)


def _rebuild_all(cluster: Cluster) -> None:
    for node in cluster.nodes:
        rebuild_as_after_power_loss(node.data_dir, node.data_dir.parent / f"{node.node_id}.ledger")


def test_no_acknowledged_submission_is_lost_after_a_power_cut(make_cluster):
    cluster = _ledger_cluster(make_cluster, ["--shutdown-drain", "0"])
    acked = _submit_until_power_cut(cluster, 300)
    _rebuild_all(cluster)
    cluster.start()
    cluster.wait_ready()
    cluster.wait_converged(timeout=120)
    with cluster.nodes[0].client() as client:
        missing = []
        for task_id in acked:
            try:
                client.get_task(task_id)
            except CortexError:
                missing.append(task_id)
    assert missing == [], f"{len(missing)} of {len(acked)} acknowledged submissions lost"


def test_without_raft_sync_the_start_up_check_refuses_the_data_dir(make_cluster):
    cluster = _ledger_cluster(make_cluster, ["--shutdown-drain", "0", "--no-raft-sync"])
    _submit_until_power_cut(cluster, 100)
    _rebuild_all(cluster)
    cluster.start()
    for node in cluster.nodes:
        assert node.process is not None
        node.process.wait(60)
        assert node.process.returncode != 0
        log = node.log_text()
        assert "has applied raft index" in log and "Raft journal ends at 0" in log, log[-2000:]
        assert "--join" in log
