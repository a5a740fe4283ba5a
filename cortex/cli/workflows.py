"""`cortex workflow submit|status|list|cancel`: DAG workflows, shown as a
tree of tasks with coloured states."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from google.protobuf.message import Message
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from cortex.api.client import CortexClient
from cortex.api.views import enum_value, state_counts, struct_json, workflow_json
from cortex.cli import render
from cortex.cli.connect import connect, poll_in_session
from cortex.errors import InvalidArgument
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

TERMINAL_WORKFLOW_STATES = (
    pb.WORKFLOW_STATE_COMPLETED,
    pb.WORKFLOW_STATE_FAILED,
    pb.WORKFLOW_STATE_CANCELLED,
)
_FORMATS = {"json": pb.DEFINITION_FORMAT_JSON, "yaml": pb.DEFINITION_FORMAT_YAML}
WORKFLOW_STYLES = {"submitting": "dim", "running": "bold blue", "completed": "green",
                   "failed": "red", "cancelled": "yellow"}  # fmt: skip
# Children shown under one task before the rest are summarised (--all shows all).
MAX_CHILDREN = 12
POLL_INTERVAL_S = 0.3


# -- rendering --------------------------------------------------------------------


def _styled(state: str) -> str:
    style = WORKFLOW_STYLES.get(state) or render.STATE_STYLES.get(state, "white")
    return f"[{style}]{state}[/]"


def _clock(message: Message, field: str) -> str:
    """A Timestamp field as a local time for tables: HH:MM:SS today, else the
    date too; empty when unset."""
    if not message.HasField(field):
        return ""
    moment = datetime.fromtimestamp(getattr(message, field).ToMilliseconds() / 1000)
    same_day = moment.date() == datetime.now().date()
    return moment.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S")


def _duration(task: pb.WorkflowTask, now_ms: int) -> str:
    if not task.HasField("start_time"):
        return ""
    started = task.start_time.ToMilliseconds()
    end = task.finish_time.ToMilliseconds() if task.HasField("finish_time") else now_ms
    return f"{max(end - started, 0) / 1000:.1f}s"


def _task_label(task: pb.WorkflowTask, now_ms: int) -> str:
    parts = [f"[bold]{escape(task.key)}[/]", _styled(render.state_name(task.state))]
    facts = [task.type]
    if task.node_id:
        facts.append(f"on {escape(task.node_id)}")
    if task.attempt > 1:
        facts.append(f"attempt {task.attempt}")
    duration = _duration(task, now_ms)
    if duration:
        facts.append(duration)
    if task.HasField("exit_code"):
        facts.append(f"exit {task.exit_code}")
    parts.append(f"[dim]{', '.join(facts)}[/]")
    others = list(task.depends_on)[1:]
    if others:
        shown = ", ".join(others[:3]) + (f" +{len(others) - 3} more" if len(others) > 3 else "")
        parts.append(f"[dim]after {escape(task.depends_on[0])}, {escape(shown)}[/]")
    if task.condition:
        parts.append(f"[italic]if {escape(task.condition)}[/]")
    if task.skip_reason:
        parts.append(f"[dim]({escape(task.skip_reason)})[/]")
    return " ".join(parts)


def workflow_tree(workflow: pb.Workflow, show_all: bool = False) -> Tree:
    """The DAG as a tree: each task under its first dependency (its other
    dependencies named on its line), roots under the workflow."""
    now_ms = int(time.time() * 1000)
    state = enum_name(pb.WorkflowState, workflow.state)
    header = f"[bold]{escape(workflow.name)}[/] {_styled(state)} [dim]{workflow.id}[/]"
    if workflow.error:
        header += f" [red]{escape(workflow.error)}[/]"
    tree = Tree(header)
    children: dict[str, list[pb.WorkflowTask]] = {}
    roots = []
    for task in workflow.tasks:
        if task.depends_on:
            children.setdefault(task.depends_on[0], []).append(task)
        else:
            roots.append(task)

    def add(parent: Tree, tasks: list[pb.WorkflowTask]) -> None:
        shown = tasks if show_all or len(tasks) <= MAX_CHILDREN else tasks[: MAX_CHILDREN - 2]
        for task in shown:
            label = Text.from_markup(_task_label(task, now_ms), overflow="fold")
            add(parent.add(label), children.get(task.key, []))
        rest = tasks[len(shown) :]
        if rest:
            counts: dict[str, int] = {}
            for task in rest:
                name = render.state_name(task.state)
                counts[name] = counts.get(name, 0) + 1
            summary = ", ".join(f"{_styled(s)} {n}" for s, n in sorted(counts.items()))
            parent.add(f"[dim]… {len(rest)} more ({summary}[dim]); --all shows them[/]")
            # Dependents of the tasks not shown still appear, one level up.
            add(parent, [child for task in rest for child in children.get(task.key, [])])

    add(tree, roots)
    return tree


def print_workflow(workflow: pb.Workflow, show_all: bool = False) -> None:
    render.console.print(workflow_tree(workflow, show_all), soft_wrap=False)
    counts: dict[str, int] = {}
    for task in workflow.tasks:
        name = render.state_name(task.state)
        counts[name] = counts.get(name, 0) + 1
    summary = ", ".join(f"{_styled(s)} {n}" for s, n in sorted(counts.items()))
    render.console.print(f"[dim]{len(workflow.tasks)} tasks:[/] {summary}")
    context = struct_json(workflow.context)
    if context:
        render.console.print(f"[dim]context:[/] {escape(json.dumps(context))}")


def print_workflow_table(
    workflows: list[pb.Workflow], total: int, next_page_token: str = ""
) -> None:
    table = Table(box=None)
    table.add_column("id", no_wrap=True, min_width=36)
    table.add_column("name", overflow="ellipsis", no_wrap=True, max_width=32)
    table.add_column("state", no_wrap=True, min_width=9)
    table.add_column("created", no_wrap=True, min_width=8)
    table.add_column("ended", no_wrap=True, min_width=8)
    table.add_column("tasks", no_wrap=True)
    table.add_column("error", overflow="ellipsis", no_wrap=True)
    for w in workflows:
        counts = Text(" ").join(
            Text(f"{count} {state}", style=render.STATE_STYLES.get(state, ""))
            for state, count in state_counts(w.task_counts).items()
        )
        table.add_row(w.id, escape(w.name), _styled(enum_name(pb.WorkflowState, w.state)),
                      _clock(w, "create_time"), _clock(w, "finish_time"), counts,
                      escape(w.error or ""))  # fmt: skip
    render.console.print(table)
    render.console.print(render.page_note(len(workflows), total, "workflows", next_page_token))


# -- commands ---------------------------------------------------------------------


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def read_definition(args: argparse.Namespace) -> tuple[str, str]:
    """The definition text and format to send; `--set` pairs are merged into
    its `context`. With `--set`, or YAML over the server's YAML limit, the
    file is parsed here with the server's strict rules and sent as JSON."""
    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(args.file).read_text()
        except OSError as err:
            raise InvalidArgument(f"cannot read {args.file}: {err.strerror}") from None
    fmt = args.format or ""
    if not fmt and args.file != "-":
        suffix = Path(args.file).suffix.lower()
        fmt = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(suffix, "")
    from cortex.workflows.definition import (
        MAX_DEFINITION_BYTES,
        MAX_YAML_BYTES,
        is_yaml,
        load_document,
    )

    large_yaml = is_yaml(text, fmt) and len(text.encode("utf-8", errors="replace")) > MAX_YAML_BYTES
    if not args.set and not large_yaml:
        return text, fmt
    document = load_document(text, fmt, max_yaml_bytes=MAX_DEFINITION_BYTES)
    context = document.get("context") or {}
    if not isinstance(context, dict):
        raise InvalidArgument("the definition's context is not an object")
    for pair in args.set:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"--set {pair!r} is not KEY=VALUE")
        context[key] = _parse_value(value)
    document["context"] = context
    return json.dumps(document), "json"


def _wait(client: CortexClient, workflow_id: str, args: argparse.Namespace) -> pb.Workflow:
    deadline = time.monotonic() + args.wait_timeout
    workflow = client.get_workflow(workflow_id).workflow
    poll_in_session(client, args)
    live = None
    if not args.json and render.console.is_terminal:
        live = Live(workflow_tree(workflow, args.all), console=render.console,
                    refresh_per_second=4, transient=True)  # fmt: skip
        live.start()
    try:
        while workflow.state not in TERMINAL_WORKFLOW_STATES and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)
            workflow = client.get_workflow(workflow_id).workflow
            if live is not None:
                live.update(workflow_tree(workflow, args.all))
    finally:
        if live is not None:
            live.stop()
    return workflow


def submit(client: CortexClient, args: argparse.Namespace) -> int:
    text, fmt = read_definition(args)
    reply = client.submit_workflow(
        text, format=_FORMATS.get(fmt, pb.DEFINITION_FORMAT_UNSPECIFIED),
        idempotency_key=args.idempotency_key,
    )  # fmt: skip
    if not args.wait:
        if args.json:
            render.print_json({"id": reply.workflow_id, "created": reply.created})
        else:
            note = "" if reply.created else " (existing workflow for this idempotency key)"
            print(f"{reply.workflow_id}{note}")
        return 0
    workflow = _wait(client, reply.workflow_id, args)
    if args.json:
        render.print_json(workflow_json(workflow))
    else:
        print_workflow(workflow, args.all)
    return 0 if workflow.state == pb.WORKFLOW_STATE_COMPLETED else 1


def run(args: argparse.Namespace) -> int:
    with connect(args, "linearizable") as client:
        if args.workflow_command == "submit":
            return submit(client, args)
        if args.workflow_command == "status":
            workflow = client.get_workflow(args.workflow_id).workflow
            if args.json:
                render.print_json(workflow_json(workflow))
            else:
                print_workflow(workflow, args.all)
            return 0
        if args.workflow_command == "list":
            reply = client.list_workflows(
                states=[enum_value(pb.WorkflowState, s, "--state") for s in args.state],
                page_size=args.limit,
                page_token=args.page_token,
            )
            if args.json:
                render.print_json(
                    {
                        "workflows": [workflow_json(w) for w in reply.workflows],
                        "total": reply.total_size,
                        "next_page_token": reply.next_page_token or None,
                    }
                )
            else:
                print_workflow_table(list(reply.workflows), reply.total_size, reply.next_page_token)
            return 0
        if args.workflow_command == "cancel":
            workflow = client.cancel_workflow(args.workflow_id, args.reason).workflow
            if args.json:
                render.print_json(workflow_json(workflow))
            else:
                print(f"{workflow.id} {enum_name(pb.WorkflowState, workflow.state)}")
            return 0
    return 2
