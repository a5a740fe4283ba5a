"""Listening on one address and being reached at another (`--advertise`), as
a node on 0.0.0.0 must be. Here every node listens on 127.0.0.1 and is
reached as `localhost`, so the test binds nothing beyond loopback."""

from __future__ import annotations

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, shell_spec, wait_until

pytestmark = pytest.mark.cluster

FAST = ["--failure-timeout", "3", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]


def _port(address: str) -> str:
    return address.rpartition(":")[2]


def test_nodes_reach_each_other_at_their_advertised_addresses(make_cluster):
    cluster: Cluster = make_cluster(3, extra_args=[*FAST, "--advertise", "localhost"], start=False)
    # The same peer list on every node, in the advertised form, itself included.
    peers = [f"localhost:{_port(n.raft)}" for n in cluster.nodes]
    for node in cluster.nodes:
        node.start(peers=peers)
    cluster.wait_ready()

    with cluster.nodes[0].client() as client:
        status = client.get_cluster_status()
        assert status.leader_raft_address.startswith("localhost:")
        listed = {n.id: (n.raft_address, n.grpc_address) for n in status.nodes}
        assert listed == {
            n.node_id: (f"localhost:{_port(n.raft)}", f"localhost:{_port(n.grpc)}")
            for n in cluster.nodes
        }
        # Heartbeats travel to the advertised gRPC addresses: every node reports.
        wait_until(
            lambda: all(n.HasField("resources") for n in client.list_nodes().nodes),
            30,
            what="resource reports from every node",
        )
        runner = cluster.nodes[2]
        spec = shell_spec(
            "echo from-$CORTEX_NODE_ID", constraints=pb.Constraints(target_node=runner.node_id)
        )
        task_id = client.submit_task(spec).task.id
        task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
        assert (task.state, task.node_id) == (pb.TASK_STATE_COMPLETED, runner.node_id)
        # Output is relayed from the runner through its advertised address.
        chunks = list(client.stream_task_output(task_id, timeout_s=30))
        text = b"".join(c.data.data for c in chunks if c.WhichOneof("kind") == "data")
        assert text == f"from-{runner.node_id}\n".encode()
    cluster.wait_converged()
