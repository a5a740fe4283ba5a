"""The `k8s_job` executor against a fake Kubernetes API server (no real one
exists on these machines; see tests/k8s_fake_api_server.py). The executor
talks to it through the real `kubernetes` client: the Job it creates, the
log it follows, how the Job's end maps to the result, deletion on cancel
and timeout, and recovery after the node process was killed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes package is not installed (pip install 'cortex-engine[k8s]')",
)

from cortex.errors import InvalidArgument  # noqa: E402
from cortex.executors.base import (  # noqa: E402
    Execution,
    ExecutionResult,
    ExecutorSettings,
    load_handle,
)
from cortex.executors.k8s_job import K8sJobExecutor, K8sJobOptions, job_name  # noqa: E402
from cortex.spec import TaskSpec, TaskTypes, parse_task_spec  # noqa: E402
from tests.k8s_fake_api_server import FakeKubernetesApiServer, PodScript  # noqa: E402

NAMESPACE = "batch-jobs"


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
    return value


class RecordingSink:
    """The attempt's output as the node would keep it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.data: dict[str, bytes] = {"stdout": b"", "stderr": b""}

    def write(self, stream: str, data: bytes) -> None:
        with self._lock:
            self.data[stream] += data

    def stdout(self) -> bytes:
        with self._lock:
            return self.data["stdout"]


@pytest.fixture
def fake_api_server() -> Iterator[FakeKubernetesApiServer]:
    with FakeKubernetesApiServer(namespaces=("default", NAMESPACE)) as server:
        yield server


@pytest.fixture
def settings(fake_api_server: FakeKubernetesApiServer, tmp_path: Path) -> ExecutorSettings:
    kubeconfig = fake_api_server.write_kubeconfig(tmp_path / "kubeconfig")
    return ExecutorSettings(
        data_dir=str(tmp_path),
        k8s={"kubeconfig": str(kubeconfig), "context": "fake", "namespace": NAMESPACE},
    )


@pytest.fixture
def executor(settings: ExecutorSettings) -> K8sJobExecutor:
    return K8sJobExecutor(settings)


def execution(
    tmp_path: Path, spec: dict[str, Any], sink: RecordingSink | None = None, **kwargs: Any
) -> Execution:
    task_id = kwargs.pop("task_id", "task-1")
    attempt = kwargs.pop("attempt", 1)
    return Execution(
        task_id=task_id,
        attempt=attempt,
        spec=TaskSpec.model_validate({"type": "k8s_job", **spec}),
        work_dir=str(tmp_path / "attempts" / task_id / str(attempt)),
        env={
            "CORTEX_TASK_ID": task_id,
            "CORTEX_ATTEMPT": str(attempt),
            # A path on the node: not passed to the pod.
            "CORTEX_CONTEXT_FILE": str(tmp_path / "context.json"),
        },
        output=sink,
        handle_file=str(tmp_path / "attempts" / task_id / str(attempt) / "handle.json"),
        **kwargs,
    )


class Running:
    """An attempt running in a thread, as the node's launcher runs it."""

    def __init__(self, executor: K8sJobExecutor, execution: Execution) -> None:
        self.cancel = threading.Event()
        self.result: ExecutionResult | None = None
        self._thread = threading.Thread(target=self._run, args=(executor, execution))
        self._thread.start()

    def _run(self, executor: K8sJobExecutor, execution: Execution) -> None:
        self.result = executor.run(execution, self.cancel)

    def wait(self, timeout: float = 15.0) -> ExecutionResult:
        self._thread.join(timeout)
        assert self.result is not None, f"the attempt did not end within {timeout} s"
        return self.result


# ---------------------------------------------------------------- the Job


def test_job_created_with_the_spec_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    fake_api_server.script_pods(PodScript(output=[b"hello\n"], exit_code=0))
    sink = RecordingSink()
    spec = {
        "command": "echo hello",
        "env": {"GREETING": "hello"},
        "cwd": "/srv",
        "options": {
            "image": "registry.example/tools:1.2",
            "resources": {"cpu": "500m", "memory": "128Mi"},
            "serviceAccount": "runner",
            "backoffLimit": 2,
            "activeDeadlineSeconds": 600,
        },
    }
    attempt = execution(tmp_path, spec, sink, task_id="0b1e-Task_7", kill_grace_s=2.5)

    result = executor.run(attempt, threading.Event())

    assert result.exit_code == 0 and result.succeeded, result
    assert result.stdout == b"hello\n" and sink.stdout() == b"hello\n"
    name = job_name("0b1e-Task_7", 1)
    assert name.startswith("cortex-0b1e-task-7-") and name.endswith("-1") and len(name) <= 63
    [create] = fake_api_server.requests("POST", "/jobs")
    assert create.path == f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    assert create.authorization == "Bearer fake-api-server-token"
    job = create.body
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    labels = {"cortex.task": "0b1e-Task_7", "cortex.attempt": "1"}
    assert job["metadata"]["name"] == name
    assert labels.items() <= job["metadata"]["labels"].items()
    assert job["metadata"]["annotations"] == {"cortex.task-id": "0b1e-Task_7"}
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["activeDeadlineSeconds"] == 600
    template = job["spec"]["template"]
    assert labels.items() <= template["metadata"]["labels"].items()
    pod = template["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == "runner"
    assert pod["terminationGracePeriodSeconds"] == 3
    [container] = pod["containers"]
    assert container["image"] == "registry.example/tools:1.2"
    assert container["command"] == ["/bin/sh", "-c", "echo hello"]
    assert container["workingDir"] == "/srv"
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env == {"GREETING": "hello", "CORTEX_TASK_ID": "0b1e-Task_7", "CORTEX_ATTEMPT": "1"}
    amounts = {"cpu": "500m", "memory": "128Mi"}
    assert container["resources"] == {"requests": amounts, "limits": amounts}
    assert load_handle(attempt.handle_file) == {
        "namespace": NAMESPACE,
        "name": name,
        "startedAt": pytest.approx(time.time(), abs=30),
    }


def test_argv_command_default_namespace_and_no_resources_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, settings: ExecutorSettings, tmp_path: Path
) -> None:
    executor = K8sJobExecutor(ExecutorSettings(k8s={**settings.k8s, "namespace": None}))
    spec = {"command": ["python", "-c", "print(1)"], "options": {"image": "python:3.12"}}

    result = executor.run(execution(tmp_path, spec), threading.Event())

    assert result.succeeded, result
    [create] = fake_api_server.requests("POST", "/jobs")
    assert create.path == "/apis/batch/v1/namespaces/default/jobs"
    [container] = create.body["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-c", "print(1)"]
    assert "resources" not in container and "workingDir" not in container
    assert create.body["spec"]["backoffLimit"] == 0


def test_the_image_entrypoint_runs_without_a_command_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    executor.run(execution(tmp_path, {"options": {"image": "busybox"}}), threading.Event())
    [container] = fake_api_server.created_jobs()[0]["spec"]["template"]["spec"]["containers"]
    assert "command" not in container and container["image"] == "busybox"


# ---------------------------------------------------------------- log and result


def test_logs_followed_as_the_fake_api_server_pod_prints(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    started, more = threading.Event(), threading.Event()
    fake_api_server.script_pods(
        PodScript(output=[b"one\n", more, b"two\n", b"three\n"], exit_code=0, start=started)
    )
    sink = RecordingSink()
    running = Running(executor, execution(tmp_path, {"options": {"image": "busybox"}}, sink))
    # The container waits to start (the API answers 400 for its log) ...
    wait_for(lambda: fake_api_server.requests("GET", "/pods"), 10, "the pods to be listed")
    assert sink.stdout() == b""
    started.set()
    # ... then its first line arrives while it still runs.
    wait_for(lambda: sink.stdout() == b"one\n", 10, "the first line")
    assert running.result is None
    more.set()
    result = running.wait()
    assert result.exit_code == 0 and result.succeeded
    assert sink.stdout() == b"one\ntwo\nthree\n"
    assert result.stdout == b"one\ntwo\nthree\n" and not result.stdout_truncated


def test_the_tail_is_capped_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    lines = [f"line {i:03d}\n".encode() for i in range(100)]
    fake_api_server.script_pods(PodScript(output=list(lines), exit_code=0))
    sink = RecordingSink()
    attempt = execution(tmp_path, {"options": {"image": "busybox"}}, sink, tail_bytes=20)

    result = executor.run(attempt, threading.Event())

    assert sink.stdout() == b"".join(lines)
    assert result.stdout == b"".join(lines)[-20:] and result.stdout_truncated


def test_failure_maps_exit_code_and_reason_from_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    fake_api_server.script_pods(PodScript(output=[b"boom\n"], exit_code=3))

    result = executor.run(execution(tmp_path, {"options": {"image": "busybox"}}), threading.Event())

    assert result.exit_code == 3 and not result.succeeded and not result.permanent
    assert result.error is not None
    assert result.error.startswith("exit code 3: Job batch-jobs/cortex-task-1-1 failed")
    assert "BackoffLimitExceeded" in result.error
    assert result.stdout == b"boom\n"


def test_out_of_memory_named_in_the_failure_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    fake_api_server.script_pods(PodScript(exit_code=137, reason="OOMKilled"))

    result = executor.run(execution(tmp_path, {"options": {"image": "busybox"}}), threading.Event())

    assert result.exit_code == 137
    assert result.error is not None and "container OOMKilled" in result.error


def test_every_pod_of_a_retried_job_is_followed_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    fake_api_server.script_pods(
        PodScript(output=[b"first try\n"], exit_code=1),
        PodScript(output=[b"second try\n"], exit_code=0),
    )
    spec = {"options": {"image": "busybox", "backoffLimit": 1}}
    sink = RecordingSink()

    result = executor.run(execution(tmp_path, spec, sink), threading.Event())

    assert result.succeeded, result
    assert sink.stdout() == b"first try\nsecond try\n"


# ---------------------------------------------------------------- cancel and timeout


def assert_deleted_with_its_pods(server: FakeKubernetesApiServer, name: str) -> None:
    [delete] = server.requests("DELETE", f"/jobs/{name}")
    assert delete.query.get("propagationPolicy") == ["Background"]
    assert server.job(NAMESPACE, name) is None
    assert server.running_pods() == []


def test_cancel_deletes_the_job_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    fake_api_server.script_pods(PodScript(output=[b"working\n"], exit_code=None))
    sink = RecordingSink()
    running = Running(executor, execution(tmp_path, {"options": {"image": "busybox"}}, sink))
    wait_for(lambda: sink.stdout() == b"working\n", 10, "the pod's output")

    running.cancel.set()
    result = running.wait()

    assert result.cancelled and result.exit_code == -1 and not result.succeeded
    assert result.stdout == b"working\n"
    assert_deleted_with_its_pods(fake_api_server, job_name("task-1", 1))


def test_timeout_deletes_the_job_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    fake_api_server.script_pods(PodScript(exit_code=None))
    spec = {"timeoutMs": 300, "options": {"image": "busybox"}}

    started = time.monotonic()
    result = executor.run(execution(tmp_path, spec), threading.Event())

    assert result.timed_out and not result.cancelled and not result.succeeded
    assert result.error == "timed out after 300 ms"
    assert 0.3 <= time.monotonic() - started < 5
    assert_deleted_with_its_pods(fake_api_server, job_name("task-1", 1))


def test_job_deleted_by_someone_else_fails_the_attempt_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    fake_api_server.script_pods(PodScript(output=[b"up\n"], exit_code=None))
    sink = RecordingSink()
    running = Running(executor, execution(tmp_path, {"options": {"image": "busybox"}}, sink))
    wait_for(lambda: sink.stdout() == b"up\n", 10, "the pod's output")

    fake_api_server.delete_job_now(NAMESPACE, job_name("task-1", 1))
    result = running.wait()

    assert not result.succeeded and not result.cancelled
    assert result.error == "Job batch-jobs/cortex-task-1-1 was deleted before it ended"


def test_job_refused_by_the_fake_api_server_is_a_permanent_error(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    spec = {"options": {"image": "busybox", "namespace": "missing"}}

    result = executor.run(execution(tmp_path, spec), threading.Event())

    assert result.permanent and not result.succeeded
    assert result.error == (
        'Kubernetes refused Job missing/cortex-task-1-1: namespaces "missing" not found'
    )


def test_unreachable_api_is_a_transient_error_once_the_fake_api_server_closed(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with FakeKubernetesApiServer() as server:
        server.write_kubeconfig(kubeconfig)
    executor = K8sJobExecutor(ExecutorSettings(k8s={"kubeconfig": str(kubeconfig)}))

    result = executor.run(execution(tmp_path, {"options": {"image": "busybox"}}), threading.Event())

    assert not result.succeeded and not result.permanent
    assert result.error is not None and "creating Job default/cortex-task-1-1" in result.error


# ---------------------------------------------------------------- recovery

_RUN_UNTIL_KILLED = """
import sys, threading
from cortex.executors.base import Execution, ExecutorSettings
from cortex.executors.k8s_job import K8sJobExecutor
from cortex.spec import TaskSpec

kubeconfig, work_dir, output, namespace = sys.argv[1:5]

class FileSink:
    def write(self, stream, data):
        with open(output, "ab") as out:
            out.write(data)

spec = TaskSpec.model_validate({"type": "k8s_job", "options": {"image": "busybox"}})
execution = Execution(task_id="task-r", attempt=2, spec=spec, work_dir=work_dir,
                      output=FileSink(), handle_file=work_dir + "/handle.json")
executor = K8sJobExecutor(ExecutorSettings(k8s={"kubeconfig": kubeconfig, "namespace": namespace}))
executor.run(execution, threading.Event())
"""


def test_recover_continues_after_the_node_process_was_killed_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, settings: ExecutorSettings, tmp_path: Path
) -> None:
    more = threading.Event()
    fake_api_server.script_pods(PodScript(output=[b"before\n", more, b"after\n"], exit_code=0))
    work_dir = tmp_path / "attempt"
    work_dir.mkdir()
    output = work_dir / "output"
    node = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _RUN_UNTIL_KILLED,
            settings.k8s["kubeconfig"],
            str(work_dir),
            str(output),
            NAMESPACE,
        ],
    )
    try:
        wait_for(lambda: output.exists() and output.read_bytes() == b"before\n", 30, "output")
        wait_for(lambda: load_handle(str(work_dir / "handle.json")), 10, "the handle")
    finally:
        os.kill(node.pid, signal.SIGKILL)
        node.wait()
    handle = load_handle(str(work_dir / "handle.json"))
    assert handle is not None and handle["name"] == job_name("task-r", 2)
    log_reads = len(fake_api_server.requests("GET", "/log"))

    sink = RecordingSink()
    recovered = Execution(
        task_id="task-r",
        attempt=2,
        spec=TaskSpec.model_validate({"type": "k8s_job", "options": {"image": "busybox"}}),
        work_dir=str(work_dir),
        output=sink,
        output_offsets={"stdout": len(output.read_bytes())},
    )
    result: list[ExecutionResult] = []
    thread = threading.Thread(
        target=lambda: result.append(
            K8sJobExecutor(settings).recover(recovered, handle, threading.Event())
        )
    )
    thread.start()
    # The log is read again by the recovered attempt, then the pod goes on.
    wait_for(lambda: len(fake_api_server.requests("GET", "/log")) > log_reads, 10, "a log read")
    more.set()
    thread.join(15)

    assert result and result[0].exit_code == 0 and result[0].succeeded
    assert sink.stdout() == b"after\n"
    assert result[0].stdout == b"before\nafter\n"
    assert len(fake_api_server.requests("POST", "/jobs")) == 1


def test_recover_raises_lookup_error_when_the_job_is_gone_from_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    handle = {"namespace": NAMESPACE, "name": job_name("task-1", 1)}
    attempt = execution(tmp_path, {"options": {"image": "busybox"}})

    with pytest.raises(LookupError, match="no longer exists"):
        executor.recover(attempt, handle, threading.Event())
    with pytest.raises(LookupError, match="names no Kubernetes Job"):
        executor.recover(attempt, {"pid": 12}, threading.Event())


def test_recover_refuses_another_attempts_job_on_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor, tmp_path: Path
) -> None:
    first = execution(tmp_path, {"options": {"image": "busybox"}}, attempt=1)
    assert executor.run(first, threading.Event()).succeeded
    handle = load_handle(first.handle_file)
    assert handle is not None

    second = execution(tmp_path, {"options": {"image": "busybox"}}, attempt=2)
    with pytest.raises(LookupError, match="is not this attempt's"):
        executor.recover(second, handle, threading.Event())


# ---------------------------------------------------------------- options


K8S_TYPES = TaskTypes({"k8s_job": K8sJobOptions})


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({}, "spec.options.image: Field required"),
        ({"image": ""}, "spec.options.image: String should have at least 1 character"),
        ({"image": "a b"}, "spec.options.image: not an image reference"),
        ({"image": "x", "backoffLimit": -1}, "spec.options.backoffLimit: Input should be"),
        ({"image": "x", "backoffLimit": 1.5}, "spec.options.backoffLimit: Input should be"),
        ({"image": "x", "namespace": "Not_A_Name"}, "spec.options.namespace: 'Not_A_Name'"),
        ({"image": "x", "resources": {"cpu": "lots"}}, "spec.options.resources.cpu: 'lots'"),
        ({"image": "x", "resources": {"gpu": "1"}}, "spec.options.resources.gpu: unknown option"),
        ({"image": "x", "serviceAccount": 7}, "spec.options.serviceAccount: Input should be"),
        ({"image": "x", "activeDeadlineSeconds": 0}, "spec.options.activeDeadlineSeconds:"),
        ({"image": "x", "imagePullPolicy": "Always"}, "spec.options.imagePullPolicy: unknown"),
    ],
)
def test_malformed_options_refused_naming_the_field(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        parse_task_spec({"type": "k8s_job", "options": options}, types=K8S_TYPES)
    assert problem in str(refused.value)


def test_well_formed_options_accepted() -> None:
    options = {
        "image": "ghcr.io/org/tool@sha256:" + "0" * 64,
        "namespace": "team-a",
        "resources": {"cpu": "0.5", "memory": "1Gi"},
        "serviceAccount": "runner.sa",
        "backoffLimit": 2.0,  # JSON's one number type
        "activeDeadlineSeconds": 60,
    }
    spec = parse_task_spec({"type": "k8s_job", "options": options}, types=K8S_TYPES)
    assert K8sJobOptions.model_validate(spec.options).backoff_limit == 2


def test_run_refuses_malformed_options_permanently(
    executor: K8sJobExecutor, fake_api_server: FakeKubernetesApiServer, tmp_path: Path
) -> None:
    result = executor.run(execution(tmp_path, {"options": {"img": "x"}}), threading.Event())
    assert result.permanent and result.error is not None
    assert "spec.options.image: Field required" in result.error
    assert fake_api_server.requests("POST") == []


def test_long_or_odd_task_ids_make_valid_job_names() -> None:
    names = {job_name(task_id, 12) for task_id in ("A" * 80, "a" * 80, "ÜBER/task", "über-task")}
    assert len(names) == 4
    for name in names:
        assert len(name) <= 63 and name.startswith("cortex-") and name.endswith("-12")
        assert all(ch.isascii() and (ch.islower() or ch.isdigit() or ch == "-") for ch in name)


# ---------------------------------------------------------------- fingerprint


def test_fingerprint_names_the_fake_api_server(
    fake_api_server: FakeKubernetesApiServer, executor: K8sJobExecutor
) -> None:
    assert executor.fingerprint() == {
        "k8s_job.server": fake_api_server.url,
        "k8s_job.namespace": NAMESPACE,
        "k8s_job.version": "v1.30.0-fake",
    }
    assert fake_api_server.requests("GET", "/version")


def test_fingerprint_none_without_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    assert K8sJobExecutor(ExecutorSettings()).fingerprint() is None
    assert K8sJobExecutor(ExecutorSettings(k8s={"namespace": "x"})).fingerprint() is None
    # In-cluster configuration outside a pod (as the environment spells the flag).
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert K8sJobExecutor(ExecutorSettings(k8s={"in_cluster": "true"})).fingerprint() is None


def test_fingerprint_none_without_the_kubernetes_package(
    settings: ExecutorSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in [name for name in sys.modules if name.split(".")[0] == "kubernetes"]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    executor = K8sJobExecutor(settings)
    assert executor.fingerprint() is None
    result = executor.run(
        execution(Path(settings.data_dir), {"options": {"image": "x"}}), threading.Event()
    )
    assert result.error is not None and "pip install 'cortex-engine[k8s]'" in result.error


def test_fingerprint_bounded_when_the_api_does_not_answer(tmp_path: Path) -> None:
    """A server that accepts connections and never answers: no fake API
    server at all, just a listening socket."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        kubeconfig = tmp_path / "kubeconfig"
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": url}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        executor = K8sJobExecutor(ExecutorSettings(k8s={"kubeconfig": str(kubeconfig)}))
        started = time.monotonic()
        assert executor.fingerprint() is None
        assert time.monotonic() - started < 2.0
    finally:
        silent.close()
