"""`cortex events -f` and `cortex logs -f` against a real node: a follow
ends when its task or workflow ends, and says on stderr (one line each)
why it waits and why it stopped, while stdout carries only the data."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from cortex.proto_enums import enum_names
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, shell_spec, wait_until

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "cortex.cli.main"]
NO_RETRY = pb.RetryPolicy(retryable=False)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _gated(flag: Path, then: str = "echo done") -> str:
    """A command that runs until the test creates `flag`."""
    return f"while [ ! -e {flag} ]; do sleep 0.05; done; {then}"


class _Lines:
    """The lines of a pipe, read by a thread, so a test can wait for one
    with a deadline."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.seen: list[str] = []
        self._closed = False
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe: IO[bytes]) -> None:
        for raw in pipe:
            self._queue.put(raw.decode(errors="replace").rstrip("\n"))
        self._queue.put(None)

    def _next(self, deadline: float) -> str | None:
        """The next line; None once the pipe has closed."""
        if self._closed:
            return None
        try:
            line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Empty:
            raise AssertionError(f"no further line in time; saw {self.seen}") from None
        if line is None:
            self._closed = True
        else:
            self.seen.append(line)
        return line

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        found = [line for line in self.seen if needle in line]
        while not found:
            line = self._next(deadline)
            if line is None:
                raise AssertionError(f"closed without a line with {needle!r}; saw {self.seen}")
            found = [line] if needle in line else []
        return found[0]

    def rest(self, timeout: float = 30.0) -> list[str]:
        """Every line, once the pipe has closed."""
        deadline = time.monotonic() + timeout
        while self._next(deadline) is not None:
            pass
        return self.seen


class _Follow:
    """A `cortex ...` command in the background, its stdout and stderr read
    line by line."""

    def __init__(self, cluster: Cluster, *args: str) -> None:
        self.process = subprocess.Popen(
            [*CLI, "--node", cluster.nodes[0].grpc, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=_env(),
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.out = _Lines(self.process.stdout)
        self.err = _Lines(self.process.stderr)

    def finish(self, timeout: float = 30.0) -> tuple[int, list[str], list[str]]:
        code = self.process.wait(timeout)
        return code, self.out.rest(), self.err.rest()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def _cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--node", cluster.nodes[0].grpc, *args],
        capture_output=True, text=True, timeout=60, env=_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def _state(cluster: Cluster, task_id: str) -> int:
    with cluster.nodes[0].client(timeout_s=10) as client:
        return client.get_task(task_id).task.state


def _one_notice(lines: list[str], needle: str) -> str:
    found = [line for line in lines if needle in line]
    assert len(found) == 1, lines
    assert found[0].startswith("cortex: "), found[0]
    return found[0]


# -- events -f --task / --workflow ------------------------------------------------


def test_events_follow_of_a_task_ends_with_it(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(1)
    flag = tmp_path / "go"
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(shell_spec(_gated(flag), retry_policy=NO_RETRY)).task.id
    follow = _Follow(cluster, "events", "-f", "--task", task_id, "--json")
    try:
        follow.out.wait_for('"started"')
        follow.err.wait_for("following its events until it ends")
        # Still following while the task runs.
        assert follow.process.poll() is None
        assert _state(cluster, task_id) == pb.TASK_STATE_RUNNING
        flag.touch()
        code, out, err = follow.finish()
    finally:
        follow.kill()
    assert code == 0, err
    events = [json.loads(line) for line in out]
    assert [e["event"] for e in events] == ["submitted", "assigned", "started", "completed"]
    assert {e["task_id"] for e in events} == {task_id}
    assert _one_notice(err, "ended") == f"cortex: task {task_id} ended: completed"
    assert len(err) == 2, err

    # Once it has ended: its events at once, and the same last line.
    again = _cli(cluster, "events", "-f", "--task", task_id)
    assert again.returncode == 0, _describe(again)
    assert [line.split()[2] for line in again.stdout.splitlines()][-1] == "completed"
    assert again.stderr.splitlines() == [f"cortex: task {task_id} ended: completed"]


def test_events_follow_with_an_event_filter_still_ends(make_cluster, tmp_path: Path) -> None:
    """The filter hides the event that ends the task, which must still end the follow."""
    cluster = make_cluster(1)
    flag = tmp_path / "go"
    with cluster.nodes[0].client() as client:
        spec = shell_spec(_gated(flag, "exit 4"), retry_policy=NO_RETRY)
        task_id = client.submit_task(spec).task.id
    # By a prefix of the id, as a person types it; events carry the full id.
    follow = _Follow(cluster, "events", "-f", "--task", task_id[:8], "--event", "started")
    try:
        follow.out.wait_for(" started ")
        flag.touch()
        code, out, err = follow.finish()
    finally:
        follow.kill()
    assert code == 0, err
    assert [line.split()[2] for line in out] == ["started"]
    assert err[-1] == f"cortex: task {task_id} ended: failed"


WORKFLOW = """
name: follow-me
tasks:
  first:
    spec: {{command: '{first}'}}
  second:
    dependsOn: [first]
    spec: {{command: 'echo second'}}
"""


def test_events_follow_of_a_workflow_ends_with_it(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(1)
    flag = tmp_path / "go"
    with cluster.nodes[0].client() as client:
        workflow_id = client.submit_workflow(WORKFLOW.format(first=_gated(flag))).workflow_id
        # One that never finishes by itself: cancelling it ends its follow.
        never = WORKFLOW.format(first=_gated(tmp_path / "never"))
        stuck_id = client.submit_workflow(never).workflow_id
    follow = _Follow(cluster, "events", "-f", "--workflow", workflow_id, "--json")
    stuck = _Follow(cluster, "events", "-f", "--workflow", stuck_id[:8], "--json")
    try:
        follow.out.wait_for('"started"')
        follow.err.wait_for(f"workflow {workflow_id} is running; following its events")
        assert follow.process.poll() is None
        flag.touch()
        code, out, err = follow.finish()

        stuck.out.wait_for('"started"')
        assert stuck.process.poll() is None
        with cluster.nodes[0].client() as client:
            client.cancel_workflow(stuck_id, reason="enough")
        stuck_code, stuck_out, stuck_err = stuck.finish()
    finally:
        follow.kill()
        stuck.kill()
    assert code == 0, err
    events = [json.loads(line) for line in out]
    assert events[-1]["event"] == "workflow_completed", out
    assert [e["event"] for e in events].count("completed") == 2
    assert _one_notice(err, "ended") == f"cortex: workflow {workflow_id} ended: completed"

    assert stuck_code == 0, stuck_err
    names = [json.loads(line)["event"] for line in stuck_out]
    assert "workflow_cancelled" in names and names[-1] in ("cancelled", "workflow_cancelled")
    assert _one_notice(stuck_err, "ended") == f"cortex: workflow {stuck_id} ended: cancelled"


def test_events_with_an_unknown_event_name_is_refused(make_cluster) -> None:
    cluster = make_cluster(1)
    for args in (["events", "--event", "bogus"], ["events", "-f", "--event", "Bogus"]):
        refused = _cli(cluster, *args)
        assert refused.returncode in (1, 2), _describe(refused)
        assert refused.stdout == ""
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1, _describe(refused)
        assert "--event" in lines[0] and "bogus" in lines[0].lower()
        # Every valid name is listed.
        for name in enum_names(pb.EventType):
            assert name in lines[0], name
    # A valid name, in any case, is taken.
    ok = _cli(cluster, "events", "--event", "NODE_JOINED")
    assert ok.returncode == 0, _describe(ok)
    assert ok.stdout.split()[2] == "node_joined"


# -- logs -f ----------------------------------------------------------------------


def test_logs_follow_of_a_queued_task_says_it_waits_then_streams(make_cluster) -> None:
    cluster = make_cluster(1)
    node = cluster.nodes[0]
    with node.client() as client:
        client.cordon_node(node.node_id)
        spec = shell_spec("echo out; echo err >&2; exit 0", retry_policy=NO_RETRY)
        task_id = client.submit_task(spec).task.id
    follow = _Follow(cluster, "logs", "-f", task_id)
    try:
        notice = follow.err.wait_for("waiting for it to start")
        assert notice.startswith(f"cortex: task {task_id} is queued"), notice
        assert _state(cluster, task_id) == pb.TASK_STATE_QUEUED
        assert follow.process.poll() is None
        with node.client() as client:
            client.uncordon_node(node.node_id)
        code, out, err = follow.finish()
    finally:
        follow.kill()
    assert code == 0, err
    assert out == ["out"]
    # The notice, then the task's own stderr, byte for byte.
    assert err == [notice, "err"]


def test_logs_of_a_task_cancelled_before_it_ran_says_so(make_cluster) -> None:
    cluster = make_cluster(1)
    node = cluster.nodes[0]
    with node.client() as client:
        client.cordon_node(node.node_id)
        task_id = client.submit_task(shell_spec("echo never", retry_policy=NO_RETRY)).task.id
    queued = _cli(cluster, "logs", task_id)
    assert queued.returncode == 0, _describe(queued)
    assert queued.stdout == ""
    assert queued.stderr.splitlines() == [
        f"cortex: task {task_id} is queued and has not run yet; -f waits for its output"
    ]
    with node.client() as client:
        client.cancel_task(task_id, reason="changed my mind")
        wait_until(lambda: _state(cluster, task_id) == pb.TASK_STATE_CANCELLED, 30)
    expected = [
        f"cortex: task {task_id} was cancelled before it ran (changed my mind); it has no output"
    ]
    for args, code in ((["logs", task_id], 0), (["logs", "-f", task_id], 1)):
        result = _cli(cluster, *args)
        assert result.returncode == code, _describe(result)
        assert result.stdout == "", _describe(result)
        assert result.stderr.splitlines() == expected, _describe(result)
    as_json = _cli(cluster, "logs", "-f", task_id, "--json")
    assert as_json.returncode == 1, _describe(as_json)
    assert json.loads(as_json.stdout)["end"]["state"] == "cancelled"
    assert as_json.stderr.splitlines() == expected
