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
from cortex.errors import CortexError
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb


def _bar(percent: float, width: int = 12) -> Text:
    percent = max(0.0, min(100.0, percent))
    filled = round(percent / 100 * width)
    style = "green" if percent < 60 else "yellow" if percent < 85 else "red"
    bar = Text("█" * filled, style=style)
    bar.append("░" * (width - filled), style="dim")
    bar.append(f" {percent:5.1f}%")
    return bar


def nodes_table(nodes: list[pb.Node]) -> Table:
    table = Table("node", "status", "cpu", "memory", "disk", "tasks", "labels", box=None)
    for node in nodes:
        name = node.id + (" *" if node.leader else "")
        status = enum_name(pb.NodeStatus, node.status)
        if not node.connected and node.status != pb.NODE_STATUS_REMOVED:
            status += " (unreachable)"
        if node.HasField("resources"):
            r = node.resources
            mem_used = 100 - (
                r.memory_available_mb / r.memory_total_mb * 100 if r.memory_total_mb else 100
            )
            disk_used = 100 - (
                r.disk_available_gb / r.disk_total_gb * 100 if r.disk_total_gb else 100
            )
            declared = "memory_total_mb" in r.declared
            mem = _bar(mem_used)
            mem.append(
                f" {r.memory_available_mb:,.0f} MB free" + (" (declared)" if declared else "")
            )
            cpu, disk = _bar(r.cpu_usage_percent), _bar(disk_used)
        else:
            cpu = mem = disk = Text("no report yet", style="dim")
        tasks = f"{node.running_tasks}" + (f"/{node.max_tasks}" if node.max_tasks else "")
        labels = ", ".join(f"{k}={v}" if v else k for k, v in sorted(node.labels.items()))
        table.add_row(name, status, cpu, mem, disk, tasks, labels)
    return table


def run(args: argparse.Namespace) -> int:
    """`cortex node list|drain|cordon|uncordon|remove`."""
    if args.node_command == "remove":
        return _remove(args)
    if args.node_command == "list":
        with connect(args, "stale") as client:
            nodes = list(client.list_nodes(include_removed=args.all).nodes)
        if args.json:
            render.print_json([node_json(n) for n in nodes])
        else:
            render.console.print(nodes_table(nodes))
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
    for task in queue.tasks:
        command = task.spec.shell or " ".join(task.spec.command) or task.type
        tasks.add_row(task.id[:8], render.styled_state(render.state_name(task.state)),
                      task.node_id, str(task.attempt), str(task.priority), command[:50])  # fmt: skip
    return Group(header, Text(""), nodes_table(nodes), Text(""),
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
