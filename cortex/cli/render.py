"""Turning API replies into JSON objects and rich tables for people."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cortex.api.views import node_json, status_json, task_json
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

__all__ = ["node_json", "status_json", "task_json"]

STATE_STYLES = {
    "pending": "dim",
    "queued": "cyan",
    "assigned": "blue",
    "running": "bold blue",
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "skipped": "dim",
    "dead_letter": "bold red",
}

console = Console(highlight=False, soft_wrap=True)


def state_name(state: int) -> str:
    """A task state's lower-case name ("dead_letter")."""
    return enum_name(pb.TaskState, state)


def styled_state(state: str) -> str:
    return f"[{STATE_STYLES.get(state, 'white')}]{state}[/]"


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


def print_task(task: pb.Task, events: Sequence[pb.Event] = ()) -> None:
    data = task_json(task, events)
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for key in (
        "id",
        "state",
        "type",
        "attempt",
        "node",
        "priority",
        "command",
        "error",
        "created_at",
    ):
        value = data[key]
        if value is None or value == "":
            continue
        if key == "command" and isinstance(value, list):
            value = shlex.join(value)
        table.add_row(key, styled_state(value) if key == "state" else str(value))
    if data["result"]:
        result = data["result"]
        table.add_row("exit code", str(result["exit_code"]))
        for stream in ("stdout", "stderr"):
            if result[stream]:
                suffix = " (tail)" if result[f"{stream}_truncated"] else ""
                table.add_row(stream + suffix, result[stream].rstrip("\n"))
    for reason in data.get("pending_reasons", []):
        table.add_row("waiting", reason)
    console.print(table)
    if events:
        history = Table("seq", "event", "from", "to", "node", "attempt", "detail", "at", box=None)
        for ev in data["events"]:
            history.add_row(
                str(ev["seq"]), ev["event"], ev["from"] or "", ev["to"] or "", ev["node"] or "",
                str(ev["attempt"]), json.dumps(ev["detail"]) if ev["detail"] else "", ev["at"] or "",
            )  # fmt: skip
        console.print(history)


def page_note(count: int, total: int, what: str, next_page_token: str = "") -> str:
    """The count line under a listing ("2 of 5 tasks"), with how to ask for
    the next page when there is one."""
    note = f"{count} of {total} {what}"
    if next_page_token:
        note += f"; next page: --page-token {next_page_token}"
    return f"[dim]{escape(note)}[/]"


def print_task_table(tasks: list[pb.Task], total: int, next_page_token: str = "") -> None:
    table = Table("id", "state", "attempt", "node", "command", "exit", box=None)
    for task in tasks:
        command = task.spec.shell or " ".join(task.spec.command)
        exit_code = str(task.result.exit_code) if task.HasField("result") else ""
        table.add_row(task.id, styled_state(state_name(task.state)), str(task.attempt),
                      task.node_id, command[:60], exit_code)  # fmt: skip
    console.print(table)
    console.print(page_note(len(tasks), total, "tasks", next_page_token))


def print_status(status: pb.GetClusterStatusResponse) -> None:
    data = status_json(status)
    console.print(
        f"node [bold]{data['node_id']}[/] ({data['raft_state']}), leader "
        f"[bold]{data['leader'] or 'none'}[/], term {data['term']}, quorum "
        f"{'yes' if data['has_quorum'] else '[red]no[/]'}"
    )
    console.print(
        f"applied {data['applied_index']} (log {data['log_size']} entries), digest {data['state_digest'][:16]}"
    )
    counts = ", ".join(f"{state} {count}" for state, count in sorted(data["task_counts"].items()))
    console.print(f"tasks: {counts or 'none'}")
    table = Table("node", "status", "raft", "grpc", "connected", "active tasks", box=None)
    for node in data["nodes"]:
        name = node["node_id"] + (" *" if node["leader"] else "")
        table.add_row(name, node["status"], node["raft_address"], node["grpc_address"],
                      "yes" if node["connected"] else "[red]no[/]", str(node["active_tasks"]))  # fmt: skip
    console.print(table)
