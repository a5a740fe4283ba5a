"""`cortex`: the command line. Parses arguments, calls the client or starts
a node, prints results; every failure becomes one readable line and exit 1."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from cortex.api.auth import TOKEN_ENV, TOKEN_FILE_ENV
from cortex.api.tls import TLS_CA_ENV
from cortex.cli.connect import CONSISTENCY_NAMES
from cortex.cli.mcp import add_mcp_arguments
from cortex.config import DEFAULT_GRPC_ADDRESS, read_secret_file
from cortex.errors import CortexError


def _add_node_start(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    node = commands.add_parser("node", help="run or manage a node")
    node_commands = node.add_subparsers(dest="node_command", required=True)
    start = node_commands.add_parser("start", help="start a node in the foreground")
    start.add_argument("--config", help="YAML config file")
    start.add_argument("--node-id", help="this node's id (default: host name)")
    start.add_argument("--data-dir", help="where state lives (default ./cortex-data)")
    start.add_argument("--raft", help="Raft HOST:PORT (default 127.0.0.1:7100)")
    start.add_argument("--grpc", help="gRPC HOST:PORT (default 127.0.0.1:7200)")
    start.add_argument(
        "--peer",
        metavar="HOST:PORT",
        help="listener for node-to-node calls (default: a free port on the gRPC host; "
        "give a fixed port to open in a firewall)",
    )
    start.add_argument(
        "--advertise",
        metavar="HOST",
        help="host or IP other machines reach this node at (needed when --raft, --grpc or "
        "--peer listen on 0.0.0.0)",
    )
    start.add_argument("--peers", help="comma-separated Raft addresses of a static group")
    start.add_argument(
        "--join", metavar="GRPC_ADDR", help="join the cluster served at this gRPC address"
    )
    start.add_argument(
        "--observer",
        action="store_true",
        default=None,
        help="join (--join) as a read replica: replicate without a vote, run no tasks",
    )
    secret = start.add_mutually_exclusive_group()
    secret.add_argument(
        "--secret-file",
        metavar="PATH",
        help="file holding the cluster secret, needed with --peers or --join ($CORTEX_SECRET_FILE)",
    )
    secret.add_argument(
        "--secret", help="the cluster secret itself (visible in `ps`: prefer --secret-file)"
    )
    token = start.add_mutually_exclusive_group()
    token.add_argument(
        "--api-token-file",
        metavar="PATH",
        help="require the token this file holds on every API call ($CORTEX_API_TOKEN_FILE)",
    )
    token.add_argument(
        "--api-token",
        help="require this token on every API call (visible in `ps`: prefer --api-token-file "
        "or $CORTEX_API_TOKEN)",
    )
    start.add_argument(
        "--env-passthrough",
        action="append",
        default=[],
        metavar="NAME",
        help="let tasks inherit this variable of the node's environment (a name or a pattern "
        "such as AWS_*; repeatable); secrets never pass",
    )
    start.add_argument(
        "--tls-cert", metavar="PEM", help="serve gRPC over TLS with this certificate"
    )
    start.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    # Its own dest: a subcommand's default would overwrite the global --tls-ca.
    start.add_argument(
        "--tls-ca",
        dest="node_tls_ca",
        metavar="PEM",
        help="CA bundle to verify other nodes with (default: the system roots)",
    )
    start.add_argument(
        "--tls-client-auth",
        action="store_true",
        default=None,
        help="require client certificates signed by the --tls-ca CA (mutual TLS)",
    )
    start.add_argument(
        "--label", action="append", default=[], metavar="K=V", help="node label (repeatable)"
    )
    start.add_argument(
        "--capability", action="append", default=[], metavar="K=V", help="node capability"
    )
    start.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="K=V",
        help="declare a resource instead of measuring it: cpu_cores, memory_mb, disk_gb, "
        "bandwidth_mbps, gpu=NAME[:MEMORY_MB], gaming=true|false",
    )
    start.add_argument("--heartbeat-interval", type=float, help="seconds between resource reports")
    start.add_argument(
        "--failure-timeout", type=float, help="seconds of silence before a node is offline"
    )
    start.add_argument("--shutdown-drain", type=float, help="seconds running tasks get on SIGTERM")
    start.add_argument("--max-tasks", type=int, help="most tasks this node runs at once")
    start.add_argument("--compaction-min-entries", type=int, help="log entries before compaction")
    start.add_argument(
        "--no-raft-sync",
        dest="raft_sync",
        action="store_false",
        default=None,
        help="do not sync the Raft journal (faster; may lose acknowledged writes on power loss)",
    )
    start.add_argument(
        "--task-retention",
        type=float,
        metavar="SECONDS",
        help="keep finished tasks and workflows this long, then purge them (0: keep all)",
    )
    start.add_argument("--log-level", help="DEBUG, INFO, WARNING ...")
    listing = node_commands.add_parser("list", help="nodes with status, resources and active tasks")
    listing.add_argument("--all", action="store_true", help="include removed nodes")
    listing.add_argument("--json", action="store_true")
    drain = node_commands.add_parser(
        "drain", help="move work off a node; running tasks get a deadline"
    )
    drain.add_argument("node_id")
    drain.add_argument(
        "--deadline", type=float, default=300.0, help="seconds running tasks may finish in"
    )
    drain.add_argument("--json", action="store_true")
    for verb, text in (
        ("cordon", "stop new assignments to a node"),
        ("uncordon", "make a node active again"),
    ):
        command = node_commands.add_parser(verb, help=text)
        command.add_argument("node_id")
        command.add_argument("--json", action="store_true")
    remove = node_commands.add_parser(
        "remove",
        help="take a node out of the cluster for good (drain it first to let its tasks finish)",
        description="Re-queues the node's unfinished tasks, takes it out of the Raft group and "
        "stops its process. The leader cannot be removed: stop it first. To add the machine "
        "back, start it with an empty --data-dir and --join.",
    )
    remove.add_argument("node_id")
    remove.add_argument("--reason", default="", help="recorded with the removal")
    remove.add_argument("--json", action="store_true")


def _add_task(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    task = commands.add_parser("task", help="submit and inspect tasks")
    task_commands = task.add_subparsers(dest="task_command", required=True)
    submit = task_commands.add_parser(
        "submit", help="submit a task: cortex task submit -- CMD [ARG...]"
    )
    submit.add_argument("--json", action="store_true", help="print JSON")
    submit.add_argument(
        "--wait", action="store_true", help="wait for the task to end and show its result"
    )
    submit.add_argument(
        "--idempotency-key", default="", help="submitting the same key again returns the same task"
    )
    submit.add_argument("--type", default="shell", help="executor type (shell, noop)")
    submit.add_argument(
        "--shell", action="store_true", help="run CMD as one string through /bin/sh -c"
    )
    submit.add_argument("--env", action="append", default=[], metavar="K=V")
    submit.add_argument("--cwd")
    submit.add_argument("--timeout-ms", type=int)
    submit.add_argument("--priority", type=int, help="0-10, higher runs first")
    submit.add_argument("--max-retries", type=int)
    submit.add_argument("--label", action="append", default=[], metavar="LABEL",
                        help="required node label, `key` or `key=value` (repeatable)")  # fmt: skip
    submit.add_argument("--min-memory-mb", type=int)
    submit.add_argument("--min-disk-gb", type=float)
    submit.add_argument("--target-node", help="run only on this node")
    submit.add_argument("--gpu", action="store_true", help="needs a GPU")
    submit.add_argument(
        "--avoid-gaming", action="store_true", help="stay off nodes where a game runs"
    )
    submit.add_argument("--allow-node", action="append", default=[], metavar="NODE")
    submit.add_argument("--forbid-node", action="append", default=[], metavar="NODE")
    submit.add_argument("--capability", action="append", default=[], metavar="K=V",
                        help="required node capability (repeatable)")  # fmt: skip
    submit.add_argument("--max-parallel-per-node", type=int)
    submit.add_argument("--wait-timeout", type=float, default=300.0, help="seconds --wait waits")
    submit.add_argument("argv", nargs=argparse.REMAINDER, metavar="CMD", help="-- CMD [ARG...]")
    get = task_commands.add_parser("get", help="show one task")
    get.add_argument("task_id")
    get.add_argument("--json", action="store_true")
    get.add_argument("--events", action="store_true", help="include the task's event log")
    listing = task_commands.add_parser("list", help="list tasks, newest first")
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--state", action="append", default=[])
    listing.add_argument("--on-node", dest="on_node", default="")
    listing.add_argument("--limit", type=int, default=100)
    listing.add_argument(
        "--page-token", default="", help="the next_page_token a previous page printed"
    )
    cancel = task_commands.add_parser("cancel", help="cancel a task")
    cancel.add_argument("task_id")
    cancel.add_argument("--reason", default="")
    cancel.add_argument("--json", action="store_true")


def _add_workflow(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    workflow = commands.add_parser("workflow", help="submit and inspect DAG workflows")
    sub = workflow.add_subparsers(dest="workflow_command", required=True)
    submit = sub.add_parser("submit", help="submit a workflow definition (JSON or YAML)")
    submit.add_argument("file", help="definition file, or - for standard input")
    submit.add_argument("--format", choices=["json", "yaml"], help="default: from the file name")
    submit.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="set a key of the initial context (VALUE parsed as JSON if it can be)",
    )  # fmt: skip
    submit.add_argument("--idempotency-key", default="")
    submit.add_argument("--wait", action="store_true", help="wait for the workflow to end")
    submit.add_argument("--wait-timeout", type=float, default=600.0, help="seconds --wait waits")
    submit.add_argument("--all", action="store_true", help="show every task in the tree")
    submit.add_argument("--json", action="store_true")
    status = sub.add_parser("status", help="a workflow's DAG with each task's state")
    status.add_argument("workflow_id")
    status.add_argument("--all", action="store_true", help="show every task in the tree")
    status.add_argument("--json", action="store_true")
    listing = sub.add_parser("list", help="workflows, newest first")
    listing.add_argument("--state", action="append", default=[])
    listing.add_argument("--limit", type=int, default=100)
    listing.add_argument(
        "--page-token", default="", help="the next_page_token a previous page printed"
    )
    listing.add_argument("--json", action="store_true")
    cancel = sub.add_parser("cancel", help="cancel a workflow and its unfinished tasks")
    cancel.add_argument("workflow_id")
    cancel.add_argument("--reason", default="")
    cancel.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cortex", description="Cortex distributed task engine")
    parser.add_argument(
        "--node",
        default=os.environ.get("CORTEX_NODE", DEFAULT_GRPC_ADDRESS),
        help="gRPC address of the node to talk to (default $CORTEX_NODE or %(default)s)",
    )
    token = parser.add_mutually_exclusive_group()
    token.add_argument(
        "--token-file",
        metavar="PATH",
        help="file holding the API token for nodes started with one (default "
        "$CORTEX_API_TOKEN_FILE)",
    )
    token.add_argument(
        "--token",
        help="API token for nodes started with one (default $CORTEX_API_TOKEN; visible in `ps`: "
        "prefer --token-file or the environment)",
    )
    parser.add_argument(
        "--tls-ca",
        metavar="PEM",
        help="connect over TLS, trusting this CA ('system': the system roots; default "
        "$CORTEX_TLS_CA); a node started with this flag verifies other nodes with it",
    )
    parser.add_argument(
        "--consistency",
        choices=CONSISTENCY_NAMES,
        help="how fresh reads must be (default: linearizable for tasks, workflows, dead "
        "letters, logs and events; stale for status, node list and top, which work without "
        "a leader; session for mcp)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_node_start(commands)
    _add_task(commands)
    _add_workflow(commands)
    dlq = commands.add_parser("dlq", help="the dead-letter queue")
    dlq_commands = dlq.add_subparsers(dest="dlq_command", required=True)
    dlq_list = dlq_commands.add_parser("list", help="tasks that exhausted their retries")
    dlq_list.add_argument("--json", action="store_true")
    dlq_list.add_argument("--limit", type=int, default=100)
    dlq_retry = dlq_commands.add_parser("retry", help="queue a dead-lettered task again")
    dlq_retry.add_argument("task_id")
    dlq_retry.add_argument("--json", action="store_true")
    mcp = commands.add_parser("mcp", help="serve the MCP tools for agents (stdio, or --http)")
    add_mcp_arguments(mcp)
    top = commands.add_parser("top", help="live view of nodes and the task queue (q to quit)")
    top.add_argument("--interval", type=float, default=1.0, help="refresh every N seconds")
    status = commands.add_parser("status", help="cluster status as seen by --node")
    status.add_argument("--json", action="store_true")
    dev = commands.add_parser("dev", help="start a local N-node cluster in the background")
    dev.add_argument("action", nargs="?", choices=["start", "stop"], default="start")
    dev.add_argument("--nodes", type=int, default=3)
    dev.add_argument("--data-dir", default="./cortex-dev")
    dev.add_argument(
        "--base-port", type=int, default=7100, help="Raft ports from here, gRPC from +100"
    )
    demo = commands.add_parser(
        "demo", help="start a local 3-node cluster, run example tasks, show results"
    )
    demo.add_argument("--nodes", type=int, default=3)
    demo.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    demo.add_argument("--data-dir", default=None)
    _add_streams(commands)
    return parser


def _add_streams(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    logs = commands.add_parser(
        "logs", help="a task's output; -f follows it live (exits with the task's status)"
    )
    logs.add_argument("task_id")
    logs.add_argument("-f", "--follow", action="store_true", help="stream new output as it comes")
    logs.add_argument(
        "--attempt", type=int, default=0, help="one attempt (default: the latest, then retries)"
    )
    which = logs.add_mutually_exclusive_group()
    which.add_argument("--stdout", action="store_true", help="only the task's stdout")
    which.add_argument("--stderr", action="store_true", help="only the task's stderr")
    logs.add_argument(
        "--from-offset", type=int, default=0, metavar="BYTES", help="start at this byte offset"
    )
    logs.add_argument("--json", action="store_true", help="one JSON object per chunk")
    events = commands.add_parser("events", help="the event log; -f follows it live")
    events.add_argument("-f", "--follow", action="store_true", help="keep streaming new events")
    events.add_argument("--task", metavar="TASK_ID", help="only this task's events")
    events.add_argument("--workflow", metavar="WORKFLOW_ID", help="only this workflow's events")
    events.add_argument("--event", action="append", default=[], metavar="NAME",
                        help="only these events (repeatable)")  # fmt: skip
    events.add_argument("--after-seq", type=int, default=0, metavar="SEQ",
                        help="start after this event sequence number (default: the first)")  # fmt: skip
    events.add_argument("--json", action="store_true", help="one JSON object per event")


def _export_client_settings(args: argparse.Namespace) -> None:
    """Every client this process makes, and a node it starts, picks up the
    token and CA given by flag; a flag overrides the environment."""
    if args.token_file:
        read_secret_file(args.token_file, "--token-file")
        os.environ[TOKEN_FILE_ENV] = args.token_file
        os.environ.pop(TOKEN_ENV, None)
    elif args.token:
        os.environ[TOKEN_ENV] = args.token
        os.environ.pop(TOKEN_FILE_ENV, None)
    if args.tls_ca:
        os.environ[TLS_CA_ENV] = args.tls_ca


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    interrupted = threading.Event()

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        # gRPC may surface Ctrl-C as a cancelled call rather than this
        # exception; the flag makes either end the same way.
        interrupted.set()
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_interrupt)
    try:
        _export_client_settings(args)
        if args.command == "node":
            if args.node_command != "start":
                from cortex.cli.nodes import run as run_nodes

                return run_nodes(args)
            from cortex.cli.node import run_node

            return run_node(args)
        if args.command == "dlq":
            from cortex.cli.tasks import run_dlq

            return run_dlq(args)
        if args.command == "mcp":
            from cortex.cli.mcp import serve_mcp

            return serve_mcp(args)
        if args.command == "top":
            from cortex.cli.nodes import top

            return top(args)
        if args.command == "task":
            from cortex.cli import tasks

            return tasks.run(args)
        if args.command == "workflow":
            from cortex.cli import workflows

            return workflows.run(args)
        if args.command == "status":
            from cortex.cli.tasks import show_status

            return show_status(args)
        if args.command == "dev":
            from cortex.cli import dev

            return dev.run(args)
        if args.command == "demo":
            from cortex.cli.dev import run_demo

            return run_demo(args)
        if args.command == "logs":
            from cortex.cli.logs import run_logs

            return run_logs(args)
        if args.command == "events":
            from cortex.cli.logs import run_events

            return run_events(args)
    except CortexError as err:
        if interrupted.is_set():
            return 130
        print(f"cortex: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
