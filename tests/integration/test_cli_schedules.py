"""`cortex schedule ...`, `cortex limit ...`, the keys of `cortex task
submit` and the sections they add to `cortex status`, run as real
subprocesses against a real one-node cluster: every command's --json and
table output, and the refusals of the node as one line, exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, shared_cluster

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "cortex.cli.main"]


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "cli-schedules", size=1)


def cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env["COLUMNS"] = "250"
    return subprocess.run(
        [*CLI, "--node", cluster.nodes[0].grpc, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def ok(cluster: Cluster, *args: str) -> str:
    result = cli(cluster, *args)
    assert result.returncode == 0, describe(result)
    return result.stdout


def as_json(cluster: Cluster, *args: str) -> Any:
    """The JSON a command prints with --json (given before any `-- CMD`)."""
    words = list(args)
    at = words.index("--") if "--" in words else len(words)
    return json.loads(ok(cluster, *words[:at], "--json", *words[at:]))


def refused(cluster: Cluster, *args: str) -> str:
    """The one line a refusal of the node prints, exit 1."""
    result = cli(cluster, *args)
    assert result.returncode == 1 and not result.stdout.strip(), describe(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cortex: "), describe(result)
    return lines[0]


def wait_for(check: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_task_schedule_from_create_to_delete(cluster: Cluster) -> None:
    create = ["schedule", "create", "ticker", "--every", "1s", "--overlap", "allow_all",
              "--catchup-window", "10s", "--priority", "7", "--concurrency-key", "tick-key",
              "--", "sh", "-c", "echo tick"]  # fmt: skip
    created = as_json(cluster, *create)
    assert created["created"] is True
    schedule = created["schedule"]
    assert schedule["id"].startswith("sch-") and schedule["name"] == "ticker"
    assert (schedule["every_ms"], schedule["cron"], schedule["timing"]) == (1000, None, "every 1s")
    assert schedule["overlap"] == "allow_all" and schedule["catchup_window_ms"] == 10_000
    assert schedule["task"]["command"] == ["sh", "-c", "echo tick"]
    assert schedule["task"]["priority"] == 7
    assert schedule["task"]["concurrencyKey"] == "tick-key"
    assert schedule["paused"] is False and schedule["next_slot"]
    # The same settings again: the same schedule, not created; others: refused.
    again = as_json(cluster, *create)
    assert again["created"] is False and again["schedule"]["id"] == schedule["id"]
    assert "taken by schedule" in refused(
        cluster, "schedule", "create", "ticker", "--every", "2s", "--", "true"
    )

    with cluster.nodes[0].client() as client:
        wait_for(lambda: client.get_schedule("ticker").schedule.fired >= 2, "two firings")
    fired = as_json(cluster, "schedule", "get", "ticker")
    firing = fired["recent"][0]
    assert firing["action"] == "fire" and firing["task_id"] and firing["slot"]
    assert fired["fired"] >= 2 and fired["last_fired_at"] and fired["last_slot"]
    listed = as_json(cluster, "schedule", "list")["schedules"]
    assert [s["id"] for s in listed if s["name"] == "ticker"] == [schedule["id"]]

    paused = as_json(cluster, "schedule", "pause", "ticker")
    assert paused["paused"] is True and paused["next_slot"] is None
    triggered = as_json(cluster, "schedule", "trigger", schedule["id"])
    assert triggered["task_id"] and triggered["workflow_id"] is None
    table = ok(cluster, "schedule", "get", "ticker")
    for needle in ("every 1s", "allow_all", "catch-up window", "10s", "paused", "yes",
                   "concurrency tick-key", "recent firings", "trigger", "started by hand",
                   triggered["task_id"], "fire"):  # fmt: skip
        assert needle in table, table
    assert ok(cluster, "schedule", "resume", "ticker").startswith("ticker resumed; next at ")

    deleted = as_json(cluster, "schedule", "delete", "ticker")
    assert deleted["id"] == schedule["id"]
    for verb in ("get", "trigger"):
        assert "no schedule named 'ticker'" in refused(cluster, "schedule", verb, "ticker")
    with cluster.nodes[0].client() as client:
        # The tasks it started stay.
        assert client.get_task(triggered["task_id"]).task.spec.priority == 7


def test_a_workflow_schedule_from_a_yaml_file(cluster: Cluster, tmp_path: Path) -> None:
    definition = tmp_path / "nightly.yaml"
    definition.write_text(
        "name: nightly-build\ntasks:\n  build:\n    type: shell\n    spec: {command: 'echo built'}\n"
    )
    line = ok(
        cluster, "schedule", "create", "nightly", "--cron", "0 3 * * *", "--timezone",
        "Europe/Berlin", "--overlap", "buffer_one", "--paused", "--workflow", str(definition),
    )  # fmt: skip
    assert line.startswith("nightly (sch-") and "created; paused" in line
    schedule = as_json(cluster, "schedule", "get", "nightly")
    assert schedule["cron"] == "0 3 * * *" and schedule["timezone"] == "Europe/Berlin"
    assert schedule["timing"] == "0 3 * * * (Europe/Berlin)"
    assert schedule["workflow_format"] == "yaml" and schedule["task"] is None
    assert "nightly-build" in schedule["workflow_definition"]
    started = ok(cluster, "schedule", "trigger", "nightly")
    assert started.startswith("started workflow ")
    with cluster.nodes[0].client() as client:
        assert client.get_workflow(started.split()[-1]).workflow.name == "nightly-build"
    listing = ok(cluster, "schedule", "list")
    assert "fired/missed/skipped" in listing and "0 3 * * * (Europe/Berlin)" in listing
    assert "buffer_one" in listing

    missing = tmp_path / "missing.yaml"
    assert f"cannot read {missing}" in refused(
        cluster, "schedule", "create", "broken", "--every", "1h", "--workflow", str(missing)
    )
    definition.write_text("name: broken\ntasks:\n  a: {type: shell, dependsOn: [b]}\n")
    assert "dependsOn" in refused(
        cluster, "schedule", "create", "broken", "--every", "1h", "--workflow", str(definition)
    )
    assert ok(cluster, "schedule", "list", "-o", "name").split() == ["nightly"]
    with cluster.nodes[0].client() as client:
        client.delete_schedule("nightly")


def test_limits_weights_and_the_keys_of_a_task(cluster: Cluster) -> None:
    limit = as_json(cluster, "limit", "set", "deploy", "--max-running", "1", "--rate", "5/s")
    assert (limit["key"], limit["max_running"], limit["rate_per_minute"]) == ("deploy", 1, 300)
    assert (limit["rate"], limit["burst"]) == ("5/s", 5)
    assert ok(cluster, "limit", "set", "deploy", "--max-running", "1").strip() == (
        "deploy: at most 1 running"
    )
    first = as_json(cluster, "task", "submit", "--concurrency-key", "deploy", "--fairness-key",
                    "team-a", "--", "sleep", "30")["id"]  # fmt: skip
    second = as_json(cluster, "task", "submit", "--concurrency-key", "deploy", "--", "true")["id"]
    with cluster.nodes[0].client() as client:
        running = wait_for(
            lambda: (t := client.get_task(first).task).state == pb.TASK_STATE_RUNNING and t,
            "the first task to run",
        )
        assert (running.concurrency_key, running.fairness_key) == ("deploy", "team-a")
        wait_for(lambda: client.get_task(second).task.pending_reasons, "a reason it waits")
    held = as_json(cluster, "task", "get", second)
    assert held["state"] == "queued"
    assert any("deploy at 1/1 running" in reason for reason in held["pending_reasons"])
    shown = ok(cluster, "task", "get", second)
    assert "concurrency deploy" in shown and "deploy at 1/1 running" in shown

    weight = as_json(cluster, "limit", "set-weight", "team-a", "3")
    assert weight == {"key": "team-a", "weight": 3, "queued": 0, "active": 1}
    listed = as_json(cluster, "limit", "list")
    by_key = {limit["key"]: limit for limit in listed["limits"]}
    assert by_key["deploy"]["running"] == 1 and by_key["deploy"]["queued"] == 1
    assert weight in listed["weights"]
    table = ok(cluster, "limit", "list")
    assert "deploy" in table and "1/1" in table and "team-a" in table and "fairness key" in table

    status = as_json(cluster, "status")
    assert "deploy" in {limit["key"] for limit in status["limits"]}
    assert set(status["schedules"]) == {"count", "paused", "next"}
    human = ok(cluster, "status")
    assert "schedules:" in human and "limits: deploy 1/1 running" in human

    deleted = as_json(cluster, "limit", "delete", "deploy")
    assert deleted["key"] == "deploy" and deleted["max_running"] == 1
    assert "no limit on key 'deploy'" in refused(cluster, "limit", "delete", "deploy")
    with cluster.nodes[0].client() as client:
        # Without its limit, the held task runs.
        done = client.get_task_result(second, wait=True, timeout_ms=20_000).task
        assert done.state == pb.TASK_STATE_COMPLETED
        client.cancel_task(first)
