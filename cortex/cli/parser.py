"""The `cortex` command tree. Global options (`--node`, `--token`, ...) are
accepted before or after any subcommand; every value is checked by a type
from `cortex.cli.options` while parsing."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from cortex import __version__
from cortex.cli.connect import CONSISTENCY_NAMES
from cortex.cli.mcp import add_mcp_arguments
from cortex.cli.options import (
    CortexArgumentParser,
    Duration,
    Integer,
    Number,
    key_name,
    listen_address,
    point_in_time,
    rate_per_minute,
    require_text,
    text,
    walk,
)
from cortex.requests import (
    DEFAULT_PAGE_SIZE,
    MAX_DRAIN_DEADLINE_MS,
    MAX_PAGE_SIZE,
    MAX_WAIT_MS,
)
from cortex.v1 import cortex_pb2 as pb

Commands = argparse._SubParsersAction  # type: ignore[type-arg]

OUTPUT_FORMATS = ("table", "wide", "json", "yaml", "name")
# Ports a local cluster uses from its base: Raft base.., gRPC base+100..,
# HTTP (metrics) base+200..
_DEV_PORT_SPAN = 200 + 9
PORT = Integer(1, 65535)
DEV_NODES = Integer(1, 9)
DEV_BASE_PORT = Integer(1024, 65535 - _DEV_PORT_SPAN)


def node_address(value: str) -> str:
    """HOST or HOST:PORT (a bare host gets port 7200); IPv6 in brackets."""
    from cortex.api.session import addresses

    raw = text(value).strip()
    host = raw[1 : raw.find("]")] if raw.startswith("[") else raw.rpartition(":")[0] or raw
    if not host or any(c.isspace() for c in raw) or "/" in raw:
        raise argparse.ArgumentTypeError(f"must be HOST or HOST:PORT (got {value!r})")
    try:
        return addresses(raw)[0]
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _version() -> str:
    try:
        return metadata.version("cortex-engine")
    except metadata.PackageNotFoundError:
        return __version__


def _add_global_options(parser: argparse.ArgumentParser, *, root: bool) -> None:
    """The options every command takes. Below the root their defaults are
    suppressed, so a value given before the subcommand is not overwritten by
    a subcommand's default, and one given after it wins."""

    def default(value: object) -> object:
        return value if root else argparse.SUPPRESS

    group = parser.add_argument_group("global options (before or after the subcommand)")
    group.add_argument(
        "--node",
        type=node_address,
        metavar="HOST[:PORT]",
        default=default(None),
        help="the node to talk to (default $CORTEX_NODE or 127.0.0.1:7200; the port "
        "defaults to 7200)",
    )
    token = group.add_mutually_exclusive_group()
    token.add_argument(
        "--token-file",
        metavar="PATH",
        default=default(None),
        help="file holding the API token for nodes started with one (default "
        "$CORTEX_API_TOKEN_FILE)",
    )
    token.add_argument(
        "--token",
        default=default(None),
        help="API token for nodes started with one (default $CORTEX_API_TOKEN; visible in `ps`: "
        "prefer --token-file or the environment)",
    )
    group.add_argument(
        "--tls-ca",
        metavar="PEM",
        default=default(None),
        help="connect over TLS, trusting this CA ('system': the system roots; default "
        "$CORTEX_TLS_CA); a node started with this flag verifies other nodes with it",
    )
    group.add_argument(
        "--consistency",
        choices=CONSISTENCY_NAMES,
        default=default(None),
        help="how fresh reads must be (default: linearizable for tasks, workflows, dead "
        "letters, logs and events; stale for status, node list and top, which work without "
        "a leader; session for mcp)",
    )


def _add_output(parser: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=formats,
        metavar="FORMAT",
        help=f"{'|'.join(formats)} (default table{'; wide: every column, full ids' if 'wide' in formats else ''})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON (same as -o json)")
    if "wide" in formats:
        parser.add_argument(
            "--wide", dest="output", action="store_const", const="wide", help="same as -o wide"
        )


def _add_listing(parser: argparse.ArgumentParser, what: str) -> None:
    _add_output(parser, OUTPUT_FORMATS)
    parser.add_argument(
        "--sort", choices=("newest", "oldest"), default="newest", help="order (default newest)"
    )
    parser.add_argument(
        "--since",
        type=point_in_time,
        metavar="WHEN",
        help=f"only {what} submitted at or after WHEN: an age (30s, 10m, 2h, 3d, 1w) or an "
        "ISO-8601 time",
    )
    parser.add_argument(
        "--until",
        type=point_in_time,
        metavar="WHEN",
        help=f"only {what} submitted before WHEN (same forms as --since)",
    )
    parser.add_argument(
        "--limit",
        type=Integer(1, MAX_PAGE_SIZE),
        default=DEFAULT_PAGE_SIZE,
        metavar="N",
        help=f"{what} per page (1-{MAX_PAGE_SIZE}, default {DEFAULT_PAGE_SIZE})",
    )
    parser.add_argument(
        "--page-token",
        default="",
        metavar="TOKEN",
        help="the page a previous listing's `next:` hint named",
    )
    parser.add_argument(
        "--all", dest="all_pages", action="store_true", help="every page, streamed as it comes"
    )


def _add_node(commands: Commands) -> None:
    node = commands.add_parser("node", help="run or manage a node")
    node_commands = node.add_subparsers(dest="node_command", required=True, metavar="COMMAND")
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
        "--http",
        type=listen_address,
        metavar="HOST:PORT",
        help="HTTP listener serving Prometheus metrics at /metrics and the web UI at /"
        " (default 127.0.0.1:7300)",
    )
    start.add_argument(
        "--advertise",
        metavar="HOST",
        help="host or IP other machines reach this node at (needed when --raft, --grpc, "
        "--peer or --http listen on 0.0.0.0)",
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
    start.add_argument(
        "--executors",
        metavar="TYPE,...",
        help="task types this node runs (default: every installed executor that can run here)",
    )
    start.add_argument(
        "--container-runtime",
        choices=["podman", "docker"],
        help="what runs container tasks (default: podman or docker, whichever is on PATH)",
    )
    start.add_argument(
        "--container-mount",
        action="append",
        default=[],
        metavar="PATH",
        help="a host path container tasks may mount, with what lies under it (repeatable)",
    )
    start.add_argument(
        "--subagent-command",
        metavar="COMMAND",
        help="the agent CLI subagent tasks run, prompt on stdin (e.g. 'claude -p')",
    )
    start.add_argument(
        "--heartbeat-interval",
        type=Number.of_field("cortex.config:NodeConfig", "heartbeat_interval_s"),
        metavar="SECONDS",
        help="seconds between resource reports",
    )
    start.add_argument(
        "--failure-timeout",
        type=Number.of_field("cortex.config:NodeConfig", "failure_timeout_s"),
        metavar="SECONDS",
        help="seconds of silence before a node is offline",
    )
    start.add_argument(
        "--election-timeout-min",
        type=Number.of_field("cortex.config:NodeConfig", "election_timeout_min_s"),
        metavar="SECONDS",
        help="shortest wait without a word from the leader before standing for election"
        " (default 0.4, the least allowed)",
    )
    start.add_argument(
        "--election-timeout-max",
        type=Number.of_field("cortex.config:NodeConfig", "election_timeout_max_s"),
        metavar="SECONDS",
        help="longest such wait (default 1.4; at least 0.2 more than the shortest)",
    )
    start.add_argument(
        "--shutdown-drain",
        type=Number.of_field("cortex.config:NodeConfig", "shutdown_drain_s"),
        metavar="SECONDS",
        help="seconds running tasks get on SIGTERM",
    )
    start.add_argument(
        "--max-tasks",
        type=Integer.of_field("cortex.config:NodeConfig", "max_tasks"),
        help="most tasks this node runs at once",
    )
    start.add_argument(
        "--prefetch-tasks",
        type=Integer.of_field("cortex.config:NodeConfig", "prefetch_tasks"),
        help="tasks this node takes beyond --max-tasks while every node is full, to start as"
        " its slots free (default: half of --max-tasks)",
    )
    start.add_argument(
        "--compaction-min-entries",
        type=Integer.of_field("cortex.config:NodeConfig", "compaction_min_entries", high=10**9),
        help="log entries before compaction",
    )
    start.add_argument(
        "--compaction-log-ratio",
        type=Number.of_field("cortex.config:NodeConfig", "compaction_log_ratio"),
        metavar="RATIO",
        help="past a 64 MiB snapshot, compaction also waits for a journal this fraction of it",
    )
    start.add_argument(
        "--no-raft-sync",
        dest="raft_sync",
        action="store_false",
        default=None,
        help="do not sync the Raft journal (faster; may lose acknowledged writes on power loss)",
    )
    start.add_argument(
        "--sched-batch",
        dest="sched_batch",
        action="store_true",
        default=None,
        help="run the node's threads under SCHED_BATCH (Linux): for machines where nothing"
        " else keeps the CPUs busy, such as voters kept from tasks (cordoned)",
    )
    start.add_argument(
        "--task-retention",
        type=Number.of_field("cortex.config:NodeConfig", "task_retention_s"),
        metavar="SECONDS",
        help="keep finished tasks and workflows this long, then purge them (0: keep all)",
    )
    start.add_argument(
        "--otel-exporter",
        metavar="EXPORTER",
        help="send OpenTelemetry spans: otlp (where $OTEL_EXPORTER_OTLP_ENDPOINT says), "
        "otlp:http://HOST:4318, or file:PATH (JSON lines); needs cortex-engine[otel]",
    )
    start.add_argument("--log-level", help="DEBUG, INFO (the default), WARNING, ERROR or CRITICAL")
    listing = node_commands.add_parser("list", help="nodes with status, resources and active tasks")
    listing.add_argument("--all", action="store_true", help="include removed nodes")
    _add_output(listing, OUTPUT_FORMATS)
    drain = node_commands.add_parser(
        "drain", help="move work off a node; running tasks get a deadline"
    )
    drain.add_argument("node_id")
    drain.add_argument(
        "--deadline",
        type=Number(0, MAX_DRAIN_DEADLINE_MS / 1000),
        default=300.0,
        metavar="SECONDS",
        help="seconds running tasks may finish in (default 300)",
    )
    drain.add_argument("--json", action="store_true")
    for verb, words in (
        ("cordon", "stop new assignments to a node"),
        ("uncordon", "make a node active again"),
    ):
        command = node_commands.add_parser(verb, help=words)
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


def _add_task_submit(task_commands: Commands) -> None:
    submit = task_commands.add_parser(
        "submit",
        help="submit a task: cortex task submit -- CMD [ARG...]; many: --from-file FILE",
    )
    _add_output(submit, ("table", "json"))
    submit.add_argument(
        "--from-file",
        metavar="FILE",
        help="submit the tasks of a JSON Lines file (- for standard input), one task spec "
        "object per line, optionally with an idempotencyKey; instead of CMD and the spec flags",
    )
    # Every option from here on but --wait-timeout describes the one task of
    # a plain submit, which a file's lines describe instead.
    first_of_one_task = len(submit._actions)
    add_task_spec_options(submit)
    submit.add_argument(
        "--wait", action="store_true", help="wait for the task to end and show its result"
    )
    submit.add_argument(
        "--idempotency-key", default="", help="submitting the same key again returns the same task"
    )
    submit.add_argument(
        "--wait-timeout",
        type=Number(0, MAX_WAIT_MS / 1000, low_open=True),
        default=300.0,
        metavar="SECONDS",
        help=f"seconds --wait waits (at most {MAX_WAIT_MS // 1000})",
    )
    submit.add_argument("argv", nargs=argparse.REMAINDER, metavar="CMD", help="-- CMD [ARG...]")
    submit.set_defaults(
        one_task_flags=tuple(
            _flag(a) for a in submit._actions[first_of_one_task:] if a.dest != "wait_timeout"
        )
    )


def add_task_spec_options(parser: argparse.ArgumentParser) -> tuple[OneTaskFlag, ...]:
    """Adds the options that describe a task's spec (all but its command), as
    `task submit` and `schedule create` take them (`cortex.cli.tasks.task_spec`
    reads them back); returns them."""
    first = len(parser._actions)
    parser.add_argument(
        "--shell", action="store_true", help="run CMD as one string through /bin/sh -c"
    )
    parser.add_argument(
        "--type",
        default="shell",
        help="executor type: shell, noop, container, subagent, k8s_job, or one a plugin adds "
        "(`cortex executors list` shows what each node runs)",
    )
    parser.add_argument("--image", help="the image a container task runs (with --type container)")
    parser.add_argument(
        "--memory-mb",
        type=Integer(1, 2**31 - 1),
        metavar="MB",
        help="a container task's memory limit",
    )
    parser.add_argument(
        "--cpus",
        type=Number(0, 1024, low_open=True),
        metavar="N",
        help="a container task's CPU limit",
    )
    parser.add_argument("--prompt", help="what a subagent task asks (with --type subagent)")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the task's executor, VALUE read as JSON when it is JSON, else as "
        "text (repeatable): --option expectStatus=204",
    )
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    parser.add_argument("--cwd")
    parser.add_argument(
        "--timeout-ms",
        type=Integer.of_field("cortex.spec:TaskSpec", "timeout_ms"),
        metavar="MS",
        help="kill the task after this many milliseconds",
    )
    parser.add_argument(
        "--priority",
        type=Integer.of_field("cortex.spec:TaskSpec", "priority"),
        help="0-10, higher runs first",
    )
    parser.add_argument(
        "--max-retries",
        type=Integer.of_field("cortex.spec:RetryPolicy", "max_retries"),
        metavar="N",
        help="retries after a failure (0: a failure is final, no dead letter)",
    )
    parser.add_argument("--label", action="append", default=[], metavar="KEY[=VALUE]", type=label_requirement,
                        help="required node label, `key` or `key=value` (repeatable)")  # fmt: skip
    parser.add_argument(
        "--min-memory-mb",
        type=Integer.of_field(
            "cortex.spec:Constraints", "min_memory_mb", high=_proto_max("min_memory_mb")
        ),
        metavar="MB",
    )
    parser.add_argument(
        "--min-disk-gb",
        type=Number.of_field("cortex.spec:Constraints", "min_disk_gb", high=1e9),
        metavar="GB",
    )
    parser.add_argument("--target-node", help="run only on this node")
    parser.add_argument("--gpu", action="store_true", help="needs a GPU")
    parser.add_argument(
        "--avoid-gaming", action="store_true", help="stay off nodes where a game runs"
    )
    parser.add_argument("--allow-node", action="append", default=[], metavar="NODE")
    parser.add_argument("--forbid-node", action="append", default=[], metavar="NODE")
    parser.add_argument("--capability", action="append", default=[], metavar="K=V",
                        help="required node capability (repeatable)")  # fmt: skip
    parser.add_argument(
        "--max-parallel-per-node",
        type=Integer.of_field(
            "cortex.spec:Constraints",
            "max_parallel_per_node",
            high=_proto_max("max_parallel_per_node"),
        ),
        metavar="N",
    )
    parser.add_argument(
        "--concurrency-key",
        type=key_name,
        metavar="KEY",
        help="run under the limits of this key (`cortex limit set KEY ...`)",
    )
    parser.add_argument(
        "--fairness-key",
        type=key_name,
        metavar="KEY",
        help="share placements with other keys by weight (`cortex limit set-weight KEY W`)",
    )
    return tuple(_flag(action) for action in parser._actions[first:])


def _flag(action: argparse.Action) -> OneTaskFlag:
    how = action.option_strings[0] if action.option_strings else str(action.metavar)
    return OneTaskFlag(action.dest, how, action.default)


@dataclass(frozen=True)
class OneTaskFlag:
    """An option of `task submit` that describes its one task: its dest, how
    the user writes it, and its default."""

    dest: str
    flag: str
    default: Any


def label_requirement(value: str) -> str:
    if not text(value).partition("=")[0].strip():
        raise argparse.ArgumentTypeError(f"must be KEY or KEY=VALUE with a key (got {value!r})")
    return value


def _proto_max(field: str) -> int:
    return Integer.of_proto(pb.Constraints, field).high


def _add_task(commands: Commands) -> None:
    task = commands.add_parser("task", help="submit and inspect tasks")
    task_commands = task.add_subparsers(dest="task_command", required=True, metavar="COMMAND")
    _add_task_submit(task_commands)
    get = task_commands.add_parser("get", help="show one task (an id or a unique id prefix)")
    get.add_argument("task_id")
    _add_output(get, ("table", "json", "yaml"))
    get.add_argument("--events", action="store_true", help="include the task's event log")
    listing = task_commands.add_parser("list", help="list tasks, newest first")
    listing.add_argument(
        "--state", action="append", default=[], help="only tasks in this state (repeatable)"
    )
    listing.add_argument("--on-node", default="", metavar="NODE_ID", help="only tasks on this node")
    listing.add_argument("--workflow", default="", metavar="WORKFLOW_ID", help="only its tasks")
    listing.add_argument("--type", default="", help="only tasks of this executor type")
    _add_listing(listing, "tasks")
    cancel = task_commands.add_parser("cancel", help="cancel a task")
    cancel.add_argument("task_id")
    cancel.add_argument("--reason", default="")
    cancel.add_argument("--json", action="store_true")


def _add_workflow(commands: Commands) -> None:
    workflow = commands.add_parser("workflow", help="submit and inspect DAG workflows")
    sub = workflow.add_subparsers(dest="workflow_command", required=True, metavar="COMMAND")
    submit = sub.add_parser("submit", help="submit a workflow definition (JSON or YAML)")
    submit.add_argument("file", help="definition file, or - for standard input")
    submit.add_argument("--format", choices=["json", "yaml"], help="default: from the file name")
    submit.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="set a key of the initial context (VALUE parsed as JSON if it can be)",
    )  # fmt: skip
    submit.add_argument("--idempotency-key", default="")
    submit.add_argument("--wait", action="store_true", help="wait for the workflow to end")
    submit.add_argument(
        "--wait-timeout",
        type=Number(0, 7 * 86_400, low_open=True),
        default=600.0,
        metavar="SECONDS",
        help="seconds --wait waits (default 600)",
    )
    submit.add_argument("--all", action="store_true", help="show every task in the tree")
    submit.add_argument("--json", action="store_true")
    status = sub.add_parser("status", help="a workflow's DAG with each task's state")
    status.add_argument("workflow_id")
    status.add_argument("--all", action="store_true", help="show every task in the tree")
    _add_output(status, ("table", "json", "yaml"))
    listing = sub.add_parser("list", help="workflows, newest first")
    listing.add_argument(
        "--state", action="append", default=[], help="only workflows in this state (repeatable)"
    )
    _add_listing(listing, "workflows")
    cancel = sub.add_parser("cancel", help="cancel a workflow and its unfinished tasks")
    cancel.add_argument("workflow_id")
    cancel.add_argument("--reason", default="")
    cancel.add_argument("--json", action="store_true")


def _add_schedule(commands: Commands) -> None:
    from cortex.state.schedule_bounds import (
        DEFAULT_CATCHUP_WINDOW_MS,
        MAX_CATCHUP_WINDOW_MS,
        MAX_EVERY_MS,
        MIN_EVERY_MS,
        OVERLAP_POLICIES,
    )

    schedule = commands.add_parser("schedule", help="start tasks or workflows on a schedule")
    sub = schedule.add_subparsers(dest="schedule_command", required=True, metavar="COMMAND")
    create = sub.add_parser(
        "create",
        help="create a schedule: NAME (--cron EXPR | --every DURATION) -- CMD [ARG...], or "
        "--workflow FILE",
        description="Starts a task (the command after --, with the spec options of `cortex "
        "task submit`) or a workflow (--workflow) at every slot of a cron expression or a "
        "fixed period. Creating it again with the same settings changes nothing.",
        command_after_dashes="argv",
    )
    create.add_argument("name", type=key_name, metavar="NAME", help="unique in the cluster")
    timing = create.add_mutually_exclusive_group()
    timing.add_argument(
        "--cron",
        metavar="EXPR",
        help="five fields: minute hour day-of-month month day-of-week ('0 3 * * *')",
    )
    timing.add_argument(
        "--every",
        type=Duration(MIN_EVERY_MS, MAX_EVERY_MS),
        metavar="DURATION",
        help="a fixed period from the creation: 30s, 5m, 1h30m (1s to 366d)",
    )
    create.add_argument(
        "--timezone",
        metavar="TZ",
        help="IANA time zone of --cron (default UTC), e.g. Europe/Berlin",
    )
    create.add_argument(
        "--overlap",
        choices=OVERLAP_POLICIES,
        default="skip",
        help="a slot due while a run is active: skip it (default), keep one for when the "
        "run ends (buffer_one), fire anyway (allow_all), or cancel the run (cancel_previous)",
    )
    create.add_argument(
        "--catchup-window",
        type=Duration(0, MAX_CATCHUP_WINDOW_MS),
        metavar="DURATION",
        help="how late a slot may still fire after an outage (default "
        f"{DEFAULT_CATCHUP_WINDOW_MS // 1000}s; 0s: never late)",
    )
    create.add_argument("--paused", action="store_true", help="create it paused")
    create.add_argument(
        "--workflow",
        metavar="FILE",
        help="start a workflow of this definition (JSON or YAML; - for standard input) "
        "instead of a task",
    )
    create.set_defaults(spec_flags=add_task_spec_options(create))
    create.add_argument("--json", action="store_true")
    create.add_argument("argv", nargs="*", default=[], metavar="CMD", help="-- CMD [ARG...]")
    listing = sub.add_parser("list", help="every schedule: timing, next and last firing, counts")
    _add_output(listing, ("table", "json", "yaml", "name"))
    get = sub.add_parser("get", help="one schedule, with its recent firings")
    get.add_argument("schedule", metavar="NAME", help="its name or id")
    _add_output(get, ("table", "json", "yaml"))
    for verb, words in (
        ("pause", "stop a schedule firing (its runs go on)"),
        ("resume", "let a paused schedule fire again, from its next slot"),
        ("delete", "delete a schedule (the tasks and workflows it started stay)"),
        ("trigger", "start a run of a schedule now, outside its slots"),
    ):
        command = sub.add_parser(verb, help=words)
        command.add_argument("schedule", metavar="NAME", help="its name or id")
        command.add_argument("--json", action="store_true")


def _add_limit(commands: Commands) -> None:
    from cortex.state.limit_bounds import MAX_BURST, MAX_RUNNING, MAX_WEIGHT

    limit = commands.add_parser(
        "limit", help="limits per concurrency key and weights of fairness keys"
    )
    sub = limit.add_subparsers(dest="limit_command", required=True, metavar="COMMAND")
    set_limit = sub.add_parser(
        "set",
        help="limit the tasks of a concurrency key: --max-running N, --rate N/s, or both",
        description="Replaces the key's limits. Tasks name their key with --concurrency-key.",
    )
    set_limit.add_argument("key", type=key_name, metavar="KEY")
    set_limit.add_argument(
        "--max-running",
        type=Integer(0, MAX_RUNNING),
        default=0,
        metavar="N",
        help="at most N of its tasks assigned or running at once (0: no such limit)",
    )
    set_limit.add_argument(
        "--rate",
        type=rate_per_minute,
        default=0,
        metavar="N/s|N/m",
        help="start at most N of its tasks per second (N/s) or minute (N/m)",
    )
    set_limit.add_argument(
        "--burst",
        type=Integer(0, MAX_BURST),
        default=0,
        metavar="N",
        help="starts allowed at once when the rate has saved them up (default: a second's "
        "worth of the rate, at least 1)",
    )
    set_limit.add_argument("--json", action="store_true")
    listing = sub.add_parser(
        "list", help="concurrency keys with limits, and fairness keys with their weights"
    )
    _add_output(listing, ("table", "json", "yaml"))
    delete = sub.add_parser("delete", help="remove a concurrency key's limits")
    delete.add_argument("key", type=key_name, metavar="KEY")
    delete.add_argument("--json", action="store_true")
    weight = sub.add_parser(
        "set-weight",
        help="a fairness key's weight: queued keys share placements by weight (1 unless set)",
    )
    weight.add_argument("key", type=key_name, metavar="KEY")
    weight.add_argument("weight", type=Integer(1, MAX_WEIGHT), metavar="WEIGHT")
    weight.add_argument("--json", action="store_true")


def _add_dlq(commands: Commands) -> None:
    dlq = commands.add_parser("dlq", help="the dead-letter queue")
    dlq_commands = dlq.add_subparsers(dest="dlq_command", required=True, metavar="COMMAND")
    dlq_list = dlq_commands.add_parser("list", help="tasks that exhausted their retries")
    _add_listing(dlq_list, "dead-lettered tasks")
    dlq_retry = dlq_commands.add_parser(
        "retry", help="queue a dead-lettered task again, with a fresh retry budget"
    )
    dlq_retry.add_argument("task_id")
    dlq_retry.add_argument("--json", action="store_true")


def _add_local(commands: Commands) -> None:
    dev = commands.add_parser("dev", help="start a local N-node cluster in the background")
    dev.add_argument("action", nargs="?", choices=["start", "stop"], default="start")
    dev.add_argument("--nodes", type=DEV_NODES, default=3, help="how many nodes (1-9)")
    dev.add_argument("--data-dir", default="./cortex-dev")
    dev.add_argument(
        "--base-port",
        type=DEV_BASE_PORT,
        default=7100,
        help="Raft ports from here, gRPC from +100, HTTP (metrics) from +200 (default 7100)",
    )
    demo = commands.add_parser(
        "demo", help="start a local 3-node cluster, run example tasks and a workflow, show results"
    )
    demo.add_argument("--nodes", type=DEV_NODES, default=3, help="how many nodes (1-9)")
    demo.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    demo.add_argument("--data-dir", default=None)
    demo.add_argument(
        "--base-port",
        type=DEV_BASE_PORT,
        default=None,
        help="Raft ports from here, gRPC from +100, HTTP (metrics) from +200 (default: the "
        "first free from 17100)",
    )


def _add_streams(commands: Commands) -> None:
    logs = commands.add_parser(
        "logs", help="a task's output; -f follows it live (exits with the task's status)"
    )
    logs.add_argument("task_id")
    logs.add_argument("-f", "--follow", action="store_true", help="stream new output as it comes")
    logs.add_argument(
        "--attempt",
        type=Integer.of_proto(pb.StreamTaskOutputRequest, "attempt"),
        default=0,
        help="one attempt (default: the latest, then retries)",
    )
    which = logs.add_mutually_exclusive_group()
    which.add_argument("--stdout", action="store_true", help="only the task's stdout")
    which.add_argument("--stderr", action="store_true", help="only the task's stderr")
    logs.add_argument(
        "--from-offset",
        type=Integer.of_proto(pb.StreamTaskOutputRequest, "from_offset"),
        default=0,
        metavar="BYTES",
        help="start at this byte offset",
    )
    logs.add_argument("--json", action="store_true", help="one JSON object per chunk")
    events = commands.add_parser("events", help="the event log; -f follows it live")
    events.add_argument("-f", "--follow", action="store_true", help="keep streaming new events")
    events.add_argument("--task", metavar="TASK_ID", help="only this task's events")
    events.add_argument("--workflow", metavar="WORKFLOW_ID", help="only this workflow's events")
    events.add_argument("--event", action="append", default=[], metavar="NAME",
                        help="only these events (repeatable)")  # fmt: skip
    events.add_argument(
        "--after-seq",
        type=Integer.of_proto(pb.WatchEventsRequest, "after_seq"),
        default=0,
        metavar="SEQ",
        help="start after this event sequence number (default: the first)",
    )
    events.add_argument("--json", action="store_true", help="one JSON object per event")


def _add_executors(commands: Commands) -> None:
    executors = commands.add_parser("executors", help="what each node can run")
    executor_commands = executors.add_subparsers(
        dest="executors_command", required=True, metavar="COMMAND"
    )
    listing = executor_commands.add_parser(
        "list", help="each node's task types, their capabilities, and the types it left out"
    )
    _add_output(listing, ("table", "json", "yaml"))


def build_parser() -> argparse.ArgumentParser:
    parser = CortexArgumentParser(prog="cortex", description="Cortex distributed task engine")
    parser.add_argument("--version", action="version", version=f"cortex {_version()}")
    _add_global_options(parser, root=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_node(commands)
    _add_task(commands)
    _add_workflow(commands)
    _add_dlq(commands)
    _add_schedule(commands)
    _add_limit(commands)
    _add_executors(commands)
    mcp = commands.add_parser("mcp", help="serve the MCP tools for agents (stdio, or --http)")
    add_mcp_arguments(mcp)
    top = commands.add_parser("top", help="live view of nodes and the task queue (q to quit)")
    top.add_argument(
        "--interval",
        type=Number(0.1, 3600),
        default=1.0,
        metavar="SECONDS",
        help="refresh every N seconds (0.1-3600)",
    )
    status = commands.add_parser("status", help="cluster status as seen by --node")
    status.add_argument("--json", action="store_true")
    _add_local(commands)
    _add_streams(commands)
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description="Load it with e.g. `source <(cortex completion bash)`, "
        "`cortex completion fish | source`, or for zsh: "
        '`cortex completion zsh > "${fpath[1]}/_cortex"`.',
    )
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    for words, sub in walk(parser):
        if words:
            _add_global_options(sub, root=False)
    require_text(parser)
    return parser


__all__ = [
    "OUTPUT_FORMATS",
    "add_task_spec_options",
    "build_parser",
    "label_requirement",
    "node_address",
]
