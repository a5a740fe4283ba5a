"""A cluster started with an API token refuses calls without it, on every
node and through every interface, while node-to-node traffic keeps working
and a client's writes routed to the leader carry the token there."""

from __future__ import annotations

import os
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cortex.api.client import CortexClient
from cortex.errors import Unauthenticated
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.cluster import shell_spec, wait_until, wait_writes_reach_leader, write_secret

pytestmark = pytest.mark.cluster

TOKEN = "s3cret-api-token"


def test_calls_need_the_token_and_relays_carry_it(make_cluster):
    cluster = make_cluster(3, api_token=TOKEN)
    node = cluster.nodes[0]
    for token in ("", "wrong-token"):
        with CortexClient(node.grpc, token=token) as client:
            with pytest.raises(Unauthenticated, match="API token"):
                client.submit_task(shell_spec(["touch", "/tmp/should-not-exist"]))
            with pytest.raises(Unauthenticated):
                list(client.stream_task_output("anything", timeout_s=5))
    with grpc.insecure_channel(node.grpc) as channel:
        health_stub = health_pb2_grpc.HealthStub(channel)
        health = health_stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        listed = health_stub.List(health_pb2.HealthListRequest(), timeout=5)
        assert {name: s.status for name, s in listed.statuses.items()} == {
            "": health_pb2.HealthCheckResponse.SERVING,
            "cortex.v1.CortexService": health_pb2.HealthCheckResponse.SERVING,
        }
        # The scheme is case-insensitive: `bearer` and `BEARER` work as `Bearer` does.
        stub = pb_grpc.CortexServiceStub(channel)
        for scheme in ("bearer", "BEARER"):
            status = stub.GetClusterStatus(
                pb.GetClusterStatusRequest(), metadata=[("authorization", f"{scheme} {TOKEN}")],
                timeout=10,
            )  # fmt: skip
            assert status.node_id == node.node_id
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetClusterStatus(pb.GetClusterStatusRequest(),
                                  metadata=[("authorization", f"bearer {TOKEN}x")], timeout=10)  # fmt: skip
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "Traceback" not in node.log_text()  # Health/List used to log one per call

    # With the token: a task pinned to n3, its output read through n1 (a relay
    # that must present the token to n3), while nodes keep heartbeating.
    with CortexClient(node.grpc, token=TOKEN) as client:
        spec = shell_spec("echo relayed", constraints=pb.Constraints(target_node="n3"))
        task_id = client.submit_task(spec).task.id
        result = client.get_task_result(task_id, wait=True, timeout_ms=30_000)
        assert result.task.state == pb.TASK_STATE_COMPLETED
        chunks = list(client.stream_task_output(task_id, timeout_s=20))
        assert b"".join(c.data.data for c in chunks if c.HasField("data")) == b"relayed\n"
        assert chunks[-1].end.exit_code == 0
        wait_until(lambda: all(n.HasField("resources") for n in client.list_nodes().nodes), 30,
                   what="resource reports between nodes")  # fmt: skip

    # A follower's client routes its writes to the leader, token and all.
    leader = cluster.leader()
    follower = cluster.followers()[0]
    with CortexClient(follower.grpc, token=TOKEN) as client:
        wait_writes_reach_leader(client, leader, "a write answered by the leader with the token")


def test_cli_takes_the_token_from_the_environment_a_file_or_flag(make_cluster, tmp_path):
    cluster = make_cluster(1, api_token=TOKEN)
    base = [sys.executable, "-m", "cortex.cli.main", "--node", cluster.nodes[0].grpc]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    refused = subprocess.run([*base, "status"], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "API token" in refused.stderr
    by_env = subprocess.run([*base, "status", "--json"], env={**env, "CORTEX_API_TOKEN": TOKEN},
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert by_env.returncode == 0, by_env.stderr
    by_flag = subprocess.run([*base[:3], "--token", TOKEN, *base[3:], "task", "submit", "--wait",
                              "--", "echo", "ok"], env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert by_flag.returncode == 0, by_flag.stderr
    token_file = write_secret(tmp_path / "client-token", TOKEN)
    by_file = subprocess.run([*base[:3], "--token-file", str(token_file), *base[3:], "status"],
                             env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert by_file.returncode == 0, by_file.stderr
    by_file_env = subprocess.run([*base, "status"], env={**env, "CORTEX_API_TOKEN_FILE": str(token_file)},
                                 capture_output=True, text=True, timeout=60)  # fmt: skip
    assert by_file_env.returncode == 0, by_file_env.stderr
    missing = subprocess.run([*base[:3], "--token-file", str(tmp_path / "absent"), *base[3:],
                              "status"], env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"cortex: --token-file: cannot read {tmp_path / 'absent'}: No such file or directory"
    ]
