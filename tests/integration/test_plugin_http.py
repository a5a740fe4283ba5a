"""A third-party executor: the example package plugins/cortex-exec-http,
installed with pip beside Cortex on two nodes of a real 3-node cluster (the
third has no such plugin), is found through its `cortex.executors` entry
point, advertised by those nodes, and runs an HTTP request as a task end to
end. Malformed specs of every executor are refused at submit, naming the
field; a node without the plugin takes http tasks only because others run
them, and the node about to run one checks its options again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google.protobuf.struct_pb2 import Struct

from cortex.errors import InvalidArgument
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, serve_cluster, wait_until
from tests.executor_plugins import install_http_plugin

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "cortex.cli.main"]
BODY = b"hello from the test server\n"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        status = 200 if self.path == "/hello" else 404
        body = BODY if status == 200 else b"no such page\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    site = install_http_plugin(tmp_path_factory.mktemp("http-plugin"))
    cluster = Cluster(tmp_path_factory.mktemp("plugin-cluster"), 3)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    for node in cluster.nodes[:2]:
        node.env["PYTHONPATH"] = path
    yield from serve_cluster(cluster, request)


def cli(node: ClusterNode, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    return subprocess.run(
        [*CLI, "--node", node.grpc, *args],
        capture_output=True, text=True, timeout=60, env={**env, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def http_spec(options: dict[str, Any], **fields: Any) -> pb.TaskSpec:
    spec = pb.TaskSpec(type="http", **fields)
    spec.options.CopyFrom(_struct(options))
    return spec


def _struct(data: dict[str, Any]) -> Struct:
    struct = Struct()
    struct.update(data)
    return struct


def finished(node: ClusterNode, task_id: str, session_index: int = 0) -> pb.Task:
    """The task once finished, read on `node` at least at `session_index`
    (the submitting client's, when another node took the submit)."""
    with node.client() as client:
        client.advance_session(session_index)
        task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
    assert enum_name(pb.TaskState, task.state) in ("completed", "failed", "dead_letter"), task
    return task


def test_the_nodes_with_the_plugin_advertise_it(cluster: Cluster) -> None:
    n1, n2, n3 = cluster.nodes

    def advertised() -> list[dict[str, Any]] | None:
        result = cli(n3, "executors", "list", "--json")
        assert result.returncode == 0, result.stderr
        nodes = json.loads(result.stdout)
        reported = all(n["capabilities"] or n["unavailable"] for n in nodes)
        return nodes if reported else None

    nodes = {n["node_id"]: n for n in wait_until(advertised, 30, what="heartbeat reports")}
    for name in ("n1", "n2"):
        assert "http" in nodes[name]["executors"], nodes[name]
        assert nodes[name]["capabilities"]["http.client"] == "urllib"
    assert "http" not in nodes["n3"]["executors"]
    assert {"shell", "noop"} <= set(nodes["n3"]["executors"])
    # The table names each node's types, and why one is left out.
    table = cli(n1, "executors", "list")
    assert table.returncode == 0 and "http.client=urllib" in table.stdout, table
    # `node list --json` carries executors and capabilities too.
    listed = json.loads(cli(n1, "node", "list", "--json").stdout)
    n1_row = next(n for n in listed if n["node_id"] == "n1")
    assert "http" in n1_row["executors"] and n1_row["capabilities"]["http.client"] == "urllib"


def test_an_http_task_runs_end_to_end_on_a_node_with_the_plugin(cluster: Cluster, web: str) -> None:
    n1, _, n3 = cluster.nodes
    with n3.client() as client:  # n3 has no plugin: taken because n1 and n2 run http
        task_id = client.submit_task(http_spec({"url": f"{web}/hello"})).task.id
        submitted_at = client.session_index
    task = finished(n1, task_id, submitted_at)
    assert enum_name(pb.TaskState, task.state) == "completed", task
    assert task.node_id in ("n1", "n2")
    assert task.result.exit_code == 0 and task.result.stdout == BODY
    assert task.result.stderr == b"HTTP 200 OK\n"
    # The body streams through the attempt's output log like any task's.
    logs = cli(n3, "logs", task_id, "--stdout")
    assert logs.returncode == 0 and logs.stdout == BODY.decode(), logs


def test_an_unexpected_status_fails_the_task(cluster: Cluster, web: str) -> None:
    n1 = cluster.nodes[0]
    spec = http_spec({"url": f"{web}/missing"}, retry_policy=pb.RetryPolicy(max_retries=0))
    with n1.client() as client:
        task_id = client.submit_task(spec).task.id
    task = finished(n1, task_id)
    assert enum_name(pb.TaskState, task.state) == "failed"
    assert task.result.error == "status 404, expected 200" and task.result.exit_code == 1


@pytest.mark.parametrize(
    ("task_type", "options", "field"),
    [
        ("http", {"method": "GET"}, "spec.options.url: Field required"),
        ("http", {"url": "ftp://x"}, "spec.options.url: Value error, must be an http"),
        ("http", {"url": "http://x", "expectStatus": 42}, "spec.options.expectStatus:"),
        ("container", {"memoryMb": 64}, "spec.options.image: Field required"),
        ("subagent", {}, "spec.options.prompt: Field required"),
        ("k8s_job", {"namespace": "default"}, "spec.options.image: Field required"),
        ("noop", {"duration_ms": -1}, "spec.options.duration_ms:"),
        ("no_such_type", {}, "spec.type: unknown task type 'no_such_type' (known: "),
    ],
)
def test_a_malformed_spec_is_refused_at_submit_naming_the_field(
    cluster: Cluster, task_type: str, options: dict[str, Any], field: str
) -> None:
    spec = pb.TaskSpec(type=task_type, command=["true"])
    spec.options.CopyFrom(_struct(options))
    with cluster.nodes[1].client() as client, pytest.raises(InvalidArgument) as refused:
        client.submit_task(spec)
    assert (
        str(refused.value)
        .replace("Value error, ", "")
        .startswith(field.replace("Value error, ", ""))
    ), refused.value


def test_the_cli_names_the_field_too(cluster: Cluster) -> None:
    result = cli(cluster.nodes[0], "task", "submit", "--type", "http", "--option", "method=GET")
    assert result.returncode == 1 and "spec.options.url: Field required" in result.stderr, result


def test_a_node_without_the_plugin_cannot_check_its_options_but_the_runner_does(
    cluster: Cluster,
) -> None:
    n3 = cluster.nodes[2]
    spec = http_spec({"method": "GET"}, retry_policy=pb.RetryPolicy(max_retries=2))
    with n3.client() as client:
        task_id = client.submit_task(spec).task.id
    task = finished(n3, task_id)
    assert enum_name(pb.TaskState, task.state) == "failed", task
    assert task.attempt == 1  # a permanent error: not retried
    assert "invalid spec: options.url: Field required" in task.result.error
