"""How the CLI prints what the API answers: the output formats every read
command shares (`-o table|wide|json|yaml|name`, `--json` being `-o json`),
short ids, values bounded for people ("… N more"), a task in full, and the
cluster status. JSON and YAML keep everything; tables are for reading."""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from cortex.api.views import iso_time, node_json, status_json, task_json
from cortex.cli.tables import Column, print_table
from cortex.errors import InvalidArgument
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

if TYPE_CHECKING:
    import yaml

__all__ = ["Table", "node_json", "status_json", "task_json"]

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
# A short id is at least this long: a prefix commands accept (the API takes
# any unique prefix of 4 or more).
SHORT_ID_CHARS = 8
# A value of `task get` longer than this is cut, saying how much is left.
DETAIL_CHARS = 400
# Lines of a task's output tail `task get` shows.
OUTPUT_LINES = 20
# Lines of why a queued task waits (one per node) `task get` shows.
REASON_LINES = 10

console = Console(highlight=False, soft_wrap=True)


def state_name(state: int) -> str:
    """A task state's lower-case name ("dead_letter")."""
    return enum_name(pb.TaskState, state)


def styled_state(state: str) -> str:
    return f"[{STATE_STYLES.get(state, 'white')}]{state}[/]"


def state_text(state: str) -> Text:
    return Text(state, style=STATE_STYLES.get(state, ""))


# -- output formats ---------------------------------------------------------------


def output_format(args: argparse.Namespace, default: str = "table") -> str:
    """The format a command was asked for: `-o`, or json for `--json`."""
    chosen = getattr(args, "output", None)
    if getattr(args, "json", False):
        if chosen not in (None, "json"):
            raise InvalidArgument(f"--json and -o {chosen} disagree: give one of them")
        return "json"
    return str(chosen or default)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


@functools.cache
def _dumper() -> type[yaml.SafeDumper]:
    """A dumper writing multi-line strings (a task's output) as literal
    blocks, as written. Made, and YAML imported, on first use: every
    command imports this module, few print YAML."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def yaml_text(data: Any) -> str:
    import yaml

    return str(
        yaml.dump(data, Dumper=_dumper(), sort_keys=False, allow_unicode=True, width=1_000_000)
    )


def print_data(data: Any, fmt: str) -> None:
    """`data` as JSON, or as YAML for "yaml"."""
    if fmt == "yaml":
        print(yaml_text(data), end="")
    else:
        print_json(data)


# -- ids, times and long values ---------------------------------------------------------


def short_ids(ids: Iterable[str], minimum: int = SHORT_ID_CHARS) -> dict[str, str]:
    """Each id's shortest prefix of at least `minimum` characters that no
    other id given shares (the whole id when it is that short), never
    ending on a "-" of a UUID."""
    ordered = sorted(set(ids))
    shorts: dict[str, str] = {}
    for i, item in enumerate(ordered):
        length = minimum
        for neighbour in ordered[max(i - 1, 0) : i + 2]:
            if neighbour != item:
                length = max(length, _common_prefix(item, neighbour) + 1)
        if length < len(item) and item[length - 1] == "-":
            length += 1
        shorts[item] = item[:length]
    return shorts


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def age(message: Message, field: str, now_s: float | None = None) -> str:
    """How long ago a Timestamp field was, in its largest unit ("42s",
    "5m", "3h", "2d"); empty when unset."""
    if not message.HasField(field):
        return ""
    seconds = max((now_s or time.time()) - getattr(message, field).ToMilliseconds() / 1000, 0)
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def took(message: Message, start: str, end: str) -> str:
    """The span between two Timestamp fields ("4.2s", "3m12s", "2h5m");
    empty unless both are set."""
    if not (message.HasField(start) and message.HasField(end)):
        return ""
    ms = getattr(message, end).ToMilliseconds() - getattr(message, start).ToMilliseconds()
    seconds = max(ms, 0) / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def local_time(message: Message, field: str) -> str:
    """A Timestamp field as a local date and time; empty when unset."""
    if not message.HasField(field):
        return ""
    moment = datetime.fromtimestamp(getattr(message, field).ToMilliseconds() / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def bounded(text: str, limit: int = DETAIL_CHARS) -> str:
    """`text`, or its start and how much is left ("… 99,990 more" items of
    a comma-separated list, else characters)."""
    if len(text) <= limit:
        return text
    cut = text.rfind(", ", 0, limit + 1)
    if cut > 0:
        more = text[cut:].count(", ")
        return f"{text[:cut]} … {more:,} more"
    return f"{text[:limit]}… {len(text) - limit:,} more characters"


def bounded_list(items: Sequence[str], limit: int = DETAIL_CHARS, what: str = "more") -> str:
    """Items joined by spaces up to about `limit` characters, then how many
    are left ("… 12 more arguments")."""
    shown: list[str] = []
    used = 0
    for item in items:
        if shown and used + len(item) + 1 > limit:
            break
        shown.append(item)
        used += len(item) + 1
    text = bounded(" ".join(shown), limit)
    rest = len(items) - len(shown)
    return f"{text} … {rest:,} {what}" if rest else text


def tail_lines(text: str, lines: int = OUTPUT_LINES) -> tuple[str, int]:
    """The last `lines` lines of `text` and how many came before them."""
    all_lines = text.rstrip("\n").split("\n")
    hidden = max(len(all_lines) - lines, 0)
    return "\n".join(all_lines[hidden:]), hidden


# -- one task ----------------------------------------------------------------------


def command_text(spec: pb.TaskSpec, limit: int = DETAIL_CHARS) -> str:
    """The command a spec runs, as a shell line, bounded."""
    if spec.shell:
        return bounded(spec.shell, limit)
    return bounded_list([shlex.quote(arg) for arg in spec.command], limit, "more arguments")


def constraints_text(constraints: pb.Constraints) -> str:
    """Where a spec may run, in words; empty when anywhere."""
    parts = []
    if constraints.node_labels:
        parts.append("labels " + bounded_list(list(constraints.node_labels), what="more labels"))
    if constraints.target_node:
        parts.append(f"on {constraints.target_node}")
    if constraints.allowed_nodes:
        parts.append("only on " + bounded_list(list(constraints.allowed_nodes), what="more"))
    if constraints.forbidden_nodes:
        parts.append("not on " + bounded_list(list(constraints.forbidden_nodes), what="more"))
    if constraints.requires_capabilities:
        pairs = [f"{k}={v}" for k, v in sorted(constraints.requires_capabilities.items())]
        parts.append("capabilities " + bounded_list(pairs, what="more"))
    if constraints.requires_gpu:
        parts.append("a GPU")
    if constraints.avoid_gaming:
        parts.append("no gaming")
    if constraints.min_memory_mb:
        parts.append(f"{constraints.min_memory_mb} MB memory")
    if constraints.min_disk_gb:
        parts.append(f"{constraints.min_disk_gb:g} GB disk")
    if constraints.max_parallel_per_node:
        parts.append(f"at most {constraints.max_parallel_per_node} per node")
    return "; ".join(parts)


def keys_text(concurrency_key: str, fairness_key: str) -> str:
    """The limit and fairness keys a task runs under, in words; empty for none."""
    parts = []
    if concurrency_key:
        parts.append(f"concurrency {concurrency_key}")
    if fairness_key:
        parts.append(f"fairness {fairness_key}")
    return ", ".join(parts)


def print_task(task: pb.Task, events: Sequence[pb.Event] = ()) -> None:
    """One task for people: every long value bounded, saying how much is
    left (-o json shows everything)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")

    def row(key: str, value: str, style: str = "") -> None:
        if value:
            table.add_row(key, Text(value, style=style))

    row("id", task.id)
    table.add_row("state", state_text(state_name(task.state)))
    row("type", task.type)
    row("attempt", str(task.attempt))
    row("node", task.node_id)
    row("priority", str(task.priority))
    if task.workflow_id:
        row("workflow", f"{task.workflow_id} ({bounded(task.workflow_key, 100)})")
    row("command", command_text(task.spec))
    row("needs", constraints_text(task.spec.constraints))
    row("keys", keys_text(task.concurrency_key, task.fairness_key))
    row("error", bounded(task.error))
    row("created_at", iso_time(task, "create_time") or "")
    if task.HasField("result"):
        result = task.result
        row("exit code", str(result.exit_code))
        for stream in ("stdout", "stderr"):
            text = getattr(result, stream).decode("utf-8", errors="replace")
            if not text:
                continue
            shown, hidden = tail_lines(text)
            cut = getattr(result, f"{stream}_truncated") or hidden
            row(stream + (" (tail)" if cut else ""), bounded(shown, DETAIL_CHARS * 8))
            if hidden:
                row("", f"… {hidden:,} earlier lines (cortex logs {task.id} shows all)", "dim")
    reasons = list(task.pending_reasons)
    for reason in reasons[:REASON_LINES]:
        row("waiting", bounded(reason.removeprefix("waiting: ")))
    if len(reasons) > REASON_LINES:
        row("waiting", f"… {len(reasons) - REASON_LINES:,} more nodes (-o json shows all)", "dim")
    console.print(table)
    if events:
        print_events(task, events)


def print_events(task: pb.Task, events: Sequence[pb.Event]) -> None:
    columns = [
        Column("seq", keep=True, justify="right"),
        Column("event", keep=True),
        Column("from", keep=True),
        Column("to", keep=True),
        Column("node", min_width=4, max_width=20),
        Column("attempt", keep=True, justify="right"),
        Column("at", min_width=8),
        Column("detail", min_width=6),
    ]
    rows = []
    for ev in task_json(task, events)["events"]:
        detail = json.dumps(ev["detail"]) if ev["detail"] else ""
        rows.append(
            [Text(str(ev["seq"])), Text(ev["event"]), state_text(ev["from"] or ""),
             state_text(ev["to"] or ""), Text(ev["node"] or ""), Text(str(ev["attempt"])),
             Text(ev["at"] or ""), Text(bounded(detail, 200))]
        )  # fmt: skip
    print_table(console, columns, rows)


# -- listings' footers -----------------------------------------------------------------


def counted(count: int, what: str) -> str:
    """ "1 task", "2 tasks" (`what` is the plural)."""
    return f"{count:,} {what[:-1] if count == 1 and what.endswith('s') else what}"


def page_note(count: int, total: int, what: str) -> str:
    """The count line under a listing ("2 of 5 tasks")."""
    note = counted(count, what) if count == total else f"{count:,} of {counted(total, what)}"
    return f"[dim]{escape(note)}[/]"


# -- cluster status ----------------------------------------------------------------


def print_status(status: pb.GetClusterStatusResponse) -> None:
    data = status_json(status)
    console.print(
        f"node [bold]{escape(data['node_id'])}[/] ({data['raft_state']}), leader "
        f"[bold]{escape(data['leader'] or 'none')}[/], term {data['term']}, quorum "
        f"{'yes' if data['has_quorum'] else '[red]no[/]'}"
    )
    digest = data["state_digest"]
    console.print(
        f"applied {data['applied_index']} (log {data['log_size']} entries), digest "
        f"{digest[:16]}{'…' if len(digest) > 16 else ''}"
    )
    if data["election_timeout_s"]:
        shortest, longest = data["election_timeout_s"]
        console.print(f"election timeout {shortest:g}–{longest:g} s")
    counts = ", ".join(f"{state} {count}" for state, count in sorted(data["task_counts"].items()))
    console.print(f"tasks: {counts or 'none'}")
    columns = [
        Column("node", keep=True),
        Column("status", keep=True),
        Column("raft", min_width=9),
        Column("grpc", min_width=9),
        Column("connected", keep=True),
        Column("tasks", keep=True, justify="right"),
    ]
    rows = []
    for node in data["nodes"]:
        rows.append(
            [Text(node["node_id"] + (" *" if node["leader"] else "")), Text(node["status"]),
             Text(node["raft_address"]), Text(node["grpc_address"]),
             Text("yes") if node["connected"] else Text("no", style="red"),
             Text(str(node["active_tasks"]))]
        )  # fmt: skip
    print_table(console, columns, rows)
