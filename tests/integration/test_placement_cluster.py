"""Resource-aware placement on a real heterogeneous cluster, modelled on one
machine with declared labels and resources."""

from __future__ import annotations

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, shell_spec, wait_until

pytestmark = pytest.mark.cluster

HEARTBEAT = ["--heartbeat-interval", "0.5"]


def _heterogeneous(make_cluster) -> Cluster:
    cluster = make_cluster(3, start=False)
    n1, n2, n3 = cluster.nodes
    n1.extra_args += [*HEARTBEAT, "--label", "zone=a", "--resource", "memory_mb=2048"]
    n2.extra_args += [*HEARTBEAT, "--label", "zone=b", "--resource", "gpu=TestGPU:8000",
                      "--resource", "memory_mb=2048"]  # fmt: skip
    n3.extra_args += [*HEARTBEAT, "--label", "zone=a", "--label", "ssd", "--resource", "memory_mb=8192",
                      "--capability", "arch=arm64"]  # fmt: skip
    cluster.start()
    cluster.wait_ready()
    for node in cluster.nodes:
        with node.client() as client:
            wait_until(lambda: all(n.HasField("resources") for n in client.list_nodes().nodes), 30,
                       what=f"resource reports from every node on {node.node_id}")  # fmt: skip
    return cluster


def _spec(**constraints) -> pb.TaskSpec:
    return shell_spec(["echo", "placed"], constraints=pb.Constraints(**constraints))


def test_constrained_tasks_land_only_on_matching_nodes_and_unsatisfiable_waits(make_cluster):
    cluster = _heterogeneous(make_cluster)
    cases = {
        "zone b": (_spec(node_labels=["zone=b"]), {"n2"}),
        "gpu": (_spec(requires_gpu=True), {"n2"}),
        "memory": (_spec(min_memory_mb=4096), {"n3"}),
        "bare label": (_spec(node_labels=["ssd"]), {"n3"}),
        "capability": (_spec(requires_capabilities={"arch": "arm64"}), {"n3"}),
        "target": (_spec(target_node="n1"), {"n1"}),
        "allowed": (_spec(allowed_nodes=["n1", "n2"], forbidden_nodes=["n2"]), {"n1"}),
        "zone a": (_spec(node_labels=["zone=a"]), {"n1", "n3"}),
    }
    with cluster.nodes[0].client() as client:
        submitted = {name: [client.submit_task(spec).task.id for _ in range(4)]
                     for name, (spec, _) in cases.items()}  # fmt: skip
        for name, ids in submitted.items():
            for task_id in ids:
                task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
                assert task.state == pb.TASK_STATE_COMPLETED, (
                    name, task.state, list(task.pending_reasons)
                )  # fmt: skip
                assert task.node_id in cases[name][1], (name, task.node_id)

        stuck = client.submit_task(_spec(node_labels=["zone=c"], min_memory_mb=1024)).task.id

        def explained() -> list[str] | None:
            # Reasons are worked out afresh on every call; a node whose
            # heartbeat is late on a loaded machine shows as unreachable first.
            reasons = list(client.get_task(stuck).task.pending_reasons)
            labels = [r for r in reasons if "missing labels zone=c" in r]
            return reasons if len(labels) == len(reasons) == 3 else None

        reasons = wait_until(explained, 30, what="the label reason from every node")
        assert client.get_task(stuck).task.state == pb.TASK_STATE_QUEUED
        assert {r.split(":")[0] for r in reasons} == {"n1", "n2", "n3"}

        newcomer = cluster.add_node(extra_args=[*HEARTBEAT, "--label", "zone=c"])
        newcomer.start(join=cluster.nodes[0].grpc)
        task = client.get_task_result(stuck, wait=True, timeout_ms=90_000).task
        assert task.state == pb.TASK_STATE_COMPLETED and task.node_id == newcomer.node_id


def test_memory_reason_names_the_figures(make_cluster):
    cluster = _heterogeneous(make_cluster)
    with cluster.nodes[1].client() as client:
        task_id = client.submit_task(_spec(min_memory_mb=100_000)).task.id
        reasons = wait_until(lambda: list(client.get_task(task_id).task.pending_reasons), 30)
        assert "n1: minMemoryMb 100000 > available 2048" in reasons
        assert "n3: minMemoryMb 100000 > available 8192" in reasons
        nodes = {n.id: n for n in client.list_nodes().nodes}
        assert "memory_total_mb" in nodes["n1"].resources.declared
        assert nodes["n2"].resources.gpu.name == "TestGPU"
        assert "cpu_usage_percent" not in nodes["n1"].resources.declared
