"""Bad input gets a clear gRPC status and writes nothing (a write naming an
unknown id at most commits a read barrier to catch up first); a node without the
cluster secret can neither join nor inject entries."""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from datetime import timedelta

import grpc
import pytest

from cortex.api.auth import peer_metadata
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.internal.v1 import peer_pb2_grpc as peer_grpc
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.cluster import SECRET, shell_spec, wait_until

pytestmark = pytest.mark.cluster


def _code_and_message(stub_call, request):
    with pytest.raises(grpc.RpcError) as caught:
        stub_call(request, timeout=15)
    return caught.value.code(), caught.value.details()


def test_bad_requests_get_clear_status_and_write_nothing(make_cluster):
    cluster = make_cluster(3)
    node = cluster.nodes[1]
    before = cluster.wait_converged()
    channel = grpc.insecure_channel(node.grpc)
    stub = pb_grpc.CortexServiceStub(channel)
    joins = peer_grpc.JoinServiceStub(channel)
    credential = peer_metadata(SECRET)
    join = functools.partial(joins.JoinCluster, metadata=credential)
    nonce = joins.JoinChallenge(
        peer_pb.JoinChallengeRequest(), metadata=credential, timeout=5
    ).nonce
    cases = [
        (stub.SubmitTask, pb.SubmitTaskRequest(), grpc.StatusCode.INVALID_ARGUMENT, "spec"),
        (stub.SubmitTask, pb.SubmitTaskRequest(spec=pb.TaskSpec()), grpc.StatusCode.INVALID_ARGUMENT, "command"),
        (stub.SubmitTask, pb.SubmitTaskRequest(spec=shell_spec("   ")), grpc.StatusCode.INVALID_ARGUMENT, "command is empty"),
        (stub.SubmitTask, pb.SubmitTaskRequest(spec=shell_spec(["echo"], priority=11)), grpc.StatusCode.INVALID_ARGUMENT, "priority"),
        (stub.SubmitTask, pb.SubmitTaskRequest(spec=shell_spec(["echo"], type="rocket")), grpc.StatusCode.INVALID_ARGUMENT, "type"),
        (stub.SubmitTask, pb.SubmitTaskRequest(spec=shell_spec(["echo"], timeout=timedelta(seconds=-5))), grpc.StatusCode.INVALID_ARGUMENT, "timeout"),
        (stub.SubmitTask, pb.SubmitTaskRequest(spec=shell_spec(["echo"], options={"nope": 1})), grpc.StatusCode.INVALID_ARGUMENT, "options.nope"),
        (stub.SubmitTask, pb.SubmitTaskRequest(spec=shell_spec(["echo"], env={"BIG": "x" * (1024 * 1024 + 10)})), grpc.StatusCode.INVALID_ARGUMENT, "over the limit"),
        (stub.SubmitTask, pb.SubmitTaskRequest(spec=shell_spec(["echo"]), idempotency_key="k" * 300), grpc.StatusCode.INVALID_ARGUMENT, "idempotency_key"),
        (stub.GetTask, pb.GetTaskRequest(task_id="no-such-task"), grpc.StatusCode.NOT_FOUND, "no-such-task"),
        (stub.GetTask, pb.GetTaskRequest(task_id=""), grpc.StatusCode.INVALID_ARGUMENT, "task_id"),
        (stub.GetTaskResult, pb.GetTaskResultRequest(task_id="nope", wait=True, timeout=timedelta(milliseconds=100)), grpc.StatusCode.NOT_FOUND, "nope"),
        (stub.GetTaskResult, pb.GetTaskResultRequest(task_id="nope", wait=True, timeout=timedelta(hours=1)), grpc.StatusCode.INVALID_ARGUMENT, "timeout"),
        (stub.CancelTask, pb.CancelTaskRequest(task_id="nope"), grpc.StatusCode.NOT_FOUND, "nope"),
        (stub.ListTasks, pb.ListTasksRequest(states=[pb.TASK_STATE_UNSPECIFIED]), grpc.StatusCode.INVALID_ARGUMENT, "states"),
        (stub.ListTasks, pb.ListTasksRequest(states=[42]), grpc.StatusCode.INVALID_ARGUMENT, "states"),
        (stub.ListTasks, pb.ListTasksRequest(page_token="abc"), grpc.StatusCode.INVALID_ARGUMENT, "page_token"),
        (stub.ListTasks, pb.ListTasksRequest(page_size=-1), grpc.StatusCode.INVALID_ARGUMENT, "page_size"),
        (stub.GetTask, pb.GetTaskRequest(task_id="x", read_options=pb.ReadOptions(min_index=-1)), grpc.StatusCode.INVALID_ARGUMENT, "min_index"),
        (joins.JoinChallenge, peer_pb.JoinChallengeRequest(), grpc.StatusCode.UNAUTHENTICATED, "peer credential"),
        (join, peer_pb.JoinClusterRequest(node_id="x", raft_address="127.0.0.1:1", proof="00"), grpc.StatusCode.UNAUTHENTICATED, "challenge"),
        (join, peer_pb.JoinClusterRequest(node_id="x", raft_address="127.0.0.1:1", nonce=nonce, proof="00"), grpc.StatusCode.UNAUTHENTICATED, "secret"),
    ]  # fmt: skip
    for call, request, expected_code, fragment in cases:
        code, message = _code_and_message(call, request)
        assert code == expected_code, (request, code, message)
        assert fragment in message, (fragment, message)
    digest, index = cluster.wait_converged()
    assert digest == before[0], "a rejected request changed the state"
    # The cancel naming no task catches up with the leader before answering
    # NOT_FOUND: one read barrier, which changes no state. Nothing else
    # reached the log.
    assert index - before[1] <= 1, "a rejected request reached the log"
    channel.close()


def test_request_to_node_without_quorum_is_unavailable_not_a_hang(make_cluster):
    cluster = make_cluster(3)
    lonely = cluster.followers()[0]
    for node in cluster.nodes:
        if node is not lonely:
            node.kill9()
    with lonely.client(timeout_s=20) as client:
        started = time.monotonic()
        with pytest.raises(Exception) as caught:
            client.submit_task(shell_spec(["echo", "no quorum"]))
        assert time.monotonic() - started < 15
    assert type(caught.value).__name__ == "Unavailable"
    assert "quorum" in str(caught.value) or "leader" in str(caught.value)


def test_node_with_wrong_or_missing_secret_cannot_join_or_inject(make_cluster, tmp_path):
    cluster = make_cluster(3)
    digest, applied = cluster.wait_converged()
    term = cluster.nodes[0].status().term
    members = sorted(n.raft for n in cluster.nodes)

    missing = subprocess.run(
        [sys.executable, "-m", "cortex.cli.main", "node", "start", "--data-dir", str(tmp_path / "m"),
         "--peers", ",".join(members)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert missing.returncode == 1 and "secret" in missing.stderr

    joiner = cluster.add_node()
    joiner.start(join=cluster.nodes[0].grpc, secret="not-the-cluster-secret")
    wait_until(lambda: not joiner.alive, 60, what="refused joiner to exit")
    assert "secret" in joiner.log_text()

    rogue = cluster.add_node()
    rogue.start(peers=[*members, rogue.raft], secret="also-the-wrong-secret")
    wait_until(lambda: rogue.alive and rogue.status().node_id == rogue.node_id, 30, what="rogue up")
    with rogue.client(timeout_s=15) as client:
        with pytest.raises(Exception) as caught:
            client.submit_task(shell_spec(["echo", "injected"]))
        assert type(caught.value).__name__ == "Unavailable"
    assert not rogue.status().leader_raft_address
    for node in cluster.nodes[:3]:
        status = node.status()
        assert sorted(n.raft_address for n in status.nodes) == members
        assert status.term == term
    assert cluster.wait_converged(cluster.nodes[:3]) == (digest, applied)
