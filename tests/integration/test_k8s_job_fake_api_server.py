"""`k8s_job` tasks on a real 3-node cluster whose node n3 alone is configured
with a Kubernetes cluster: a fake Kubernetes API server (no real one exists
on these machines; see tests/k8s_fake_api_server.py), which n3's executor
reaches through the real `kubernetes` client. Such tasks go to n3 only; the
pod's output and exit code come back through any node; cancel deletes the
Job with its pods; and n3 killed with SIGKILL and restarted within the
failure timeout follows its Job again instead of running the attempt twice."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import struct_pb2

from cortex.errors import FailedPrecondition, InvalidArgument, Unavailable
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, completion_counts, serve_cluster, wait_until

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes package is not installed (pip install 'cortex-engine[k8s]')",
)

from tests.k8s_fake_api_server import FakeKubernetesApiServer, PodScript  # noqa: E402

pytestmark = pytest.mark.cluster

NAMESPACE = "cortex-tasks"
# Long enough a failure timeout for a restart to fit within it.
ARGS = ["--failure-timeout", "15", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]
NO_RETRY = pb.RetryPolicy(retryable=False)


def k8s_spec(command: list[str], **options: Any) -> pb.TaskSpec:
    struct = struct_pb2.Struct()
    struct.update({"image": "busybox:1.36", **options})
    spec = pb.TaskSpec(type="k8s_job", options=struct, retry_policy=NO_RETRY)
    spec.command.extend(command)
    return spec


def output_of(node: ClusterNode, task_id: str) -> bytes:
    """The attempt's whole stdout so far, read through `node`."""
    with node.client(timeout_s=10) as client:
        return b"".join(
            message.data.data
            for message in client.stream_task_output(task_id, timeout_s=10)
            if message.HasField("data") and message.data.stream == pb.OUTPUT_STREAM_STDOUT
        )


def jobs_of(fake: FakeKubernetesApiServer, task_id: str) -> list[dict[str, Any]]:
    return [
        job for job in fake.created_jobs() if job["metadata"]["labels"]["cortex.task"] == task_id
    ]


def log_reads(fake: FakeKubernetesApiServer) -> int:
    return len(fake.requests("GET", "/log"))


@pytest.fixture(scope="module")
def fake_api_server() -> Iterator[FakeKubernetesApiServer]:
    with FakeKubernetesApiServer(namespaces=(NAMESPACE,)) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(
    fake_api_server: FakeKubernetesApiServer,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("k8s")
    kubeconfig = fake_api_server.write_kubeconfig(root / "kubeconfig")
    shared = Cluster(root / "cluster", 3, extra_args=ARGS)
    shared.nodes[2].env.update(
        {
            "CORTEX_K8S": f"kubeconfig={kubeconfig},context=fake,namespace={NAMESPACE}",
            "CORTEX_KILL_GRACE_S": "1",
        }
    )
    yield from serve_cluster(shared, request)


def test_only_the_configured_node_advertises_the_fake_api_server(
    cluster: Cluster, fake_api_server: FakeKubernetesApiServer
) -> None:
    def listed() -> dict[str, pb.Node]:
        with cluster.nodes[0].client() as client:
            return {node.id: node for node in client.list_nodes().nodes}

    # Capabilities arrive with the node's reports, which may follow its start.
    nodes = wait_until(
        lambda: (found := listed())["n3"].capabilities.get("k8s_job.server") and found,
        30,
        what="n3's k8s_job capabilities",
    )
    assert nodes["n3"].capabilities["k8s_job.server"] == fake_api_server.url
    assert nodes["n3"].capabilities["k8s_job.namespace"] == NAMESPACE
    assert "k8s_job" in nodes["n3"].executors
    for other in ("n1", "n2"):
        assert "k8s_job.server" not in nodes[other].capabilities
        assert "k8s_job" not in nodes[other].executors


def test_k8s_job_runs_on_the_node_with_the_fake_api_server(
    cluster: Cluster, fake_api_server: FakeKubernetesApiServer
) -> None:
    fake_api_server.script_pods(
        PodScript(output=[b"hello from the pod\n"], exit_code=0),
        PodScript(output=[b"about to fail\n"], exit_code=4),
    )
    with cluster.nodes[0].client() as client:
        ok = client.submit_task(k8s_spec(["echo", "hello from the pod"])).task.id
        done = client.get_task_result(ok, wait=True, timeout_ms=30_000).task
        failing = client.submit_task(k8s_spec(["false"])).task.id
        failed = client.get_task_result(failing, wait=True, timeout_ms=30_000).task

    assert done.state == pb.TASK_STATE_COMPLETED, done
    assert done.node_id == "n3" and done.result.exit_code == 0
    assert done.result.stdout == b"hello from the pod\n"
    assert output_of(cluster.nodes[1], ok) == b"hello from the pod\n"
    [job] = jobs_of(fake_api_server, ok)
    assert job["metadata"]["labels"]["cortex.attempt"] == "1"
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["echo", "hello from the pod"]
    assert {"name": "CORTEX_TASK_ID", "value": ok} in container["env"]

    assert failed.state == pb.TASK_STATE_FAILED, failed
    assert failed.node_id == "n3" and failed.result.exit_code == 4
    assert "exit code 4" in failed.error and "BackoffLimitExceeded" in failed.error


def test_malformed_k8s_job_spec_refused_at_submit_naming_the_field(cluster: Cluster) -> None:
    # n1 has the executor installed (not configured): it checks the options.
    with cluster.nodes[0].client() as client, pytest.raises(InvalidArgument) as refused:
        client.submit_task(k8s_spec(["true"], backoffLimit=-1))
    assert "spec.options.backoffLimit" in str(refused.value)


def cancel_once(client: Any, task_id: str) -> None:
    """Cancels the task. A leader change while the cancel commits says only
    that it may not be applied (Unavailable: retry); a retry that finds it
    cancelled already is refused with FailedPrecondition."""
    for _ in range(3):
        try:
            client.cancel_task(task_id, reason="enough")
            return
        except Unavailable:
            continue
        except FailedPrecondition as err:
            assert "already cancelled" in str(err), err
            return
    client.cancel_task(task_id, reason="enough")


def test_cancel_deletes_the_job_on_the_fake_api_server(
    cluster: Cluster, fake_api_server: FakeKubernetesApiServer
) -> None:
    fake_api_server.script_pods(PodScript(output=[b"working\n"], exit_code=None))
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(k8s_spec(["sleep", "3600"])).task.id
        wait_until(lambda: output_of(cluster.nodes[0], task_id) == b"working\n", 30,
                   what="the pod's output")  # fmt: skip
        cancel_once(client, task_id)
        task = client.get_task_result(task_id, wait=True, timeout_ms=30_000).task

    assert task.state == pb.TASK_STATE_CANCELLED, task
    [job] = jobs_of(fake_api_server, task_id)
    name = job["metadata"]["name"]
    deletes = wait_until(lambda: fake_api_server.requests("DELETE", f"/jobs/{name}"), 10,
                         what="the Job's deletion")  # fmt: skip
    assert deletes[0].query["propagationPolicy"] == ["Background"]
    assert fake_api_server.job(NAMESPACE, name) is None
    assert fake_api_server.running_pods() == []


def test_restarted_node_follows_its_job_again(
    cluster: Cluster, fake_api_server: FakeKubernetesApiServer
) -> None:
    more = threading.Event()
    fake_api_server.script_pods(PodScript(output=[b"before\n", more, b"after\n"], exit_code=0))
    worker = cluster.nodes[2]
    observer = cluster.nodes[0]
    with observer.client() as client:
        task_id = client.submit_task(k8s_spec(["sh", "-c", "work"])).task.id
    wait_until(lambda: output_of(observer, task_id) == b"before\n", 30, what="the first line")

    worker.kill9()
    reads = log_reads(fake_api_server)
    worker.start(peers=cluster.peers)
    # The restarted node reads the pod's log again; then the pod goes on.
    wait_until(lambda: log_reads(fake_api_server) > reads, 30, what="the log followed again")
    more.set()
    with observer.client(timeout_s=60) as client:
        task = client.get_task_result(task_id, wait=True, timeout_ms=45_000).task
        events = list(client.get_task(task_id, include_events=True).events)

    assert task.state == pb.TASK_STATE_COMPLETED, task
    assert task.attempt == 1 and task.node_id == worker.node_id
    assert len(jobs_of(fake_api_server, task_id)) == 1
    assert "following Kubernetes Job" in worker.log_text()  # recovered, not run again
    # Through either node: the whole output, once, in order.
    for reader in (worker, observer):
        assert output_of(reader, task_id) == b"before\nafter\n"
    assert task.result.stdout == b"before\nafter\n"
    kinds = [event.type for event in events]
    assert kinds.count(pb.EVENT_TYPE_COMPLETED) == 1
    assert pb.EVENT_TYPE_RETRIED not in kinds and pb.EVENT_TYPE_ATTEMPT_FAILED not in kinds
    cluster.wait_converged()
    assert all(completion_counts(node)[task_id] == 1 for node in cluster.nodes)
