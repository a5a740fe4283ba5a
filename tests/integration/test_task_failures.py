"""Tasks that cannot run, on real nodes: executor options refused at submit
(tasks and workflow tasks, nothing written), a program that does not exist
failing at once without retries and saying so in `cortex task get`; and the
secret a lone node makes up, private from the moment it exists."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cortex.errors import InvalidArgument
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import free_ports, shell_spec, wait_until, write_secret

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "cortex.cli.main"]


def cli_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}


def test_bad_options_are_refused_and_a_missing_program_fails_at_once(make_cluster):
    cluster = make_cluster(1)
    node = cluster.nodes[0]
    with node.client() as client:
        for options in ({"duration_ms": "abc"}, {"duration_ms": 1e300}, {"sleep": 1}):
            with pytest.raises(InvalidArgument, match=r"^spec\.options\.(duration_ms|sleep): "):
                client.submit_task(pb.TaskSpec(type="noop", options=options))
        workflow = json.dumps({
            "name": "bad-noop",
            "tasks": {"wait": {"type": "noop", "spec": {"options": {"duration_ms": "abc"}}}},
        })  # fmt: skip
        with pytest.raises(InvalidArgument, match=r"tasks\.wait\.spec\.options\.duration_ms"):
            client.submit_workflow(workflow, pb.DEFINITION_FORMAT_JSON)
        with pytest.raises(InvalidArgument, match=r"spec\.command\.1: contains a NUL byte"):
            client.submit_task(shell_spec(["echo", "a\x00b"]))
        assert client.list_tasks().total_size == 0 and client.list_workflows().total_size == 0

        fine = client.submit_task(pb.TaskSpec(type="noop", options={"duration_ms": 10}))
        assert fine.task.spec.options["duration_ms"] == 10
        result = client.get_task_result(fine.task.id, wait=True, timeout_ms=30_000)
        assert result.task.state == pb.TASK_STATE_COMPLETED

        missing = client.submit_task(shell_spec(["cortex-no-such-program", "--flag"])).task.id
        task = client.get_task_result(missing, wait=True, timeout_ms=30_000).task
        assert (task.state, task.attempt) == (pb.TASK_STATE_FAILED, 1), task
        assert task.error == (
            "could not start command: cortex-no-such-program: command not found "
            "(a permanent error: not retried)"
        )
        events = [ev.type for ev in client.get_task(missing, include_events=True).events]
        assert pb.EVENT_TYPE_RETRIED not in events and events.count(pb.EVENT_TYPE_FAILED) == 1

    shown = subprocess.run(
        [*CLI, "--node", node.grpc, "task", "get", missing],
        capture_output=True, text=True, timeout=60, env={**cli_env(), "COLUMNS": "250"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "failed" in shown.stdout and "a permanent error: not retried" in shown.stdout


def test_a_lone_node_keeps_its_secret_private(make_cluster):
    cluster = make_cluster(1, start=False)
    node = cluster.nodes[0]
    node.start(secret=None)  # no peers, no secret: it makes one up
    wait_until(lambda: node.status().leader_raft_address, 60, what="the lone node to lead")
    path = node.data_dir / "secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_text().strip()) >= 16
    assert not list(node.data_dir.glob(".secret*"))  # no temporary left behind
    first = path.read_text()
    node.stop()
    node.start(secret=None)
    wait_until(lambda: node.status().leader_raft_address, 60, what="the node to lead again")
    assert path.read_text() == first and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_short_or_doubly_given_secret_is_refused_at_start(tmp_path: Path) -> None:
    raft, other, grpc_port = free_ports(3)
    base = [*CLI, "node", "start", "--raft", f"127.0.0.1:{raft}", "--grpc",
            f"127.0.0.1:{grpc_port}", "--peers", f"127.0.0.1:{raft},127.0.0.1:{other}",
            "--data-dir", str(tmp_path / "data")]  # fmt: skip
    short = write_secret(tmp_path / "short", "too-short")
    result = subprocess.run([*base, "--secret-file", str(short)], capture_output=True,
                            text=True, timeout=60, env=cli_env())  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"cortex: config key secret (from file {short} (flag --secret-file)): is 9 bytes; "
        "a cluster secret needs at least 16 (make one with: python3 -c "
        "'import secrets; print(secrets.token_urlsafe(32))')"
    ]
    good = write_secret(tmp_path / "good", "a-long-enough-cluster-secret")
    both = subprocess.run([*base, "--secret-file", str(good)], capture_output=True, text=True,
                          timeout=60, env={**cli_env(), "CORTEX_SECRET": "another-long-secret"})  # fmt: skip
    assert both.returncode == 1
    assert "config key secret_file (from flag --secret-file): secret is set too (from " \
        "environment variable CORTEX_SECRET)" in both.stderr  # fmt: skip
    assert len(both.stderr.strip().splitlines()) == 1
