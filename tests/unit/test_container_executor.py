"""The container executor against the real podman (with runc) and a busybox
image built here: output and exit codes, cancel and timeout stopping and
removing the container, fencing of an older attempt's container, and
reattaching after the process that started a container died. Skipped, with
what is missing, where podman cannot run containers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cortex.executors.base import Execution, ExecutionResult, ExecutorSettings
from cortex.executors.container import ContainerExecutor, ContainerOptions, container_name
from cortex.spec import TaskSpec
from tests.cluster import wait_until
from tests.container_support import (
    TEST_IMAGE,
    containers_conf,
    containers_named,
    podman,
    require_containers,
)


class CollectingSink:
    """The attempt's output as the agent's sink would receive it."""

    def __init__(self) -> None:
        self.data = {"stdout": b"", "stderr": b""}
        self._lock = threading.Lock()

    def write(self, stream: str, data: bytes) -> None:
        with self._lock:
            self.data[stream] += data

    def text(self, stream: str) -> str:
        with self._lock:
            return self.data[stream].decode()


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    require_containers()
    # The executor runs podman with the node's environment.
    monkeypatch.setenv("CONTAINERS_CONF", containers_conf())


@pytest.fixture
def task_id() -> Any:
    """A fresh task id; whatever containers it left are removed afterwards."""
    task = str(uuid.uuid4())
    yield task
    for name in containers_named(f"cortex-{task}-"):
        podman("rm", "--force", "--time=0", name)


def executor(tmp_path: Path, **settings: Any) -> ContainerExecutor:
    return ContainerExecutor(ExecutorSettings(data_dir=str(tmp_path), **settings))


def execution(
    tmp_path: Path,
    task_id: str,
    command: list[str] | str,
    attempt: int = 1,
    options: dict[str, Any] | None = None,
    spec_env: dict[str, str] | None = None,
    timeout_ms: int | None = None,
    **fields: Any,
) -> Execution:
    spec = TaskSpec.model_validate(
        {
            "type": "container",
            "command": command,
            "options": {"image": TEST_IMAGE, **(options or {})},
            "env": spec_env or {},
            "timeoutMs": timeout_ms,
        }
    )
    work_dir = tmp_path / "attempts" / task_id / str(attempt)
    work_dir.mkdir(parents=True, exist_ok=True)
    return Execution(
        task_id=task_id,
        attempt=attempt,
        spec=spec,
        work_dir=str(work_dir),
        handle_file=str(work_dir / "handle.json"),
        kill_grace_s=1.0,
        **fields,
    )


def run_in_thread(
    ex: ContainerExecutor, execution: Execution, cancel: threading.Event
) -> tuple[threading.Thread, list[ExecutionResult]]:
    results: list[ExecutionResult] = []
    thread = threading.Thread(target=lambda: results.append(ex.run(execution, cancel)))
    thread.start()
    return thread, results


# -- spec options, checked wherever a spec enters -----------------------------


def option_errors(options: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        ContainerOptions.model_validate(options)
    return [".".join(str(part) for part in e["loc"]) for e in caught.value.errors()]


def test_options_validation_names_the_field() -> None:
    assert option_errors({}) == ["image"]
    assert option_errors({"image": "-v"}) == ["image"]
    assert option_errors({"image": "a b"}) == ["image"]
    assert option_errors({"image": "x", "memoryMb": 0}) == ["memoryMb"]
    assert option_errors({"image": "x", "memoryMb": 1.5}) == ["memoryMb"]
    assert option_errors({"image": "x", "cpus": -1}) == ["cpus"]
    assert option_errors({"image": "x", "network": "all"}) == ["network"]
    assert option_errors({"image": "x", "workdir": "relative"}) == ["workdir"]
    assert option_errors({"image": "x", "ports": [80]}) == ["ports"]
    assert option_errors({"image": "x", "mounts": [{"source": "data", "target": "/d"}]}) == [
        "mounts.0.source"
    ]
    assert option_errors(
        {"image": "x", "mounts": [{"source": "/d", "target": "/d", "readOnly": "no"}]}
    ) == ["mounts.0.readOnly"]
    assert option_errors({"image": "x", "mounts": [{"source": "/d", "target": "/cortex"}]}) == [
        "mounts.0.target"
    ]
    parsed = ContainerOptions.model_validate(
        {
            "image": TEST_IMAGE,
            "memoryMb": 64.0,
            "cpus": 0.5,
            "mounts": [{"source": "/s", "target": "/t"}],
        }
    )
    assert parsed.memory_mb == 64 and parsed.network == "none" and parsed.mounts[0].read_only


def test_mount_outside_the_allowed_paths_is_a_permanent_error(tmp_path: Path) -> None:
    allowed = tmp_path / "shared"
    allowed.mkdir()
    # A link inside the allowed prefix that leads out of it counts as outside.
    (allowed / "escape").symlink_to("/etc")
    ex = executor(tmp_path, container_mounts=(str(allowed),))
    for source in ("/etc", str(allowed / "escape")):
        task = str(uuid.uuid4())
        mounts = [{"source": source, "target": "/data"}]
        result = ex.run(
            execution(tmp_path, task, "true", options={"mounts": mounts}), threading.Event()
        )
        assert result.permanent and result.exit_code == -1
        assert result.error and result.error.startswith("spec.options.mounts.0.source:")
        assert source in result.error


# -- what this node can run ------------------------------------------------------


def test_fingerprint_names_the_runtime_and_its_version(tmp_path: Path, runtime: None) -> None:
    started = time.monotonic()
    found = executor(tmp_path).fingerprint()
    assert time.monotonic() - started < 2
    version = podman("version", "--format", "{{.Client.Version}}").stdout.strip()
    assert found == {"container.runtime": "podman", "container.version": version}
    assert executor(tmp_path, container_runtime="podman").fingerprint() == found


def test_fingerprint_is_none_without_a_working_runtime(tmp_path: Path) -> None:
    assert executor(tmp_path, container_runtime=str(tmp_path / "absent")).fingerprint() is None
    broken = tmp_path / "podman"
    broken.write_text("#!/bin/sh\necho 'cannot connect' >&2\nexit 1\n")
    broken.chmod(0o755)
    assert executor(tmp_path, container_runtime=str(broken)).fingerprint() is None


# -- running attempts ------------------------------------------------------------


def test_output_and_exit_code(tmp_path: Path, runtime: None, task_id: str) -> None:
    sink = CollectingSink()
    ex = executor(tmp_path)
    command = "echo hello $GREETING; echo oops >&2; printf partial; exit 3"
    run = execution(tmp_path, task_id, command, spec_env={"GREETING": "world"}, output=sink)
    result = ex.run(run, threading.Event())
    assert result.exit_code == 3 and not result.error and not result.cancelled
    assert result.stdout == b"hello world\npartial" and result.stderr == b"oops\n"
    assert sink.data == {"stdout": b"hello world\npartial", "stderr": b"oops\n"}
    assert containers_named(container_name(task_id, 1)) == []
    handle = Path(run.handle_file).read_text()
    assert container_name(task_id, 1) in handle


def test_argv_command_sees_the_task_env_workdir_and_context_file(
    tmp_path: Path, runtime: None, task_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODE_ONLY", "the node's own")
    script = (
        'pwd; echo "$GREETING $CORTEX_TASK_ID ${NODE_ONLY:-unset}"; '
        'cat "$CORTEX_CONTEXT_FILE"; echo \'{"stage": 2}\' > "$CORTEX_CONTEXT_FILE"; ls /cortex'
    )
    context_file = tmp_path / "attempts" / task_id / "1" / "context.json"
    run = execution(
        tmp_path, task_id, ["sh", "-c", script], options={"workdir": "/tmp"},
        spec_env={"GREETING": "hi"},
        env={"CORTEX_TASK_ID": task_id, "CORTEX_CONTEXT_FILE": str(context_file)},
    )  # fmt: skip
    context_file.write_text('{"stage": 1}\n')
    result = executor(tmp_path).run(run, threading.Event())
    assert result.exit_code == 0, result
    assert result.stdout.decode().splitlines() == [
        "/tmp", f"hi {task_id} unset", '{"stage": 1}', "context.json"
    ]  # fmt: skip
    # The context file is the attempt's own, written back through the bind
    # mount; nothing else of the attempt's directory (its handle) is inside.
    assert json.loads(context_file.read_text()) == {"stage": 2}


def test_allowed_mount_is_bound_read_only(tmp_path: Path, runtime: None, task_id: str) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "input.txt").write_text("from the host\n")
    ex = executor(tmp_path, container_mounts=(str(shared),))
    mounts = [{"source": str(shared), "target": "/data"}]
    command = "cat /data/input.txt; touch /data/new 2>/dev/null || echo read-only"
    result = ex.run(
        execution(tmp_path, task_id, command, options={"mounts": mounts}), threading.Event()
    )
    assert result.exit_code == 0, result
    assert result.stdout == b"from the host\nread-only\n"


def test_limits_apply_and_the_network_is_none_by_default(
    tmp_path: Path, runtime: None, task_id: str
) -> None:
    script = (
        "cat /sys/fs/cgroup/memory.max 2>/dev/null"
        " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
        "cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)"
        " $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); "
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
    )
    options = {"memoryMb": 64, "cpus": 0.5}
    result = executor(tmp_path).run(
        execution(tmp_path, task_id, script, options=options), threading.Event()
    )
    assert result.exit_code == 0, result
    assert result.stdout.decode().splitlines() == [str(64 * 1024 * 1024), "50000 100000", "lo"]


def test_command_missing_from_the_image_is_permanent(
    tmp_path: Path, runtime: None, task_id: str
) -> None:
    result = executor(tmp_path).run(
        execution(tmp_path, task_id, ["no-such-program"]), threading.Event()
    )
    assert result.permanent and result.exit_code == -1
    assert result.error and "no-such-program" in result.error
    assert containers_named(container_name(task_id, 1)) == []


def test_image_that_cannot_be_pulled_is_permanent(
    tmp_path: Path, runtime: None, task_id: str
) -> None:
    image = "cortex-absent.invalid/none:1"
    result = executor(tmp_path).run(
        execution(tmp_path, task_id, "true", options={"image": image}), threading.Event()
    )
    assert result.permanent and result.error and image in result.error


def test_cancel_stops_and_removes_the_container(
    tmp_path: Path, runtime: None, task_id: str
) -> None:
    sink = CollectingSink()
    ex = executor(tmp_path)
    run = execution(tmp_path, task_id, "echo started; sleep 60", output=sink)
    cancel = threading.Event()
    thread, results = run_in_thread(ex, run, cancel)
    wait_until(lambda: "started" in sink.text("stdout"), 30, what="the container's output")
    assert containers_named(container_name(task_id, 1)) == [container_name(task_id, 1)]
    cancel.set()
    thread.join(30)
    assert not thread.is_alive()
    [result] = results
    assert result.cancelled and result.exit_code == -1 and not result.timed_out
    assert containers_named(f"cortex-{task_id}-") == []


def test_timeout_stops_and_removes_the_container(
    tmp_path: Path, runtime: None, task_id: str
) -> None:
    ex = executor(tmp_path)
    started = time.monotonic()
    result = ex.run(execution(tmp_path, task_id, "sleep 60", timeout_ms=800), threading.Event())
    assert time.monotonic() - started < 20
    assert result.timed_out and not result.cancelled
    assert result.error == "timed out after 800 ms"
    assert containers_named(f"cortex-{task_id}-") == []


def test_an_older_attempts_container_is_removed_before_a_new_one_starts(
    tmp_path: Path, runtime: None, task_id: str
) -> None:
    old = container_name(task_id, 1)
    started = podman(
        "run", "--detach", f"--name={old}", f"--label=cortex.task={task_id}",
        "--label=cortex.attempt=1", "--network=none", TEST_IMAGE, "sleep", "60",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    result = executor(tmp_path).run(
        execution(tmp_path, task_id, "echo second", attempt=2), threading.Event()
    )
    assert result.exit_code == 0 and result.stdout == b"second\n"
    assert containers_named(f"cortex-{task_id}-") == []


# -- reattaching after the node process restarted ------------------------------

_RUNNER = """
import sys, threading
from cortex.executors.base import Execution, ExecutorSettings
from cortex.executors.container import ContainerExecutor
from cortex.spec import TaskSpec

task_id, work_dir, command = sys.argv[1:4]

class FileSink:
    def write(self, stream, data):
        with open(f"{work_dir}/{stream}", "ab") as out:
            out.write(data)

spec = TaskSpec.model_validate(
    {"type": "container", "command": command, "options": {"image": sys.argv[4]}}
)
execution = Execution(task_id=task_id, attempt=1, spec=spec, work_dir=work_dir,
                      handle_file=f"{work_dir}/handle.json", output=FileSink())
ContainerExecutor(ExecutorSettings()).run(execution, threading.Event())
"""


def test_recover_reattaches_and_continues_the_output_without_repeats(
    tmp_path: Path, runtime: None, task_id: str
) -> None:
    run = execution(tmp_path, task_id, "x")
    work_dir = Path(run.work_dir)
    stdout, stderr = work_dir / "stdout", work_dir / "stderr"
    command = "for i in $(seq 1 25); do echo line $i; echo err $i >&2; sleep 0.1; done; exit 4"
    first = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, task_id, str(work_dir), command, TEST_IMAGE],
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    try:
        wait_until(
            lambda: stdout.exists() and stdout.read_text().count("\n") >= 5,
            30,
            what="the first lines of output",
        )
    finally:
        # The whole process group, as a kill -9 of the node takes its threads.
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    handle = json.loads((work_dir / "handle.json").read_text())
    assert handle["name"] == container_name(task_id, 1)
    assert containers_named(container_name(task_id, 1)) == [container_name(task_id, 1)]

    class FileSink:
        def write(self, stream: str, data: bytes) -> None:
            with open(work_dir / stream, "ab") as out:
                out.write(data)

    offsets = {"stdout": stdout.stat().st_size, "stderr": stderr.stat().st_size}
    later = replace(run, output=FileSink(), output_offsets=offsets)
    result = ContainerExecutor(ExecutorSettings()).recover(later, handle, threading.Event())
    assert result.exit_code == 4 and not result.error
    assert stdout.read_text().splitlines() == [f"line {i}" for i in range(1, 26)]
    assert stderr.read_text().splitlines() == [f"err {i}" for i in range(1, 26)]
    # The tail is that of the whole run, as if nothing had happened.
    assert result.stdout.decode().splitlines() == [f"line {i}" for i in range(1, 26)]
    assert containers_named(f"cortex-{task_id}-") == []


def test_recover_of_a_container_that_is_gone_raises_lookup_error(
    tmp_path: Path, runtime: None, task_id: str
) -> None:
    run = execution(tmp_path, task_id, "true")
    handle = {"runtime": "podman", "name": container_name(task_id, 1), "container_id": "0"}
    with pytest.raises(LookupError, match="no longer exists"):
        executor(tmp_path).recover(run, handle, threading.Event())
    with pytest.raises(LookupError):
        executor(tmp_path).recover(run, {"name": "someone-else"}, threading.Event())
