"""`cortex node list` and `cortex top`."""

from __future__ import annotations

import argparse
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cortex.api.client import CortexClient
from cortex.api.views import node_json, state_counts
from cortex.cli import render
from cortex.cli.connect import connect
from cortex.cli.tables import Column, fit_widths, natural_widths, render_table, table_width
from cortex.errors import CortexError
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb


def _bar(percent: float, width: int) -> Text:
    """A usage bar `width` cells wide (none for 0) and the percentage."""
    percent = max(0.0, min(100.0, percent))
    style = "green" if percent < 60 else "yellow" if percent < 85 else "red"
    filled = round(percent / 100 * width)
    bar = Text("█" * filled, style=style)
    bar.append("░" * (width - filled), style="dim")
    if width:
        bar.append(" ")
    bar.append(f"{percent:3.0f}%")
    return bar


def _size_mb(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def _size_gb(gb: float) -> str:
    return f"{gb / 1000:.1f} TB" if gb >= 1000 else f"{gb:.1f} GB"


def _used(available: float, total: float) -> float:
    return 100 - (available / total * 100 if total else 100)


def _node_cells(node: pb.Node, bar: int, free: bool, wide: bool) -> list[Text]:
    name = Text(node.id + (" *" if node.leader else ""))
    status = Text(enum_name(pb.NodeStatus, node.status))
    if not node.connected and node.status != pb.NODE_STATUS_REMOVED:
        status.append(" (unreachable)", style="red")
    if node.HasField("resources"):
        r = node.resources
        cpu = _bar(r.cpu_usage_percent, bar)
        mem = _bar(_used(r.memory_available_mb, r.memory_total_mb), bar)
        disk = _bar(_used(r.disk_available_gb, r.disk_total_gb), bar)
        if free:
            mem.append(f" {_size_mb(r.memory_available_mb)} free")
            disk.append(f" {_size_gb(r.disk_available_gb)} free")
        if wide and "memory_total_mb" in r.declared:
            mem.append(" (declared)", style="dim")
    else:
        cpu = mem = disk = Text("no report", style="dim")
    tasks = Text(
        f"{node.running_tasks}"
        + (f"/{node.max_tasks}" if node.max_tasks else "")
        + (f"+{node.prefetch_tasks}" if node.max_tasks and node.prefetch_tasks else "")
    )
    labels = Text(", ".join(f"{k}={v}" if v else k for k, v in sorted(node.labels.items())))
    if not wide:
        return [name, status, cpu, mem, disk, tasks, labels]
    role = Text(enum_name(pb.NodeRole, node.role) or "voter")
    age = f"{node.report_age.ToMilliseconds() / 1000:.1f}s" if node.HasField("report_age") else ""
    load = f"{node.resources.load_1m:.2f}" if node.HasField("resources") else ""
    return [name, status, role, Text(node.grpc_address), cpu, Text(load), mem, disk, tasks,
            Text(", ".join(node.executors)), Text(age), labels]  # fmt: skip


def _node_columns(wide: bool) -> list[Column]:
    if wide:
        names = ["node", "status", "role", "grpc", "cpu", "load", "memory", "disk", "tasks",
                 "executors", "report", "labels"]  # fmt: skip
        return [Column(name, keep=True) for name in names]
    return [
        Column("node", keep=True),
        Column("status", keep=True),
        Column("cpu", keep=True),
        Column("memory", keep=True),
        Column("disk", keep=True),
        Column("tasks", keep=True, justify="right"),
        Column("labels", min_width=6),
    ]


# Bar widths and free-space notes, richest first: the first that fits the
# console is used.
_LAYOUTS = ((10, True), (10, False), (5, False), (0, False))


def nodes_table(nodes: list[pb.Node], width: int, wide: bool = False) -> Text:
    """The nodes as a table: as much detail as fits `width` (every column
    always shown), or every column in full when `wide`."""
    columns = _node_columns(wide)
    if wide:
        rows = [_node_cells(node, 10, True, True) for node in nodes]
        return render_table(columns, natural_widths(columns, rows), rows)
    for bar, free in _LAYOUTS:
        rows = [_node_cells(node, bar, free, False) for node in nodes]
        widths = fit_widths(columns, rows, width)
        if table_width(widths) <= width:
            break
    return render_table(columns, widths, rows)


def run(args: argparse.Namespace) -> int:
    """`cortex node list|drain|cordon|uncordon|remove`."""
    if args.node_command == "remove":
        return _remove(args)
    if args.node_command == "list":
        with connect(args, "stale") as client:
            nodes = list(client.list_nodes(include_removed=args.all).nodes)
        fmt = render.output_format(args)
        if fmt in ("json", "yaml"):
            render.print_data([node_json(n) for n in nodes], fmt)
        elif fmt == "name":
            for node in nodes:
                print(node.id)
        else:
            table = nodes_table(nodes, render.console.width, wide=fmt == "wide")
            render.console.print(table, soft_wrap=True)
        return 0
    with connect(args, "linearizable") as client:
        if args.node_command == "drain":
            node = client.drain_node(args.node_id, deadline_ms=int(args.deadline * 1000)).node
        elif args.node_command == "cordon":
            node = client.cordon_node(args.node_id).node
        else:
            node = client.uncordon_node(args.node_id).node
    if args.json:
        render.print_json(node_json(node))
    else:
        render.console.print(f"{node.id} {enum_name(pb.NodeStatus, node.status)}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    with connect(args, "linearizable", timeout_s=60) as client:
        removal = client.remove_node(args.node_id, args.reason)
    if args.json:
        render.print_json(
            {
                "node_id": removal.node_id,
                "raft_address": removal.raft_address,
                "requeued_tasks": removal.requeued_tasks,
                "members": list(removal.members),
            }
        )
    else:
        render.console.print(
            f"{removal.node_id} removed; {removal.requeued_tasks} tasks re-queued; "
            f"Raft members now {', '.join(removal.members)}"
        )
    return 0


_ACTIVE_STATES = [pb.TASK_STATE_QUEUED, pb.TASK_STATE_ASSIGNED, pb.TASK_STATE_RUNNING]


def _top_view(client: CortexClient) -> Group:
    nodes = list(client.list_nodes().nodes)
    status = client.get_cluster_status()
    queue = client.list_tasks(states=_ACTIVE_STATES, page_size=15)
    counts = state_counts(status.task_counts)
    header = Text.from_markup(
        f"[bold]cortex top[/]  leader [bold]{status.leader_id or 'none'}[/]  term {status.term}  "
        f"applied {status.applied_index}  "
        + "  ".join(f"{k} {v}" for k, v in counts.items())
        + "   [dim](q to quit)[/]"
    )
    tasks = Table("task", "state", "node", "attempt", "prio", "command", box=None)
    shorts = render.short_ids(task.id for task in queue.tasks)
    for task in queue.tasks:
        command = render.command_text(task.spec, 50) or task.type
        tasks.add_row(shorts[task.id], render.styled_state(render.state_name(task.state)),
                      task.node_id, str(task.attempt), str(task.priority), command)  # fmt: skip
    return Group(header, Text(""), nodes_table(nodes, render.console.width), Text(""),
                 Text(f"queue ({queue.total_size} active)", style="bold"), tasks)  # fmt: skip


@contextmanager
def _keys() -> Iterator[None]:
    """Single keypresses without Enter, when stdin is a terminal."""
    if not sys.stdin.isatty():
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _quit_pressed(timeout_s: float) -> bool:
    if not sys.stdin.isatty():
        time.sleep(timeout_s)
        return False
    ready, _, _ = select.select([sys.stdin], [], [], timeout_s)
    return bool(ready) and sys.stdin.read(1).lower() == "q"


def top(args: argparse.Namespace) -> int:
    with connect(args, "stale", timeout_s=5) as client, _keys():
        try:
            with Live(
                _top_view(client), console=render.console, screen=True, auto_refresh=False
            ) as live:
                while not _quit_pressed(args.interval):
                    try:
                        live.update(_top_view(client), refresh=True)
                    except CortexError as err:
                        live.update(
                            Text(f"cortex top: {err} (retrying)", style="red"), refresh=True
                        )
        except KeyboardInterrupt:
            pass
    return 0
