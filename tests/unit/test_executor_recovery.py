"""An attempt whose executor saved a handle is recovered when the node
process restarts, not run again: the agent finds the handle, the executor
reattaches through `recover`, the output log carries on where it stopped,
and the result is reported once. No handle, or an executor that cannot
recover it (LookupError), and the attempt is reported lost as before."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from cortex.agent.launcher import ThreadLauncher
from cortex.executors import Execution, ExecutionResult, Executor, load_handle
from cortex.output import OutputHub
from cortex.output.log import LogEnd, LogWriter, read_all
from cortex.spec import TaskSpec
from cortex.state import entries as e
from tests.steps_by_hand import AgentByHand
from tests.workflow_sim import WorkflowLog


class DetachedOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DetachedExecutor:
    """Runs "outside" the node process: `run` saves a handle and returns what
    the test gives; `recover` returns `recovered`, or raises LookupError."""

    name = "detached"
    uses_work_dir = True
    options_model = DetachedOptions

    def __init__(self) -> None:
        self.recovered: ExecutionResult | None = None
        self.recoveries: list[tuple[Execution, dict[str, Any]]] = []

    def fingerprint(self) -> dict[str, str] | None:
        return {}

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        execution.save_handle({"job": f"{execution.task_id}-{execution.attempt}"})
        return ExecutionResult(exit_code=0)

    def recover(
        self, execution: Execution, handle: dict[str, Any], cancel: threading.Event
    ) -> ExecutionResult:
        self.recoveries.append((execution, handle))
        if self.recovered is None:
            raise LookupError(f"job {handle['job']} is gone")
        if execution.output is not None:
            skip = execution.output_offsets.get("stdout", 0)
            execution.output.write("stdout", b"one two three\n"[skip:])
        return self.recovered


class HeldLauncher:
    def __init__(self) -> None:
        self.launched: list[tuple[Execution, dict[str, Any] | None, Future[ExecutionResult]]] = []

    def launch(
        self,
        executor: Executor,
        execution: Execution,
        cancel: threading.Event,
        handle: dict[str, Any] | None = None,
    ) -> Future[ExecutionResult]:
        future: Future[ExecutionResult] = Future()
        self.launched.append((execution, handle, future))
        return future


class RestartedNode(AgentByHand):
    """The agent of a node process that just restarted, driven by hand."""

    def __init__(self, log: WorkflowLog, data_dir: Path, executor: Executor) -> None:
        super().__init__(log, data_dir, {executor.name: executor}, HeldLauncher())
        self.launcher: HeldLauncher


def running_attempt(log: WorkflowLog, task_id: str, started: bool = True) -> None:
    """An attempt of a `detached` task the log has running (or assigned) on n1."""
    assert log.one(e.TaskSubmit(task_id, {"type": "detached"}))["ok"]
    placed = log.one(e.TaskAssign([{"task_id": task_id, "node": "n1", "attempt": 1}]))
    assert placed["placed"] == 1, placed
    if started:
        assert log.one(e.TaskStarted(task_id, 1, "n1"))["ok"]


def save_handle(data_dir: Path, task_id: str, handle: dict[str, Any]) -> None:
    spec = TaskSpec.model_validate({"type": "detached"})
    work_dir = data_dir / "attempts" / task_id / "1"
    Execution(
        task_id, 1, spec, str(work_dir), handle_file=str(work_dir / "handle.json")
    ).save_handle(handle)


def task_state(log: WorkflowLog, task_id: str) -> tuple[str, int]:
    task = log.reader.get_task(task_id)
    assert task is not None
    return task.state, task.attempt


def test_save_handle_writes_json_atomically_and_nothing_without_a_file(tmp_path: Path) -> None:
    spec = TaskSpec.model_validate({"type": "noop"})
    path = tmp_path / "attempts" / "t" / "1" / "handle.json"
    Execution("t", 1, spec, str(path.parent), handle_file=str(path)).save_handle({"id": "abc"})
    assert json.loads(path.read_text()) == {"id": "abc"} == load_handle(str(path))
    assert not list(path.parent.glob("*.tmp"))
    Execution("t", 1, spec, str(tmp_path / "w")).save_handle({"id": "x"})  # no handle_file
    assert not (tmp_path / "w").exists()
    path.write_text("[1, 2]")
    assert load_handle(str(path)) is None and load_handle(str(tmp_path / "none")) is None


def test_an_attempt_with_a_handle_is_recovered_and_reported_once(
    log: WorkflowLog, tmp_path: Path
) -> None:
    running_attempt(log, "t-1")
    save_handle(tmp_path, "t-1", {"job": "t-1-1"})
    node = RestartedNode(log, tmp_path, DetachedExecutor())

    (recovery,) = node.reconcile()
    execution, handle, result = node.launcher.launched[0]
    assert handle == {"job": "t-1-1"}
    assert execution.handle_file == str(tmp_path / "attempts" / "t-1" / "1" / "handle.json")
    assert node.proposer.submitted == []  # already running: no second TASK_STARTED
    assert node.agent.running_count == 1
    assert node.reconcile() == []  # recovering: neither lost nor started again

    result.set_result(ExecutionResult(exit_code=0, stdout=b"done"))
    recovery.settle()
    (complete,) = node.proposer.payloads()
    assert isinstance(complete, e.TaskComplete) and complete.result["stdout"] == "done"
    node.proposer.apply_next()
    recovery.settle()
    assert recovery.done and task_state(log, "t-1") == ("completed", 1)
    assert node.reconcile() == [] and node.proposer.held == []
    completions = [event for event in log.reader.task_events("t-1") if event.event == "completed"]
    assert len(completions) == 1


def test_an_attempt_its_executor_cannot_recover_is_reported_lost(
    log: WorkflowLog, tmp_path: Path
) -> None:
    running_attempt(log, "t-2")
    save_handle(tmp_path, "t-2", {"job": "t-2-1"})
    node = RestartedNode(log, tmp_path, DetachedExecutor())
    (recovery,) = node.reconcile()
    _, _, result = node.launcher.launched[0]
    result.set_exception(LookupError("job t-2-1 is gone"))
    recovery.settle()
    (failed,) = node.proposer.payloads()
    assert isinstance(failed, e.TaskFailed)
    assert failed.reason == (
        "node restarted during the attempt (not recovered: LookupError: job t-2-1 is gone)"
    )
    node.proposer.apply_next()
    recovery.settle()
    assert recovery.done and task_state(log, "t-2")[0] == "queued"  # its retry
    assert node.reconcile() == []


def test_without_a_handle_a_running_attempt_is_reported_lost(
    log: WorkflowLog, tmp_path: Path
) -> None:
    running_attempt(log, "t-3")
    node = RestartedNode(log, tmp_path, DetachedExecutor())
    (lost,) = node.reconcile()
    assert node.launcher.launched == []
    (failed,) = node.proposer.payloads()
    assert isinstance(failed, e.TaskFailed) and failed.reason == "node restarted during the attempt"


def test_an_assigned_attempt_with_a_handle_is_recovered_and_marked_started(
    log: WorkflowLog, tmp_path: Path
) -> None:
    # The node died after starting the attempt but before TASK_STARTED committed.
    running_attempt(log, "t-4", started=False)
    save_handle(tmp_path, "t-4", {"job": "t-4-1"})
    node = RestartedNode(log, tmp_path, DetachedExecutor())
    (attempt,) = node.reconcile()
    (_, handle, _) = node.launcher.launched[0]
    assert handle == {"job": "t-4-1"} and not attempt.done
    node.report_held_starts()
    (started,) = node.proposer.submitted
    assert started.decode_payload() == e.TaskStarted("t-4", 1, "n1")
    assert task_state(log, "t-4") == ("running", 1)


def test_a_recovered_attempt_appends_to_its_output_log_past_what_it_holds(
    tmp_path: Path,
) -> None:
    hub = OutputHub(tmp_path / "attempts")
    first = hub.open("t-5", 1)
    first.write("stdout", b"one ")
    first.write("stderr", b"warning\n")
    del first  # the node process died: its writer never closed the log

    executor = DetachedExecutor()
    executor.recovered = ExecutionResult(exit_code=0)
    spec = TaskSpec.model_validate({"type": "detached"})
    execution = Execution("t-5", 1, spec, str(tmp_path / "attempts" / "t-5" / "1"))
    result = ThreadLauncher(hub).launch(executor, execution, threading.Event(), {"job": "x"})
    assert result.result(timeout=10).exit_code == 0
    ((recovered, _),) = executor.recoveries
    assert recovered.output_offsets == {"stdout": 4, "stderr": 8}
    directory = hub.directory("t-5", 1)
    assert read_all(directory, "stdout") == b"one two three\n"
    assert read_all(directory) == b"one warning\ntwo three\n"
    end = LogEnd.load(directory)
    assert end is not None and end.exit_code == 0 and end.total_bytes == 22


def test_a_recovery_that_finds_nothing_closes_the_log_saying_so(tmp_path: Path) -> None:
    hub = OutputHub(tmp_path / "attempts")
    hub.open("t-6", 1).write("stdout", b"partial")
    spec = TaskSpec.model_validate({"type": "detached"})
    execution = Execution("t-6", 1, spec, str(tmp_path / "attempts" / "t-6" / "1"))
    future = ThreadLauncher(hub).launch(
        DetachedExecutor(), execution, threading.Event(), {"job": "y"}
    )
    with pytest.raises(LookupError, match="job y is gone"):
        future.result(timeout=10)
    end = LogEnd.load(hub.directory("t-6", 1))
    assert end is not None and end.error == "the attempt could not be recovered: job y is gone"
    assert read_all(hub.directory("t-6", 1)) == b"partial"


def test_a_resumed_log_drops_a_torn_tail(tmp_path: Path) -> None:
    writer = LogWriter(tmp_path, segment_bytes=16, max_bytes=1 << 20)
    for i in range(6):
        writer.append("stdout" if i % 2 else "stderr", f"chunk{i}-".encode(), i)
    # A crash between a chunk's data and its index record.
    last = sorted(tmp_path.glob("*.data"))[-1]
    with open(last, "ab") as data:
        data.write(b"torn")
    resumed = LogWriter(tmp_path, segment_bytes=16, max_bytes=1 << 20, resume=True)
    assert resumed.end == 6 * 7
    assert resumed.resumed == {"stdout": 21, "stderr": 21}
    resumed.append("stdout", b"more", 99)
    resumed.close()
    assert read_all(tmp_path).endswith(b"chunk5-more")
    assert b"torn" not in read_all(tmp_path)
