"""`cortex task submit --from-file` against a real 3-node cluster: a JSON
Lines file of task specs is submitted and its tasks run; running it again
(through another node) submits nothing twice; a bad line is named, exit 2,
and nothing is sent; standard input and `-o json` work; a task refused alone
is reported and the exit code says so; the flags of a single task are
refused with a file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.api.client import CortexClient
from cortex.requests import MAX_SUBMIT_BATCH
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, shared_cluster

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "cortex.cli.main"]
UUID = r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "submit-file")


def cli(
    node: ClusterNode, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env["COLUMNS"] = "250"
    return subprocess.run(
        [*CLI, "--node", node.grpc, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr}"


def jsonl(*lines: dict[str, Any] | str) -> str:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)


def task_count(node: ClusterNode) -> int:
    with node.client() as client:
        client.consistency = pb.READ_CONSISTENCY_LINEARIZABLE
        return client.list_tasks(page_size=1).total_size


def table_rows(stdout: str) -> dict[int, tuple[str, str]]:
    """Line number -> (task id, result) from the table of a submission."""
    rows = {}
    for text in stdout.splitlines():
        found = re.match(rf"^\s*(\d+)\s+({UUID})?\s+(\S.*?)\s*$", text)
        if found:
            rows[int(found.group(1))] = (found.group(2) or "", found.group(3))
    return rows


def wait_done(client: CortexClient, task_id: str) -> pb.Task:
    return client.get_task_result(task_id, wait=True, timeout_ms=60_000).task


def test_a_file_is_submitted_and_running_it_again_submits_nothing_twice(
    cluster: Cluster, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        jsonl(
            {"command": ["echo", "first"]},
            "",
            {"command": "echo second", "timeoutMs": 60000, "priority": 7},
            {"command": ["echo", "third"], "retryPolicy": {"maxRetries": 0}},
            "   ",
            {"type": "noop", "idempotencyKey": "file-own-key"},
            {"command": ["echo", "first"]},
        )
    )
    before = task_count(cluster.nodes[0])
    first = cli(cluster.nodes[0], "task", "submit", "--from-file", str(tasks))
    assert first.returncode == 0, describe(first)
    rows = table_rows(first.stdout)
    assert sorted(rows) == [1, 3, 4, 6, 7], describe(first)
    assert all(result == "created" for _, result in rows.values()), describe(first)
    ids = {line: task_id for line, (task_id, _) in rows.items()}
    # Two lines alike are two tasks: each line has a key of its own.
    assert len(set(ids.values())) == 5
    assert "5 created, 0 existing, 0 refused" in first.stdout
    assert task_count(cluster.nodes[0]) == before + 5

    with cluster.nodes[0].client() as client:
        outputs = {line: wait_done(client, ids[line]) for line in (1, 3, 4, 7)}
        assert {line: t.result.stdout for line, t in outputs.items()} == {
            1: b"first\n",
            3: b"second\n",
            4: b"third\n",
            7: b"first\n",
        }
        assert client.get_task(ids[3]).task.spec.priority == 7
        assert client.get_task(ids[6]).task.idempotency_key == "file-own-key"

    again = cli(cluster.nodes[2], "task", "submit", "--from-file", str(tasks))
    assert again.returncode == 0, describe(again)
    rerun = table_rows(again.stdout)
    assert {line: task_id for line, (task_id, _) in rerun.items()} == ids
    assert all(result.startswith("existing") for _, result in rerun.values()), describe(again)
    assert task_count(cluster.nodes[0]) == before + 5

    # Edited: one line changed, one added in front. Only those two are new.
    lines = tasks.read_text().splitlines()
    lines[2] = json.dumps({"command": "echo second", "timeoutMs": 60000, "priority": 8})
    tasks.write_text(jsonl(json.dumps({"type": "noop"}), *lines))
    edited = cli(cluster.nodes[1], "task", "submit", "--from-file", str(tasks))
    assert edited.returncode == 0, describe(edited)
    results = {line: result for line, (_, result) in table_rows(edited.stdout).items()}
    assert results == {
        1: "created",
        2: results[2],
        4: "created",
        5: results[5],
        7: results[7],
        8: results[8],
    }, describe(edited)
    assert all(results[line].startswith("existing") for line in (2, 5, 7, 8)), describe(edited)
    assert task_count(cluster.nodes[0]) == before + 7


def test_a_bad_line_is_named_and_nothing_is_submitted(cluster: Cluster, tmp_path: Path) -> None:
    node = cluster.nodes[1]
    good = {"command": ["echo", "never"]}
    cases = {
        "priority": ([good, good, {"command": ["true"], "priority": 11}], "line 3: ", "priority"),
        "json": ([good, '{"command": ["true"'], "line 2: ", "not valid JSON"),
        "object": (["", good, '["echo", "hi"]'], "line 3: ", "must be a JSON object"),
        "field": ([{"command": ["true"], "prio": 1}], "line 1: ", "prio"),
        "key": ([good, {"command": ["true"], "idempotencyKey": 7}], "line 2: ", "idempotencyKey"),
    }
    before = task_count(node)
    for name, (lines, where, problem) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(jsonl(*lines))
        result = cli(node, "task", "submit", "--from-file", str(path))
        assert result.returncode == 2, describe(result)
        assert result.stdout == "", describe(result)
        err = result.stderr.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, describe(result)
        assert where in err and problem in err, describe(result)
    assert task_count(node) == before


def test_standard_input_and_json_output(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    lines = jsonl({"command": ["echo", "piped"]}, {"type": "noop"})
    result = cli(node, "task", "submit", "--from-file", "-", "-o", "json", stdin=lines)
    assert result.returncode == 0, describe(result)
    tasks = json.loads(result.stdout)["tasks"]
    assert [(t["line"], t["created"]) for t in tasks] == [(1, True), (2, True)]
    with node.client() as client:
        assert wait_done(client, tasks[0]["id"]).result.stdout == b"piped\n"
    again = cli(node, "task", "submit", "--from-file", "-", "--json", stdin=lines)
    assert again.returncode == 0, describe(again)
    repeated = json.loads(again.stdout)["tasks"]
    assert [(t["id"], t["created"]) for t in repeated] == [(t["id"], False) for t in tasks]


def test_a_task_refused_alone_is_reported_and_the_exit_code_says_so(
    cluster: Cluster, tmp_path: Path
) -> None:
    node = cluster.nodes[1]
    with node.client() as client:
        held = client.submit_task(pb.TaskSpec(command=["echo", "held"]), "file-held").task
    path = tmp_path / "conflict.jsonl"
    path.write_text(
        jsonl(
            {"type": "noop"},
            {"command": ["echo", "different"], "idempotency_key": "file-held"},
            {"type": "noop"},
        )
    )
    result = cli(node, "task", "submit", "--from-file", str(path))
    assert result.returncode == 1, describe(result)
    rows = table_rows(result.stdout)
    assert rows[1][1] == "created" and rows[3][1] == "created", describe(result)
    assert rows[2][0] == "" and rows[2][1].startswith("refused (ALREADY_EXISTS)"), describe(result)
    assert held.id in rows[2][1]
    as_json = cli(node, "task", "submit", "--from-file", str(path), "-o", "json")
    assert as_json.returncode == 1, describe(as_json)
    refused = json.loads(as_json.stdout)["tasks"][1]
    assert refused["line"] == 2 and refused["code"] == "ALREADY_EXISTS"
    assert "file-held" in refused["error"] and "id" not in refused


def test_more_tasks_than_a_call_holds_go_in_several_calls(cluster: Cluster, tmp_path: Path) -> None:
    node = cluster.nodes[2]
    count = MAX_SUBMIT_BATCH + 5
    path = tmp_path / "many.jsonl"
    path.write_text(jsonl(*[{"type": "noop", "labels": {"n": str(i)}} for i in range(count)]))
    before = task_count(node)
    result = cli(node, "task", "submit", "--from-file", str(path), "-o", "json")
    assert result.returncode == 0, describe(result)
    tasks = json.loads(result.stdout)["tasks"]
    assert [t["line"] for t in tasks] == list(range(1, count + 1))
    assert all(t["created"] for t in tasks) and len({t["id"] for t in tasks}) == count
    assert task_count(node) == before + count


def test_the_flags_of_a_single_task_are_refused_with_a_file(
    cluster: Cluster, tmp_path: Path
) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(jsonl({"command": ["true"]}))
    node = cluster.nodes[0]
    before = task_count(node)
    for extra, named in (
        (["--", "echo", "hi"], "CMD"),
        (["--priority", "3"], "--priority"),
        (["--shell", "--idempotency-key", "k"], "--shell, --idempotency-key"),
        (["--type", "noop"], "--type"),
    ):
        result = cli(node, "task", "submit", "--from-file", str(path), *extra)
        assert result.returncode == 2, describe(result)
        err = result.stderr.strip()
        assert len(err.splitlines()) == 1, describe(result)
        assert f"--from-file cannot be combined with {named}" in err, describe(result)
    missing = cli(node, "task", "submit", "--from-file", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2 and "absent.jsonl" in missing.stderr, describe(missing)
    assert task_count(node) == before
