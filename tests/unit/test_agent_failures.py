"""The agent's boundary: whatever an executor (or the preparation of an
attempt) raises, the attempt ends with a TASK_FAILED naming the problem and
its slot is freed; failures no retry can change fail the task at once.

The agent runs against a real StateMachine on a SQLite file; its proposals
are applied in order at the next index, as a one-node Raft log would. (And
the agent's loop starts the attempts it finds on its own thread.)"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from cortex.agent import Agent
from cortex.executors import BUILTIN_EXECUTORS, Execution, ExecutionResult, Executor
from cortex.spec import ShellOptions
from cortex.state import entries as e
from tests.cluster import wait_until
from tests.workflow_sim import WorkflowLog


class LogProposer:
    """Applies each proposal to the log's machine at once, in order."""

    def __init__(self, log: WorkflowLog) -> None:
        self._log = log
        self._lock = threading.Lock()

    def _apply(self, entry: e.Entry) -> dict[str, Any]:
        with self._lock:
            self._log.index += 1
            results = self._log.machine.apply_batch(self._log.index, e.encode_batch([entry]))
        assert results is not None
        return results[0]

    def submit(self, entry: e.Entry) -> Future[dict[str, Any]]:
        future: Future[dict[str, Any]] = Future()
        future.set_result(self._apply(entry))
        return future

    def submit_all(self, entries: list[e.Entry]) -> Future[list[dict[str, Any]]]:
        future: Future[list[dict[str, Any]]] = Future()
        future.set_result([self._apply(entry) for entry in entries])
        return future


class ExplodingExecutor:
    """A shell executor with a bug: it raises instead of returning a result."""

    name = "shell"
    uses_work_dir = True
    options_model = ShellOptions

    def __init__(self) -> None:
        self.calls = 0

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        self.calls += 1
        raise RuntimeError("disk on fire\n  (second line)")


def start_agent(log: WorkflowLog, data_dir: Path, executors: dict[str, Executor]) -> Agent:
    agent = Agent(
        "n1",
        LogProposer(log),
        log.reader,
        executors,
        str(data_dir),
        is_ready=lambda: True,
    )
    log.machine.add_listener(agent.on_change)
    agent.start()
    return agent


def submit_and_assign(log: WorkflowLog, task_id: str, spec: dict[str, Any]) -> None:
    assert log.one(e.TaskSubmit(task_id, spec))["ok"]
    assign(log, task_id, 1)


def assign(log: WorkflowLog, task_id: str, attempt: int) -> None:
    result = log.one(e.TaskAssign([{"task_id": task_id, "node": "n1", "attempt": attempt}]))
    assert result["placed"] == 1, result


def settled(log: WorkflowLog, agent: Agent, task_id: str, states: tuple[str, ...]) -> bool:
    task = log.reader.get_task(task_id)
    return task is not None and task.state in states and agent.running_count == 0


def test_an_executor_that_raises_fails_its_attempt(log: WorkflowLog, tmp_path: Path) -> None:
    exploding = ExplodingExecutor()
    agent = start_agent(log, tmp_path / "data", {"shell": exploding})
    try:
        spec = {"command": ["true"], "retryPolicy": {"maxRetries": 1, "backoffMs": 0}}
        submit_and_assign(log, "t-1", spec)
        wait_until(lambda: settled(log, agent, "t-1", ("queued",)), 10, what="first failure")
        task = log.reader.get_task("t-1")
        assert task is not None
        assert task.error == "the shell executor failed: RuntimeError: disk on fire (second line)"
        # Not a permanent failure: the retry policy still applies.
        assign(log, "t-1", 2)
        wait_until(lambda: settled(log, agent, "t-1", ("dead_letter",)), 10, what="dead letter")
        assert exploding.calls == 2
        events = [(ev.event, ev.attempt) for ev in log.reader.task_events("t-1")]
        assert ("attempt_failed", 1) in events and ("attempt_failed", 2) in events
    finally:
        agent.stop()


def test_an_attempt_that_cannot_be_prepared_fails_too(log: WorkflowLog, tmp_path: Path) -> None:
    """The data dir is a file here: the work dir cannot be made."""
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("")
    agent = start_agent(log, not_a_dir, dict(BUILTIN_EXECUTORS))
    try:
        submit_and_assign(log, "t-2", {"command": ["true"], "retryPolicy": {"maxRetries": 0}})
        wait_until(lambda: settled(log, agent, "t-2", ("failed",)), 10, what="failure")
        task = log.reader.get_task("t-2")
        assert task is not None and task.error is not None
        assert task.error.startswith("the attempt could not run on n1: NotADirectoryError")
    finally:
        agent.stop()


@pytest.mark.parametrize("duration", ["abc", 1e300])
def test_a_noop_with_bad_options_from_an_older_entry_fails_at_once(
    log: WorkflowLog, tmp_path: Path, duration: Any
) -> None:
    """What the finding reported (a task stuck `running`, holding its slot),
    for a spec apply accepted before submit checked options."""
    agent = start_agent(log, tmp_path / "data", dict(BUILTIN_EXECUTORS))
    try:
        submit_and_assign(log, "t-3", {"type": "noop", "options": {"duration_ms": duration}})
        wait_until(lambda: settled(log, agent, "t-3", ("failed",)), 10, what="failure")
        task = log.reader.get_task("t-3")
        assert task is not None and task.attempt == 1 and task.error is not None
        assert task.error.startswith("invalid spec: options.duration_ms: ")
        assert task.error.endswith("(a permanent error: not retried)")
    finally:
        agent.stop()


def test_a_missing_program_fails_without_retries(log: WorkflowLog, tmp_path: Path) -> None:
    agent = start_agent(log, tmp_path / "data", dict(BUILTIN_EXECUTORS))
    try:
        submit_and_assign(log, "t-4", {"command": ["cortex-no-such-program"]})
        wait_until(lambda: settled(log, agent, "t-4", ("failed", "queued")), 10, what="failure")
        task = log.reader.get_task("t-4")
        assert task is not None and (task.state, task.attempt) == ("failed", 1)
        assert task.error == (
            "could not start command: cortex-no-such-program: command not found "
            "(a permanent error: not retried)"
        )
        failed = [ev for ev in log.reader.task_events("t-4") if ev.event == "failed"]
        assert len(failed) == 1 and failed[0].detail.get("permanent") is True
    finally:
        agent.stop()


class HeldExecutor:
    """A shell executor whose attempts run until the test lets them end."""

    name = "shell"
    uses_work_dir = True
    options_model = ShellOptions

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        self.calls += 1
        self.release.wait(30)
        return ExecutionResult(exit_code=0)


def test_an_attempt_started_before_its_entry_reaches_the_listener_is_reported(
    log: WorkflowLog, tmp_path: Path
) -> None:
    """Apply commits an entry, then calls the listeners: in between, the
    agent's own reconcile (on its timer) may start an attempt the entry
    placed. When the entry also submitted the task, its changes say queued
    then assigned here: only the last says whose the attempt is, and it is
    still this node's to run and report."""
    executor = HeldExecutor()
    agent = Agent(
        "n1", LogProposer(log), log.reader, {"shell": executor}, str(tmp_path / "agent"),
        is_ready=lambda: True,
    )  # fmt: skip
    delivered: list[tuple[int, Any]] = []
    log.machine.add_listener(lambda index, changes: delivered.append((index, changes)))
    agent.start()
    try:
        batch = [
            e.Entry.create(e.TaskSubmit("t1", {"command": ["true"]}), "n1"),
            e.Entry.create(e.TaskAssign([{"task_id": "t1", "node": "n1", "attempt": 1}]), "n1"),
        ]
        log.index += 1
        log.machine.apply_batch(log.index, e.encode_batch(batch))
        wait_until(lambda: executor.calls == 1)  # started by the reconcile timer
        (index, changes), *_ = delivered
        assert [c.state for c in changes] == ["queued", "assigned"]
        agent.on_change(index, changes)  # the listener call comes after
        executor.release.set()
        wait_until(lambda: settled(log, agent, "t1", ("completed", "failed")))
    finally:
        executor.release.set()
        agent.stop()


class ThreadNotingLauncher:
    """Runs each attempt at once (a noop's result), noting the thread that
    launched it."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def launch(
        self,
        executor: Executor,
        execution: Execution,
        cancel: threading.Event,
        handle: dict[str, Any] | None = None,
    ) -> Future[ExecutionResult]:
        self.threads.append(threading.current_thread().name)
        future: Future[ExecutionResult] = Future()
        future.set_result(ExecutionResult(exit_code=0))
        return future


def test_the_loop_that_finds_an_attempt_starts_it(log: WorkflowLog, tmp_path: Path) -> None:
    """An assigned attempt is prepared and launched on the agent's loop
    thread (no hand-over to a step thread first); its outcome is reported."""
    launcher = ThreadNotingLauncher()
    agent = Agent(
        "n1", LogProposer(log), log.reader, dict(BUILTIN_EXECUTORS), str(tmp_path / "data"),
        is_ready=lambda: True, launcher=launcher,
    )  # fmt: skip
    log.machine.add_listener(agent.on_change)
    agent.start()
    try:
        submit_and_assign(log, "t-9", {"type": "noop"})
        wait_until(lambda: settled(log, agent, "t-9", ("completed",)), 10, what="completion")
        assert launcher.threads == ["agent-main"]
    finally:
        agent.stop()
