"""Clusters serving gRPC over TLS, with certificates made at test time: node
to node traffic (heartbeats, joining, output relays, removal forwarding)
runs over TLS, clients that trust the CA get through (and reach the leader
for their writes with their certificate), and clients that do not are told
TLS or the certificate is why they cannot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from cortex.api.auth import peer_metadata
from cortex.api.client import CortexClient
from cortex.api.tls import client_tls
from cortex.errors import TlsError, Unavailable
from cortex.internal.v1.peer_pb2 import GetAppliedIndexRequest
from cortex.internal.v1.peer_pb2_grpc import PeerServiceStub
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import (
    SECRET,
    Cluster,
    ClusterNode,
    free_ports,
    shell_spec,
    wait_until,
    wait_writes_reach_leader,
)
from tests.tls import write_tls_files

pytestmark = pytest.mark.cluster

FAST = ["--failure-timeout", "5", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]


def _cli(node: ClusterNode, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cortex.cli.main", "--node", node.grpc, *args],
        env=env, capture_output=True, text=True, timeout=90,
    )  # fmt: skip


def _active(client: CortexClient) -> set[str]:
    return {n.id for n in client.list_nodes().nodes if n.status == pb.NODE_STATUS_ACTIVE}


def test_a_tls_cluster_works_end_to_end_and_refuses_clients_that_do_not_fit(
    make_cluster, tmp_path: Path
) -> None:
    files = write_tls_files(tmp_path / "certs")
    cluster: Cluster = make_cluster(3, extra_args=FAST, tls=files)
    n1, n2, n3 = cluster.nodes
    assert "(TLS)" in n1.log_text()

    with n1.client() as client:
        # Resource reports from every node reach n1: heartbeats run over TLS.
        wait_until(lambda: all(n.HasField("resources") for n in client.list_nodes().nodes), 30,
                   what="heartbeats between TLS nodes")  # fmt: skip
        # Pinned to n3 and read through n1: a relay from n3 over TLS.
        spec = shell_spec("echo over-tls", constraints=pb.Constraints(target_node="n3"))
        task_id = client.submit_task(spec).task.id
        task = client.get_task_result(task_id, wait=True, timeout_ms=30_000).task
        assert (task.state, task.node_id) == (pb.TASK_STATE_COMPLETED, "n3")
        chunks = list(client.stream_task_output(task_id, timeout_s=20))
        assert b"".join(c.data.data for c in chunks if c.HasField("data")) == b"over-tls\n"
        assert chunks[-1].end.exit_code == 0

    # The peer listeners serve TLS as well: plain text gets nowhere there.
    with n1.client() as client:
        peer_address = next(n.peer_address for n in client.list_nodes().nodes if n.id == "n2")
    with grpc.insecure_channel(peer_address) as channel:
        with pytest.raises(grpc.RpcError) as plain_peer:
            PeerServiceStub(channel).GetAppliedIndex(
                GetAppliedIndexRequest(), metadata=peer_metadata(SECRET), timeout=10
            )
        assert plain_peer.value.code() == grpc.StatusCode.UNAVAILABLE

    # Clients that do not fit the node's TLS learn why.
    with CortexClient(n2.grpc, timeout_s=10, tls=False) as plain:
        with pytest.raises(Unavailable, match="serving TLS"):
            plain.get_cluster_status()
    stranger = write_tls_files(tmp_path / "stranger")
    with CortexClient(n2.grpc, timeout_s=10, tls=client_tls(str(stranger.ca))) as wrong_ca:
        with pytest.raises(TlsError, match="certificate of the node .* is not trusted"):
            wrong_ca.get_cluster_status()

    # The CLI: --tls-ca, or CORTEX_TLS_CA; without either, a message about TLS.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    by_flag = _cli(n2, "--tls-ca", str(files.ca), "status", "--json", env=env)
    assert by_flag.returncode == 0, by_flag.stderr
    assert json.loads(by_flag.stdout)["leader"]
    by_env = _cli(n3, "task", "submit", "--wait", "--", "echo", "ok",
                  env={**env, "CORTEX_TLS_CA": str(files.ca)})  # fmt: skip
    assert by_env.returncode == 0, by_env.stderr
    refused = _cli(n2, "status", env=env)
    assert refused.returncode == 1 and "TLS" in refused.stderr and "--tls-ca" in refused.stderr
    untrusted = _cli(n2, "--tls-ca", str(stranger.ca), "status", env=env)
    assert untrusted.returncode == 1 and "certificate" in untrusted.stderr

    # A fourth node joins over TLS, then asks to be removed: it passes the
    # request to the leader, over TLS too.
    joiner = cluster.add_node()
    joiner.start(join=n1.grpc)
    with n1.client() as client:
        wait_until(lambda: "n4" in _active(client), 60, what="n4 to join over TLS")
    removed = _cli(joiner, "--tls-ca", str(files.ca), "node", "remove", "n4", "--json", env=env)
    assert removed.returncode == 0, removed.stderr
    assert joiner.raft not in json.loads(removed.stdout)["members"]
    wait_until(lambda: not joiner.alive, 30, what="the removed node to stop")
    with n1.client() as client:
        assert _active(client) == {"n1", "n2", "n3"}


def test_mutual_tls_admits_only_clients_with_a_certificate_of_the_ca(
    make_cluster, tmp_path: Path
) -> None:
    files = write_tls_files(tmp_path / "certs")
    cluster: Cluster = make_cluster(2, extra_args=["--tls-client-auth", *FAST], tls=files)
    n1, n2 = cluster.nodes
    mine = client_tls(str(files.ca), cert=str(files.cert), key=str(files.key))
    with CortexClient(n1.grpc, tls=mine) as client:
        # Each node presents its certificate when it calls the other.
        wait_until(lambda: all(n.HasField("resources") for n in client.list_nodes().nodes), 30,
                   what="heartbeats between mutual-TLS nodes")  # fmt: skip
        spec = shell_spec("echo mutual", constraints=pb.Constraints(target_node="n2"))
        task_id = client.submit_task(spec).task.id
        result = client.get_task_result(task_id, wait=True, timeout_ms=30_000)
        assert result.task.state == pb.TASK_STATE_COMPLETED
        chunks = list(client.stream_task_output(task_id, timeout_s=20))
        assert b"".join(c.data.data for c in chunks if c.HasField("data")) == b"mutual\n"
    # A follower's client routes its writes to the leader over a channel of
    # its own, which presents the client's certificate too.
    leader = cluster.leader()
    with CortexClient(cluster.followers()[0].grpc, tls=mine) as client:
        wait_writes_reach_leader(client, leader, "a write answered by the leader over mutual TLS")
    with CortexClient(n2.grpc, timeout_s=10, tls=client_tls(str(files.ca))) as no_cert:
        with pytest.raises(TlsError, match="client certificates"):
            no_cert.get_cluster_status()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env |= {"CORTEX_TLS_CA": str(files.ca), "CORTEX_TLS_CERT": str(files.cert),
            "CORTEX_TLS_KEY": str(files.key)}  # fmt: skip
    with_cert = _cli(n2, "status", "--json", env=env)
    assert with_cert.returncode == 0, with_cert.stderr


def test_a_node_with_bad_tls_files_refuses_to_start(tmp_path: Path) -> None:
    files = write_tls_files(tmp_path / "certs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    raft, grpc = free_ports(2)
    base = [sys.executable, "-m", "cortex.cli.main", "node", "start",
            "--data-dir", str(tmp_path / "data"), "--raft", f"127.0.0.1:{raft}",
            "--grpc", f"127.0.0.1:{grpc}"]  # fmt: skip
    missing = tmp_path / "missing.pem"
    runs = {
        "config key tls_key: missing": ["--tls-cert", str(files.cert)],
        f"config key tls_cert: cannot read {missing}": [
            "--tls-cert", str(missing), "--tls-key", str(files.key)],
        f"config key tls_key: {files.ca} holds no PEM private key": [
            "--tls-cert", str(files.cert), "--tls-key", str(files.ca)],
    }  # fmt: skip
    for expected, args in runs.items():
        result = subprocess.run([*base, *args], env=env, capture_output=True, text=True,
                                timeout=60)  # fmt: skip
        assert result.returncode == 1, result
        assert expected in result.stderr
