"""Container tasks on a real 3-node cluster with the real podman: output and
exit codes come back, `cortex logs -f` follows a container from another
node, cancel and timeout stop and remove the container, only nodes that
fingerprinted a runtime get container tasks (n3 has none on its PATH), and
a node killed with SIGKILL and restarted at once recovers its running
container instead of running the attempt again. Skipped, with what is
missing, where podman cannot run containers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import struct_pb2

from cortex.errors import InvalidArgument
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, completion_counts, serve_cluster, wait_until
from tests.container_support import (
    TEST_IMAGE,
    containers_named,
    podman,
    require_containers,
    runtime_env,
)

pytestmark = pytest.mark.cluster

FAST = ["--failure-timeout", "4", "--heartbeat-interval", "0.5", "--shutdown-drain", "0"]
NO_RETRY = pb.RetryPolicy(retryable=False)
CLI = [sys.executable, "-m", "cortex.cli.main"]
# Tasks the shared cluster ran: whatever containers they left go at the end.
_SUBMITTED: list[str] = []


def container_spec(command: str, **fields: Any) -> pb.TaskSpec:
    """A container task running `command` with /bin/sh -c in the test image."""
    options = struct_pb2.Struct()
    options.update({"image": TEST_IMAGE, **fields.pop("options", {})})
    return pb.TaskSpec(type="container", shell=command, options=options, **fields)


def pinned(node: ClusterNode) -> pb.Constraints:
    return pb.Constraints(target_node=node.node_id)


def configure(cluster: Cluster, without_runtime: ClusterNode | None, scratch: Path) -> None:
    """Every node runs podman with the test `containers.conf` and stops a
    container after a 1 s grace; `without_runtime` finds no runtime on its PATH."""
    for node in cluster.nodes:
        node.env.update({**runtime_env(), "CORTEX_KILL_GRACE_S": "1"})
    if without_runtime is not None:
        empty = scratch / "no-runtime-bin"
        empty.mkdir(exist_ok=True)
        without_runtime.env["PATH"] = str(empty)


def remove_containers(task_ids: list[str]) -> None:
    for task_id in task_ids:
        for name in containers_named(f"cortex-{task_id}-"):
            podman("rm", "--force", "--time=0", name)


def output_of(node: ClusterNode, task_id: str, attempt: int = 0) -> dict[int, bytes]:
    """The attempt's whole output so far, by stream, read through `node`."""
    out: dict[int, bytes] = {pb.OUTPUT_STREAM_STDOUT: b"", pb.OUTPUT_STREAM_STDERR: b""}
    with node.client(timeout_s=10) as client:
        for message in client.stream_task_output(task_id, attempt=attempt, timeout_s=10):
            if message.HasField("data"):
                out[message.data.stream] += message.data.data
    return out


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    """n1 and n2 can run containers, n3 cannot."""
    require_containers()
    root = tmp_path_factory.mktemp("containers")
    shared = Cluster(root, 3, extra_args=FAST)
    configure(shared, shared.nodes[2], root)
    try:
        yield from serve_cluster(shared, request)
    finally:
        remove_containers(_SUBMITTED)


def submit(cluster: Cluster, spec: pb.TaskSpec) -> str:
    with cluster.nodes[0].client() as client:
        task_id: str = client.submit_task(spec).task.id
    _SUBMITTED.append(task_id)
    return task_id


def final(cluster: Cluster, task_id: str, timeout_ms: int = 60_000) -> pb.Task:
    with cluster.nodes[0].client(timeout_s=timeout_ms / 1000 + 10) as client:
        task: pb.Task = client.get_task_result(task_id, wait=True, timeout_ms=timeout_ms).task
    return task


def wait_running_container(cluster: Cluster, task_id: str) -> pb.Task:
    def running() -> pb.Task | None:
        with cluster.nodes[0].client() as client:
            task = client.get_task(task_id).task
        if task.state == pb.TASK_STATE_RUNNING and containers_named(f"cortex-{task_id}-"):
            return task
        return None

    return wait_until(running, 60, what=f"task {task_id}'s container running")


# -- acceptance 1 ------------------------------------------------------------------


def test_container_output_and_exit_code_come_back(cluster: Cluster) -> None:
    done = submit(cluster, container_spec("echo from the container; echo to stderr >&2"))
    failing = submit(cluster, container_spec("echo failing; exit 7", retry_policy=NO_RETRY))
    task = final(cluster, done)
    assert task.state == pb.TASK_STATE_COMPLETED, task
    assert task.result.exit_code == 0
    assert task.result.stdout == b"from the container\n"
    assert task.result.stderr == b"to stderr\n"
    task = final(cluster, failing)
    assert task.state == pb.TASK_STATE_FAILED, task
    assert task.result.exit_code == 7 and task.result.stdout == b"failing\n"
    assert containers_named(f"cortex-{done}-") == containers_named(f"cortex-{failing}-") == []


def test_logs_follow_a_container_from_another_node(cluster: Cluster) -> None:
    worker, watcher = cluster.nodes[0], cluster.nodes[1]
    command = "for i in $(seq 1 12); do echo line $i; sleep 0.2; done"
    task_id = submit(cluster, container_spec(command, constraints=pinned(worker)))
    follow = subprocess.Popen(
        [*CLI, "--node", watcher.grpc, "logs", "-f", task_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")},
    )
    lines: list[str] = []
    states_at_first_line: list[int] = []

    def read() -> None:
        assert follow.stdout is not None
        for raw in follow.stdout:
            if not lines:
                with watcher.client() as client:
                    states_at_first_line.append(client.get_task(task_id).task.state)
            lines.append(raw.decode().rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = follow.wait(60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    reader.join(10)
    assert follow.stderr is not None
    assert code == 0, follow.stderr.read()
    assert lines == [f"line {i}" for i in range(1, 13)]
    # The output arrived while the container was still running.
    assert states_at_first_line == [pb.TASK_STATE_RUNNING]
    assert final(cluster, task_id).node_id == worker.node_id


def test_cancel_stops_and_removes_the_container(cluster: Cluster) -> None:
    task_id = submit(cluster, container_spec("echo up; sleep 120"))
    wait_running_container(cluster, task_id)
    with cluster.nodes[0].client() as client:
        assert client.cancel_task(task_id).task.state == pb.TASK_STATE_CANCELLED
    wait_until(
        lambda: containers_named(f"cortex-{task_id}-") == [], 30, what="the container removed"
    )
    assert final(cluster, task_id).state == pb.TASK_STATE_CANCELLED


def test_timeout_stops_and_removes_the_container(cluster: Cluster) -> None:
    spec = container_spec(
        "echo up; sleep 120", timeout=timedelta(seconds=1.5), retry_policy=NO_RETRY
    )
    task_id = submit(cluster, spec)
    task = final(cluster, task_id)
    assert task.state == pb.TASK_STATE_FAILED, task
    assert task.result.timed_out and task.result.stdout == b"up\n"
    assert containers_named(f"cortex-{task_id}-") == []


def test_container_tasks_go_only_to_nodes_with_a_runtime(cluster: Cluster) -> None:
    with cluster.nodes[0].client() as client:
        nodes = {n.id: n for n in client.list_nodes().nodes}
    assert nodes["n1"].capabilities["container.runtime"] == "podman"
    assert nodes["n2"].capabilities["container.runtime"] == "podman"
    assert "container.runtime" not in nodes["n3"].capabilities
    assert "container" in nodes["n1"].executors and "container" not in nodes["n3"].executors
    ids = [submit(cluster, container_spec(f"echo {i}")) for i in range(6)]
    for task_id in ids:
        task = final(cluster, task_id)
        assert task.state == pb.TASK_STATE_COMPLETED, task
        assert task.node_id in ("n1", "n2"), task.node_id
    stuck = submit(cluster, container_spec("echo never", constraints=pinned(cluster.nodes[2])))
    with cluster.nodes[0].client() as client:
        reasons = wait_until(
            lambda: list(client.get_task(stuck).task.pending_reasons), 15, what="a pending reason"
        )
        assert client.get_task(stuck).task.state == pb.TASK_STATE_QUEUED
        assert any("n3" in reason and "container" in reason for reason in reasons), reasons
        client.cancel_task(stuck)


def test_malformed_container_spec_is_refused_at_submit_naming_the_field(
    cluster: Cluster,
) -> None:
    bad = {
        "spec.options.image": {},
        "spec.options.memoryMb": {"image": TEST_IMAGE, "memoryMb": -1},
        "spec.options.mounts.0.source": {
            "image": TEST_IMAGE,
            "mounts": [{"source": "relative", "target": "/data"}],
        },
        "spec.options.ports": {"image": TEST_IMAGE, "ports": [80]},
    }
    # n3 cannot run containers, yet checks their specs like any node.
    for node in (cluster.nodes[0], cluster.nodes[2]):
        for field, options in bad.items():
            spec = container_spec("true")
            spec.options.Clear()
            spec.options.update(options)
            with node.client() as client, pytest.raises(InvalidArgument) as refused:
                client.submit_task(spec)
            assert field in str(refused.value), (field, str(refused.value))


def test_cli_submits_a_container_task_with_limits(cluster: Cluster) -> None:
    script = (
        "cat /sys/fs/cgroup/memory.max 2>/dev/null"
        " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
    )
    done = subprocess.run(
        [
            *CLI, "--node", cluster.nodes[2].grpc, "task", "submit", "--json", "--wait",
            "--wait-timeout", "60", "--type", "container", "--image", TEST_IMAGE,
            "--memory-mb", "64", "--cpus", "0.5", "--", "sh", "-c", script,
        ],
        capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    task = json.loads(done.stdout)
    _SUBMITTED.append(task["id"])
    assert task["state"] == "completed" and task["node"] in ("n1", "n2"), task
    # 64 MiB of memory, and no network but the loopback device.
    assert task["result"]["stdout"].split() == [str(64 * 1024 * 1024), "lo"]


# -- acceptance 2: the node restarts while its container runs ----------------------


def test_restarted_node_recovers_its_running_container(make_cluster: Any, tmp_path: Path) -> None:
    require_containers()
    # Long enough a failure timeout for the restart to fit within it.
    restart = make_cluster(
        3, extra_args=["--failure-timeout", "15", "--heartbeat-interval", "0.5"], start=False
    )
    configure(restart, None, tmp_path)
    restart.start()
    restart.wait_ready()
    worker = restart.followers()[0]
    # Submitted and watched through a node that stays up.
    observer = restart.leader()
    command = "for i in $(seq 1 40); do echo line $i; sleep 0.2; done"
    with observer.client() as client:
        registered = {n.id: n for n in client.list_nodes().nodes}[worker.node_id]
        # Found at its start (`podman info`), or the pinned task can never run.
        assert "container" in registered.executors, dict(registered.capabilities)
        task_id = client.submit_task(container_spec(command, constraints=pinned(worker))).task.id
    try:
        wait_until(
            lambda: output_of(worker, task_id)[pb.OUTPUT_STREAM_STDOUT].count(b"\n") >= 5,
            60,
            what="the first lines of output",
        )
        worker.kill9()
        assert containers_named(f"cortex-{task_id}-1"), "the container outlives the node"
        worker.start(peers=restart.peers)
        with observer.client(timeout_s=90) as client:
            task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            events = list(client.get_task(task_id, include_events=True).events)
        assert task.state == pb.TASK_STATE_COMPLETED, task
        assert task.attempt == 1 and task.node_id == worker.node_id
        expected = [f"line {i}" for i in range(1, 41)]
        # From the worker and through another node: the whole output, once, in order.
        for reader in (worker, observer):
            stdout = output_of(reader, task_id, attempt=1)[pb.OUTPUT_STREAM_STDOUT]
            assert stdout.decode().splitlines() == expected
        assert task.result.stdout.decode().splitlines() == expected
        kinds = [e.type for e in events]
        assert kinds.count(pb.EVENT_TYPE_COMPLETED) == 1
        assert pb.EVENT_TYPE_RETRIED not in kinds and pb.EVENT_TYPE_ATTEMPT_FAILED not in kinds
        restart.wait_converged()
        assert all(completion_counts(node)[task_id] == 1 for node in restart.nodes)
        wait_until(
            lambda: containers_named(f"cortex-{task_id}-") == [], 30, what="the container removed"
        )
    finally:
        remove_containers([task_id])
