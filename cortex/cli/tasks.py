"""`cortex task ...`, `cortex dlq ...` and `cortex status`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from rich.markup import escape
from rich.text import Text

from cortex.api.client import CortexClient
from cortex.api.limit_views import limit_json, rate_text
from cortex.api.schedule_views import schedules_summary
from cortex.api.views import enum_value
from cortex.cli import render
from cortex.cli.connect import connect, poll_in_session
from cortex.cli.limits import running_text
from cortex.cli.listing import Listing, Page, created_range, next_command, order, run_listing
from cortex.cli.options import parse_pairs
from cortex.cli.tables import Column
from cortex.cli.task_file import submit_file
from cortex.errors import InvalidArgument
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

# The longest task state's name: the state column never changes width.
_STATE_CHARS = len("dead_letter")


# Flags that set an executor's options: (flag, dest, option, the type that takes it).
_OPTION_FLAGS = (
    ("--image", "image", "image", "container"),
    ("--memory-mb", "memory_mb", "memoryMb", "container"),
    ("--cpus", "cpus", "cpus", "container"),
    ("--prompt", "prompt", "prompt", "subagent"),
)


def _option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The executor options given by flag (`--option` first, so a named flag
    wins); a named flag of another type's is refused."""
    options = {
        key: _option_value(value)
        for key, value in parse_pairs(getattr(args, "option", []), "--option").items()
    }
    for flag, dest, option, task_type in _OPTION_FLAGS:
        value = getattr(args, dest, None)
        if value is None:
            continue
        if args.type != task_type:
            raise InvalidArgument(f"{flag} is an option of {task_type} tasks (--type {task_type})")
        options[option] = value
    return options


def task_spec(args: argparse.Namespace) -> pb.TaskSpec:
    """The spec the options `add_task_spec_options` added describe, running
    the command in `args.argv`."""
    command = list(args.argv)
    if command and command[0] == "--":
        command = command[1:]
    if args.type == "shell" and not command:
        raise InvalidArgument("no command given: cortex task submit -- CMD [ARG...]")
    spec = pb.TaskSpec(type=args.type, env=parse_pairs(args.env, "--env"), cwd=args.cwd or "")
    options = _options(args)
    if options:
        spec.options.update(options)
    if args.shell:
        spec.shell = " ".join(command)
    else:
        spec.command.extend(command)
    if args.timeout_ms is not None:
        spec.timeout.FromMilliseconds(args.timeout_ms)
    if args.priority is not None:
        spec.priority = args.priority
    if args.max_retries is not None:
        spec.retry_policy.max_retries = args.max_retries
    _constraints(spec.constraints, args)
    spec.concurrency_key = args.concurrency_key or ""
    spec.fairness_key = args.fairness_key or ""
    return spec


def _constraints(constraints: pb.Constraints, args: argparse.Namespace) -> None:
    constraints.node_labels.extend(args.label)
    constraints.allowed_nodes.extend(args.allow_node)
    constraints.forbidden_nodes.extend(args.forbid_node)
    constraints.requires_capabilities.update(parse_pairs(args.capability, "--capability"))
    constraints.requires_gpu = args.gpu
    constraints.avoid_gaming = args.avoid_gaming
    if args.min_memory_mb is not None:
        constraints.min_memory_mb = args.min_memory_mb
    if args.min_disk_gb is not None:
        constraints.min_disk_gb = args.min_disk_gb
    if args.target_node:
        constraints.target_node = args.target_node
    if args.max_parallel_per_node is not None:
        constraints.max_parallel_per_node = args.max_parallel_per_node


# The flag that sets each spec field, so a refusal naming a field names what
# the user typed.
_SPEC_FLAGS = {
    "spec.type": "--type",
    **{f"spec.options.{option}": flag for flag, _, option, _ in _OPTION_FLAGS},
    "spec.command": "CMD",
    "spec.shell": "CMD",
    "spec.env": "--env",
    "spec.cwd": "--cwd",
    "spec.timeoutMs": "--timeout-ms",
    "spec.timeout": "--timeout-ms",
    "spec.priority": "--priority",
    "spec.retryPolicy.maxRetries": "--max-retries",
    "spec.constraints.nodeLabels": "--label",
    "spec.constraints.minMemoryMb": "--min-memory-mb",
    "spec.constraints.minDiskGb": "--min-disk-gb",
    "spec.constraints.targetNode": "--target-node",
    "spec.constraints.allowedNodes": "--allow-node",
    "spec.constraints.forbiddenNodes": "--forbid-node",
    "spec.constraints.requiresCapabilities": "--capability",
    "spec.constraints.maxParallelPerNode": "--max-parallel-per-node",
    "spec.concurrencyKey": "--concurrency-key",
    "spec.fairnessKey": "--fairness-key",
}


def named_by_flag(message: str) -> str:
    """A refusal's `spec.field: problem` parts, each naming the flag instead."""
    parts = []
    for part in message.split("; "):
        field, sep, problem = part.partition(": ")
        path = field.split("[", 1)[0]
        known = max((f for f in _SPEC_FLAGS if path == f or path.startswith(f + ".")), key=len,
                    default="")  # fmt: skip
        parts.append(f"{_SPEC_FLAGS[known]}: {problem}" if known and sep else part)
    return "; ".join(parts)


def submit(client: CortexClient, args: argparse.Namespace) -> int:
    if args.from_file is not None:
        return submit_file(client, args)
    fmt = render.output_format(args)
    try:
        reply = client.submit_task(task_spec(args), args.idempotency_key)
    except InvalidArgument as err:
        raise InvalidArgument(named_by_flag(str(err))) from None
    if not args.wait:
        if fmt == "json":
            render.print_json({"id": reply.task.id, "created": reply.created})
        else:
            note = "" if reply.created else " (existing task for this idempotency key)"
            print(f"{reply.task.id}{note}")
        return 0
    task = client.get_task_result(
        reply.task.id, wait=True, timeout_ms=int(args.wait_timeout * 1000)
    ).task
    if fmt == "json":
        render.print_json(render.task_json(task))
    else:
        render.print_task(task)
    if task.state == pb.TASK_STATE_COMPLETED:
        return 0
    return task.result.exit_code or 1 if task.HasField("result") else 1


# -- listings ---------------------------------------------------------------------


def _task_columns(dead_letters: bool) -> Callable[[bool], list[Column]]:
    def columns(wide: bool) -> list[Column]:
        if wide:
            return [
                Column("id", keep=True),
                Column("state", keep=True, min_width=_STATE_CHARS),
                Column("type", keep=True),
                Column("attempt", keep=True, justify="right"),
                Column("priority", keep=True, justify="right"),
                Column("node", keep=True),
                Column("workflow", keep=True),
                Column("key", max_width=40),
                Column("created", keep=True),
                Column("exit", keep=True, justify="right"),
                Column("error", max_width=80),
                Column("command", max_width=120),
            ]
        middle = [Column("error", min_width=5)] if dead_letters else []
        state = [] if dead_letters else [Column("state", keep=True, min_width=_STATE_CHARS)]
        return [
            Column("id", keep=True),
            *state,
            Column("attempt", keep=True, justify="right"),
            Column("node", min_width=4, max_width=24),
            Column("age", keep=True, justify="right"),
            Column("exit", keep=True, justify="right"),
            *middle,
            Column("command", min_width=7),
        ]

    return columns


def _task_row(dead_letters: bool) -> Callable[[pb.Task, bool, dict[str, str]], list[Text]]:
    def row(task: pb.Task, wide: bool, shorts: dict[str, str]) -> list[Text]:
        state = render.state_text(render.state_name(task.state))
        exit_code = Text(str(task.result.exit_code) if task.HasField("result") else "")
        command = render.command_text(task.spec, 200) or f"({task.type})"
        if wide:
            return [
                Text(task.id), state, Text(task.type), Text(str(task.attempt)),
                Text(str(task.priority)), Text(task.node_id), Text(task.workflow_id),
                Text(task.workflow_key), Text(render.local_time(task, "create_time")),
                exit_code, Text(render.bounded(task.error, 200)), Text(command),
            ]  # fmt: skip
        cells = [Text(shorts[task.id])]
        if not dead_letters:
            cells.append(state)
        cells += [Text(str(task.attempt)), Text(task.node_id), Text(render.age(task, "create_time")),
                  exit_code]  # fmt: skip
        if dead_letters:
            cells.append(Text(render.bounded(task.error, 200), style="red"))
        cells.append(Text(command, style="" if task.spec.shell or task.spec.command else "dim"))
        return cells

    return row


def _task_listing(
    client: CortexClient,
    args: argparse.Namespace,
    fetch: Callable[[str], Page[pb.Task]],
    dead_letters: bool,
    command: list[str],
) -> Listing[pb.Task]:
    return Listing(
        what="dead-lettered tasks" if dead_letters else "tasks",
        key="tasks",
        fetch=fetch,
        item_id=lambda task: task.id,
        item_json=lambda task: render.task_json(task),
        columns=_task_columns(dead_letters),
        row=_task_row(dead_letters),
        command=command,
        after_first_page=lambda: poll_in_session(client, args),
    )


def list_tasks(client: CortexClient, args: argparse.Namespace) -> int:
    states = [enum_value(pb.TaskState, state, "--state") for state in args.state]
    workflow, task_type = args.workflow, args.type
    span = created_range(args)

    def fetch(token: str) -> Page[pb.Task]:
        reply = client.list_tasks(
            states=states,
            type=task_type,
            workflow_id=workflow,
            node_id=args.on_node,
            page_size=args.limit,
            page_token=token,
            order=order(args),
            create_time_range=span,
        )
        return Page(list(reply.tasks), reply.next_page_token, reply.total_size)

    filters = [word for state in args.state for word in ("--state", state)]
    for flag, value in (
        ("--on-node", args.on_node),
        ("--workflow", workflow),
        ("--type", task_type),
    ):
        if value:
            filters += [flag, value]
    command = next_command(args, ["task", "list"], filters)
    return run_listing(_task_listing(client, args, fetch, False, command), args)


def list_dead_letters(client: CortexClient, args: argparse.Namespace) -> int:
    span = created_range(args)

    def fetch(token: str) -> Page[pb.Task]:
        reply = client.list_dead_letter_tasks(
            page_size=args.limit, page_token=token, order=order(args), create_time_range=span
        )
        return Page(list(reply.tasks), reply.next_page_token, reply.total_size)

    command = next_command(args, ["dlq", "list"], [])
    return run_listing(_task_listing(client, args, fetch, True, command), args)


# -- commands ---------------------------------------------------------------------


def _print_written(task: pb.Task, args: argparse.Namespace, note: str = "") -> None:
    if render.output_format(args) == "json":
        render.print_json(render.task_json(task))
    else:
        print(f"{task.id} {note or render.state_name(task.state)}")


def run(args: argparse.Namespace) -> int:
    with connect(args, "linearizable") as client:
        if args.task_command == "submit":
            return submit(client, args)
        if args.task_command == "get":
            found = client.get_task(args.task_id, include_events=args.events)
            fmt = render.output_format(args)
            if fmt in ("json", "yaml"):
                render.print_data(render.task_json(found.task, found.events), fmt)
            else:
                render.print_task(found.task, found.events)
            return 0
        if args.task_command == "list":
            return list_tasks(client, args)
        if args.task_command == "cancel":
            _print_written(client.cancel_task(args.task_id, args.reason).task, args)
            return 0
    return 2


def _retried(reply: pb.RetryDeadLetterTaskResponse) -> str:
    """What a retry granted: a fresh budget, and for a workflow task whether
    it rejoined its workflow or runs on its own."""
    task = reply.task
    policy = task.spec.retry_policy
    if policy.HasField("retryable") and not policy.retryable:
        said = "queued again (its spec does not retry a failure)"
    else:
        retries = reply.retry_budget
        said = (
            f"queued again with a fresh retry budget ({retries} "
            f"{'retry' if retries == 1 else 'retries'})"
        )
    if not task.workflow_id:
        return said
    state = enum_name(pb.WorkflowState, reply.workflow_state) or "ended"
    if reply.rejoined_workflow:
        return f"{said}; it rejoins workflow {task.workflow_id} ({state})"
    return (
        f"{said}; workflow {task.workflow_id} stays {state}: the task runs on its own "
        "and does not change it"
    )


def run_dlq(args: argparse.Namespace) -> int:
    with connect(args, "linearizable") as client:
        if args.dlq_command == "list":
            return list_dead_letters(client, args)
        reply = client.retry_dead_letter_task(args.task_id)
    _print_written(reply.task, args, _retried(reply))
    return 0


def show_status(args: argparse.Namespace) -> int:
    with connect(args, "stale") as client:
        status = client.get_cluster_status()
        schedules = list(client.list_schedules().schedules)
        limits = list(client.list_limits().limits)
    fmt = render.output_format(args)
    if fmt in ("json", "yaml"):
        data = render.status_json(status)
        data["schedules"] = schedules_summary(schedules)
        data["limits"] = [limit_json(limit) for limit in limits]
        render.print_data(data, fmt)
    else:
        render.print_status(status)
        render.console.print(escape(_schedules_line(schedules)))
        render.console.print(escape(_limits_line(limits)))
    return 0


def _schedules_line(schedules: list[pb.Schedule]) -> str:
    summary = schedules_summary(schedules)
    line = f"schedules: {summary['count'] or 'none'}"
    if summary["paused"]:
        line += f" ({summary['paused']} paused)"
    upcoming = [s for s in schedules if s.name == (summary["next"] or {}).get("name")]
    if upcoming:
        line += f", next {upcoming[0].name} at {render.local_time(upcoming[0], 'next_slot')}"
    return line


def _limits_line(limits: list[pb.Limit]) -> str:
    parts = []
    for limit in limits:
        part = f"{limit.key} {running_text(limit)} running"
        if limit.rate_per_minute:
            part += f" {rate_text(limit)}"
        parts.append(part)
    return "limits: " + (render.bounded(", ".join(parts)) or "none")
