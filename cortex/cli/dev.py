"""`cortex dev`: a local N-node cluster of real `cortex node start`
processes in the background; `cortex demo`: the same, plus example tasks."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from cortex.api.client import CortexClient
from cortex.cli import render
from cortex.defaults import DEFAULT_GRPC_ADDRESS
from cortex.errors import CortexError, Unavailable
from cortex.v1 import cortex_pb2 as pb

_STATE_FILE = "dev-cluster.json"
# Where `cortex demo` without --base-port looks for free ports: Raft from
# 17100, gRPC from 17200, HTTP from 17300, clear of the defaults of `cortex
# node start` and `cortex dev` (7100, 7200 and 7300).
DEMO_BASE_PORT = 17100
# A local cluster's ports from its base port: node i (from 0) has Raft on
# base+i, gRPC on base+100+i and HTTP (metrics) on base+200+i.
GRPC_OFFSET = 100
HTTP_OFFSET = 200
PORT_LAYOUT = "Raft ports from N, gRPC ports from N+100, HTTP ports from N+200"


@dataclass(frozen=True)
class DevNode:
    node_id: str
    raft: str
    grpc: str
    data_dir: str
    pid: int = 0
    # The HTTP listener (metrics); empty in the state files of older versions.
    http: str = ""


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def ports_free(base_port: int, count: int) -> bool:
    """Whether every port of a `count`-node local cluster from `base_port` is free."""
    return all(
        port_free(base_port + offset + i)
        for i in range(count)
        for offset in (0, GRPC_OFFSET, HTTP_OFFSET)
    )


def _plaintext_env() -> dict[str, str]:
    """This environment without TLS settings: a dev cluster serves plain gRPC
    on 127.0.0.1."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_TLS_")}


def plan_nodes(count: int, base_port: int, data_dir: Path) -> list[DevNode]:
    return [
        DevNode(
            node_id=f"node-{i + 1}",
            raft=f"127.0.0.1:{base_port + i}",
            grpc=f"127.0.0.1:{base_port + GRPC_OFFSET + i}",
            http=f"127.0.0.1:{base_port + HTTP_OFFSET + i}",
            data_dir=str(data_dir / f"node-{i + 1}"),
        )
        for i in range(count)
    ]


def check_plan(nodes: list[DevNode], data_dir: Path) -> None:
    """Refuses a plan whose ports are taken or whose data dir holds a
    running dev cluster, naming the flag that changes it."""
    if not 1 <= len(nodes) <= 9:
        raise CortexError("--nodes must be between 1 and 9")
    addresses = [a for n in nodes for a in (n.raft, n.grpc, n.http)]
    ports = [_port(address) for address in addresses]
    if min(ports) < 1 or max(ports) > 65535:
        raise CortexError(
            f"--base-port {ports[0]} gives ports {min(ports)}-{max(ports)}, outside 1-65535"
        )
    if (data_dir / _STATE_FILE).exists():
        raise CortexError(
            f"a dev cluster already runs from {data_dir}; stop it with `{stop_command(data_dir)}`"
        )
    busy = [address for address in addresses if not port_free(_port(address))]
    if busy:
        raise CortexError(
            f"ports already in use: {', '.join(busy)}; choose others with --base-port N "
            f"({PORT_LAYOUT})"
        )


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def stop_command(data_dir: Path) -> str:
    """The command that stops the dev cluster of `data_dir`, from any directory."""
    return f"cortex dev stop --data-dir {shlex.quote(str(data_dir.resolve()))}"


def describe_plan(nodes: list[DevNode], data_dir: Path) -> str:
    """One line: every node's ports and the data dir."""
    ports = ", ".join(f"{n.node_id} raft {n.raft} grpc {n.grpc} http {n.http}" for n in nodes)
    return f"{len(nodes)} nodes ({ports}), data in {data_dir}"


def start_cluster(
    count: int, base_port: int, data_dir: Path, extra_args: Sequence[str] = ()
) -> list[DevNode]:
    nodes = plan_nodes(count, base_port, data_dir)
    check_plan(nodes, data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(24)
    peers = ",".join(n.raft for n in nodes)
    started = []
    for node in nodes:
        Path(node.data_dir).mkdir(parents=True, exist_ok=True)
        log_file = open(Path(node.data_dir) / "node.log", "ab")  # noqa: SIM115 - owned by the child
        process = subprocess.Popen(
            [
                sys.executable,
                # Not the current directory first on sys.path: a `cortex`
                # beside it (another checkout) would be run instead of this one.
                "-P",
                "-m",
                "cortex.cli.main",
                "node",
                "start",
                "--node-id",
                node.node_id,
                "--data-dir",
                node.data_dir,
                "--raft",
                node.raft,
                "--grpc",
                node.grpc,
                "--http",
                node.http,
                "--peers",
                peers,
                *extra_args,
            ],  # fmt: skip
            env={**_plaintext_env(), "CORTEX_SECRET": secret},
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log_file.close()
        started.append(dataclasses.replace(node, pid=process.pid))
    (data_dir / _STATE_FILE).write_text(
        json.dumps({"nodes": [n.__dict__ for n in started]}, indent=2)
    )
    return started


def wait_ready(nodes: list[DevNode], timeout_s: float = 60.0) -> None:
    """Waits until every node knows a leader and sees every node registered
    and reporting its resources (a leader placing tasks before the others'
    first reports would put them all on itself)."""
    deadline = time.monotonic() + timeout_s
    pending = list(nodes)
    while pending:
        _check_started(nodes)
        node = pending[0]
        try:
            with CortexClient(node.grpc, timeout_s=2, tls=False) as client:
                status = client.get_cluster_status()
            reporting = sum(n.HasField("resources") for n in status.nodes)
            if status.leader_id and reporting >= len(nodes):
                pending.pop(0)
                continue
        except CortexError:
            pass
        if time.monotonic() > deadline:
            raise Unavailable(
                f"dev cluster not ready after {timeout_s:.0f}s; see {node.data_dir}/node.log"
            )
        time.sleep(0.2)


LOG_TAIL_LINES = 15


def _check_started(nodes: list[DevNode]) -> None:
    """Raises Unavailable naming the first node whose process has ended, with
    the end of its log: waiting out the timeout would only hide why."""
    for node in nodes:
        status = _exit_status(node.pid)
        if status is None:
            continue
        log_path = Path(node.data_dir) / "node.log"
        try:
            lines = log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        except OSError:
            lines = []
        tail = "".join(f"\n  {line}" for line in lines)
        raise Unavailable(
            f"{node.node_id} exited while starting ({status}); the end of {log_path}:{tail}"
        )


def _exit_status(pid: int) -> str | None:
    """How a child process ended, or None while it runs (or is not this
    process's child)."""
    try:
        waited, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if waited != pid:
        return None
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def stop_cluster(data_dir: Path, timeout_s: float = 15.0) -> list[DevNode]:
    state_file = data_dir / _STATE_FILE
    if not state_file.exists():
        raise CortexError(
            f"no dev cluster recorded in {data_dir}; give the --data-dir `cortex dev` printed"
        )
    nodes = [DevNode(**n) for n in json.loads(state_file.read_text())["nodes"]]
    for node in nodes:
        try:
            os.kill(node.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        while time.monotonic() < deadline and _alive(node.pid):
            time.sleep(0.1)
        if _alive(node.pid):
            os.kill(node.pid, signal.SIGKILL)
    state_file.unlink()
    return nodes


def _alive(pid: int) -> bool:
    if _exit_status(pid) is not None:
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    if args.action == "stop":
        nodes = stop_cluster(data_dir)
        print(f"stopped {len(nodes)} nodes ({', '.join(n.node_id for n in nodes)})")
        return 0
    plan = plan_nodes(args.nodes, args.base_port, data_dir)
    check_plan(plan, data_dir)
    print(
        f"starting a local cluster of {describe_plan(plan, data_dir)}; "
        f"stop it with: {stop_command(data_dir)}",
        flush=True,
    )
    nodes = start_cluster(args.nodes, args.base_port, data_dir)
    try:
        wait_ready(nodes)
    except CortexError:
        stop_cluster(data_dir)
        raise
    render.console.print(
        f"[green]local cluster of {len(nodes)} nodes is up[/] (data in {escape(str(data_dir))})"
    )
    for node in nodes:
        render.console.print(
            f"  {node.node_id}: grpc {node.grpc}  raft {node.raft}  http {node.http}"
            f"  pid {node.pid}"
        )
    first = nodes[0].grpc
    flag = "" if first == DEFAULT_GRPC_ADDRESS else f" --node {first}"
    render.console.print(f"try:  cortex{flag} task submit --wait -- echo hello")
    render.console.print(f"      cortex{flag} status")
    render.console.print(f"      curl http://{nodes[0].http}/metrics")
    render.console.print(f"web UI: http://{nodes[0].http}/")
    render.console.print(f"stop: {escape(stop_command(data_dir))}")
    return 0


DEMO_TASKS: list[tuple[str, list[str] | str]] = [
    ("hello", ["echo", "hello from Cortex"]),
    ("where", 'echo "ran on $CORTEX_NODE_ID as task $CORTEX_TASK_ID (attempt $CORTEX_ATTEMPT)"'),
    (
        "python",
        [sys.executable, "-c", "import platform; print('python', platform.python_version())"],
    ),
    ("sum", 'n=0; for i in $(seq 1 1000); do n=$((n + i)); done; echo "sum of 1..1000 = $n"'),
    ("fails", "echo 'this one exits 3' >&2; exit 3"),
]


# A small DAG: fetch, then count (which adds to the workflow context), then
# one of two branches chosen by JavaScript conditions on that context.
DEMO_WORKFLOW = """\
name: demo
context:
  source: example.org
tasks:
  fetch:
    type: shell
    spec:
      command: 'echo "fetched 3 records from example.org"'
  count:
    type: shell
    dependsOn: [fetch]
    spec:
      command: 'echo "3 records"; printf "{\\"records\\": 3}" > "$CORTEX_CONTEXT_FILE"'
  report:
    type: shell
    dependsOn: [count]
    condition: "workflow.context.records > 0"
    spec:
      command: 'echo "report: 3 records from example.org"'
  alert:
    type: shell
    dependsOn: [count]
    condition: "workflow.context.records === 0"
    spec:
      command: 'echo "alert: no records" >&2'
"""
DEMO_WORKFLOW_TIMEOUT_S = 60.0


def _run_demo_workflow(client: CortexClient) -> None:
    """Submits the example workflow, waits for it and prints its DAG."""
    from cortex.cli.workflows import POLL_INTERVAL_S, TERMINAL_WORKFLOW_STATES, print_workflow

    render.console.print(
        "submitting an example workflow: fetch -> count -> report if records > 0, else alert"
    )
    reply = client.submit_workflow(DEMO_WORKFLOW, idempotency_key="demo-workflow")
    deadline = time.monotonic() + DEMO_WORKFLOW_TIMEOUT_S
    workflow = client.get_workflow(reply.workflow_id).workflow
    while workflow.state not in TERMINAL_WORKFLOW_STATES and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_S)
        workflow = client.get_workflow(reply.workflow_id).workflow
    print_workflow(workflow)


def _first_free_base(count: int) -> int:
    """The first base port from DEMO_BASE_PORT, in steps of 10, whose Raft,
    gRPC and HTTP ports are all free."""
    for base in range(DEMO_BASE_PORT, DEMO_BASE_PORT + 1000, 10):
        if ports_free(base, count):
            return base
    raise CortexError(
        f"no free ports from {DEMO_BASE_PORT} to {DEMO_BASE_PORT + 1000 + HTTP_OFFSET - 1};"
        f" choose others with --base-port N ({PORT_LAYOUT})"
    )


def _settled_statuses(
    clients: Sequence[CortexClient], timeout_s: float = 10.0
) -> list[pb.GetClusterStatusResponse]:
    """Every node's status once all have applied the same index (the last
    reads' barriers land a moment apart), or as they are at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        statuses = [client.get_cluster_status() for client in clients]
        if len({s.applied_index for s in statuses}) == 1 or time.monotonic() > deadline:
            return statuses
        time.sleep(0.05)


def run_demo(args: argparse.Namespace) -> int:
    chosen = args.base_port is not None
    base_port = args.base_port if chosen else _first_free_base(args.nodes)
    own_dir = not args.data_dir
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="cortex-demo-")).resolve()
    plan = plan_nodes(args.nodes, base_port, data_dir)
    how = "" if chosen else f" (the first free from {DEMO_BASE_PORT}; --base-port N chooses)"
    try:
        check_plan(plan, data_dir)
        print(f"starting a local cluster of {describe_plan(plan, data_dir)}{how} ...", flush=True)
        nodes = start_cluster(args.nodes, base_port, data_dir)
    except CortexError:
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
        raise
    try:
        wait_ready(nodes)
        render.console.print(
            "[green]cluster is up[/]; submitting example tasks through each node in turn"
        )
        clients = [CortexClient(n.grpc, tls=False) for n in nodes]
        submitted: list[tuple[str, str, CortexClient, str]] = []
        for i, (name, command) in enumerate(DEMO_TASKS):
            spec = pb.TaskSpec()
            if isinstance(command, str):
                spec.shell = command
            else:
                spec.command.extend(command)
            spec.retry_policy.max_retries = 0
            client = clients[i % len(clients)]
            reply = client.submit_task(spec, idempotency_key=f"demo-{name}")
            # The node that took it: the client's own, or the leader it routed the write to.
            submitted.append((name, reply.task.id, client, reply.header.node_id))
        table = render.Table("task", "submitted to", "ran on", "state", "exit", "output", box=None)
        for name, task_id, client, via in submitted:
            # Asked of the node that took it: that client's session has seen the submission.
            task = client.get_task_result(task_id, wait=True, timeout_ms=60_000).task
            output = (task.result.stdout or task.result.stderr).decode(errors="replace").strip()
            table.add_row(name, via, task.node_id, render.styled_state(render.state_name(task.state)),
                          str(task.result.exit_code) if task.HasField("result") else "",
                          output)  # fmt: skip
        render.console.print(table)
        _run_demo_workflow(clients[0])
        status = clients[0].get_cluster_status()
        render.console.print(
            f"leader {status.leader_id}, term {status.term}; every node's state digest:"
        )
        for node, s in zip(nodes, _settled_statuses(clients), strict=True):
            render.console.print(
                f"  {node.node_id}: applied {s.applied_index}  digest {s.state_digest[:16]}"
            )
        for client in clients:
            client.close()
    finally:
        if args.keep:
            render.console.print(
                f"cluster left running; stop it with: {escape(stop_command(data_dir))}"
            )
        else:
            stop_cluster(data_dir)
            if own_dir:
                shutil.rmtree(data_dir, ignore_errors=True)
            render.console.print("cluster stopped")
    return 0
