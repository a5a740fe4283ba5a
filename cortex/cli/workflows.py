"""`cortex workflow submit|status|list|cancel`: DAG workflows, shown as a
tree of tasks with coloured states."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.live import Live
from rich.markup import escape
from rich.text import Text
from rich.tree import Tree

from cortex.api.client import CortexClient
from cortex.api.views import enum_value, state_counts, struct_json, workflow_json
from cortex.cli import render
from cortex.cli.connect import connect, poll_in_session
from cortex.cli.listing import Listing, Page, created_range, next_command, order, run_listing
from cortex.cli.tables import Column
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


def _duration(task: pb.WorkflowTask, now_ms: int) -> str:
    if not task.HasField("start_time"):
        return ""
    started = task.start_time.ToMilliseconds()
    end = task.finish_time.ToMilliseconds() if task.HasField("finish_time") else now_ms
    return f"{max(end - started, 0) / 1000:.1f}s"


def _task_label(task: pb.WorkflowTask, now_ms: int, short_id: str, flat: bool = False) -> str:
    """One task's line: key, short id, state and facts; a task shown away
    from its first dependency (`flat`) names every dependency."""
    parts = [f"[bold]{escape(task.key)}[/]", f"[dim]{escape(short_id)}[/]"]
    parts.append(_styled(render.state_name(task.state)))
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
    after = list(task.depends_on) if flat else list(task.depends_on)[1:]
    if after:
        shown = ", ".join(after[:3]) + (f" +{len(after) - 3} more" if len(after) > 3 else "")
        lead = "" if flat else f"{task.depends_on[0]}, "
        parts.append(f"[dim]after {escape(lead + shown)}[/]")
    if task.condition:
        parts.append(f"[italic]if {escape(render.bounded(task.condition, 200))}[/]")
    if task.skip_reason:
        parts.append(f"[dim]({escape(render.bounded(task.skip_reason, 200))})[/]")
    return " ".join(parts)


def _state_summary(tasks: list[pb.WorkflowTask]) -> str:
    counts: dict[str, int] = {}
    for task in tasks:
        name = render.state_name(task.state)
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{_styled(s)} {n}" for s, n in sorted(counts.items()))


def tree_depth(width: int) -> int:
    """Levels a tree may nest at this console width: each indents 4 cells,
    and a task's line needs room of its own."""
    return max(2, (width - 44) // 4)


def workflow_tree(workflow: pb.Workflow, show_all: bool = False, width: int | None = None) -> Tree:
    """The DAG as a tree: each task under its first dependency (its other
    dependencies named on its line), roots under the workflow. Wide fan-outs
    and branches deeper than the console allows are summarised ("… N more
    tasks below"); with `show_all` every task is shown, branches too deep
    for the console going on at the deepest level that fits."""
    now_ms = int(time.time() * 1000)
    max_depth = tree_depth(width or render.console.width)
    shorts = render.short_ids(task.task_id for task in workflow.tasks)
    state = enum_name(pb.WorkflowState, workflow.state)
    header = f"[bold]{escape(workflow.name)}[/] {_styled(state)} [dim]{workflow.id}[/]"
    if workflow.error:
        header += f" [red]{escape(render.bounded(workflow.error, 200))}[/]"
    tree = Tree(header)
    children: dict[str, list[pb.WorkflowTask]] = {}
    roots = []
    for task in workflow.tasks:
        if task.depends_on:
            children.setdefault(task.depends_on[0], []).append(task)
        else:
            roots.append(task)

    def label(task: pb.WorkflowTask, flat: bool = False) -> Text:
        text = _task_label(task, now_ms, shorts.get(task.task_id, task.task_id), flat)
        return Text.from_markup(text, overflow="fold")

    def below(tasks: list[pb.WorkflowTask]) -> list[pb.WorkflowTask]:
        """Every task under these, depth first (without recursing)."""
        found: list[pb.WorkflowTask] = []
        stack = list(reversed(tasks))
        while stack:
            task = stack.pop()
            found.append(task)
            stack.extend(reversed(children.get(task.key, [])))
        return found

    def add(parent: Tree, tasks: list[pb.WorkflowTask], depth: int) -> None:
        shown = tasks if show_all or len(tasks) <= MAX_CHILDREN else tasks[: MAX_CHILDREN - 2]
        for task in shown:
            branch = parent.add(label(task))
            kids = children.get(task.key, [])
            if not kids:
                continue
            if depth + 1 < max_depth:
                add(branch, kids, depth + 1)
            elif show_all:
                for descendant in below(kids):
                    branch.add(label(descendant, flat=True))
            else:
                hidden = below(kids)
                branch.add(
                    f"[dim]… {len(hidden):,} more task{'s' if len(hidden) != 1 else ''} below "
                    f"({_state_summary(hidden)}[dim]); --all shows them[/]"
                )
        rest = tasks[len(shown) :]
        if rest:
            parent.add(
                f"[dim]… {len(rest):,} more ({_state_summary(rest)}[dim]); --all shows them[/]"
            )
            # Dependents of the tasks not shown still appear, one level up.
            add(parent, [child for task in rest for child in children.get(task.key, [])], depth)

    add(tree, roots, 0)
    return tree


def print_workflow(workflow: pb.Workflow, show_all: bool = False) -> None:
    render.console.print(workflow_tree(workflow, show_all), soft_wrap=False)
    summary = _state_summary(list(workflow.tasks))
    render.console.print(f"[dim]{len(workflow.tasks):,} tasks:[/] {summary}")
    context = struct_json(workflow.context)
    if context:
        text = render.bounded(json.dumps(context), render.DETAIL_CHARS)
        render.console.print(f"[dim]context:[/] {escape(text)}")


def _columns(wide: bool) -> list[Column]:
    if wide:
        return [
            Column("id", keep=True),
            Column("name", max_width=60),
            Column("state", keep=True, min_width=len("submitting")),
            Column("tasks", keep=True),
            Column("created", keep=True),
            Column("ended", keep=True),
            Column("took", keep=True, justify="right"),
            Column("error", max_width=80),
        ]
    return [
        Column("id", keep=True),
        Column("name", min_width=6, max_width=30),
        Column("state", keep=True, min_width=len("submitting")),
        Column("tasks", min_width=5),
        Column("age", keep=True, justify="right"),
        Column("took", keep=True, justify="right"),
        Column("error", min_width=5),
    ]


def _row(workflow: pb.Workflow, wide: bool, shorts: dict[str, str]) -> list[Text]:
    counts = Text(" ").join(
        Text(f"{count} {state}", style=render.STATE_STYLES.get(state, ""))
        for state, count in state_counts(workflow.task_counts).items()
    )
    state = Text(enum_name(pb.WorkflowState, workflow.state))
    state.stylize(WORKFLOW_STYLES.get(state.plain) or "")
    took = Text(render.took(workflow, "create_time", "finish_time"))
    error = Text(render.bounded(workflow.error, 200), style="red")
    if wide:
        return [
            Text(workflow.id), Text(workflow.name), state, counts,
            Text(render.local_time(workflow, "create_time")),
            Text(render.local_time(workflow, "finish_time")), took, error,
        ]  # fmt: skip
    return [Text(shorts[workflow.id]), Text(workflow.name), state, counts,
            Text(render.age(workflow, "create_time")), took, error]  # fmt: skip


def list_workflows(client: CortexClient, args: argparse.Namespace) -> int:
    states = [enum_value(pb.WorkflowState, s, "--state") for s in args.state]
    span = created_range(args)

    def fetch(token: str) -> Page[pb.Workflow]:
        reply = client.list_workflows(
            states=states,
            page_size=args.limit,
            page_token=token,
            order=order(args),
            create_time_range=span,
        )
        return Page(list(reply.workflows), reply.next_page_token, reply.total_size)

    filters = [word for state in args.state for word in ("--state", state)]
    listing = Listing(
        what="workflows",
        key="workflows",
        fetch=fetch,
        item_id=lambda workflow: workflow.id,
        item_json=workflow_json,
        columns=_columns,
        row=_row,
        command=next_command(args, ["workflow", "list"], filters),
        after_first_page=lambda: poll_in_session(client, args),
    )
    return run_listing(listing, args)


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
            fmt = render.output_format(args)
            if fmt in ("json", "yaml"):
                render.print_data(workflow_json(workflow), fmt)
            else:
                print_workflow(workflow, args.all)
            return 0
        if args.workflow_command == "list":
            return list_workflows(client, args)
        if args.workflow_command == "cancel":
            workflow = client.cancel_workflow(args.workflow_id, args.reason).workflow
            if args.json:
                render.print_json(workflow_json(workflow))
            else:
                print(f"{workflow.id} {enum_name(pb.WorkflowState, workflow.state)}")
            return 0
    return 2
