"""`cortex schedule create|list|get|pause|resume|delete|trigger`: tasks and
workflows started at the slots of a cron expression or a fixed period."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path

from google.protobuf.message import Message
from rich.table import Table
from rich.text import Text

from cortex.api.client import CortexClient
from cortex.api.schedule_views import schedule_json, timing_text
from cortex.cli import render
from cortex.cli.connect import connect
from cortex.cli.options import usage_error
from cortex.cli.tables import Column, print_table
from cortex.cli.task_file import given_flags
from cortex.cli.tasks import named_by_flag, task_spec
from cortex.durations import format_duration_ms
from cortex.errors import InvalidArgument
from cortex.proto_enums import enum_name
from cortex.schedules.slots import Timing
from cortex.v1 import cortex_pb2 as pb

_PROG = "cortex schedule create"
ACTION_STYLES = {
    "fire": "green",
    "trigger": "green",
    "missed": "yellow",
    "skipped": "dim",
    "buffered": "cyan",
    "failed": "red",
}


# -- create --------------------------------------------------------------------


def _create_problem(args: argparse.Namespace) -> str:
    """What is wrong with how `schedule create` was called, or ""."""
    if not args.cron and args.every is None:
        return "give --cron EXPR or --every DURATION: when the schedule fires"
    if args.timezone and not args.cron:
        return "--timezone applies to --cron only"
    if args.cron:
        try:
            Timing(cron=args.cron, timezone=args.timezone or "UTC")
        except InvalidArgument as err:
            flag = "--timezone" if "timezone" in str(err) else "--cron"
            return f"argument {flag}: {err}"
    if args.workflow is not None:
        if args.argv:
            return "give a command after -- or --workflow FILE, not both"
        spec_flags = given_flags(args.spec_flags, args)
        if spec_flags:
            return (
                f"--workflow cannot be combined with {', '.join(spec_flags)}: the workflow's "
                "definition describes its tasks"
            )
    elif not args.argv and args.type == "shell":
        return "no command given: cortex schedule create NAME --every 5m -- CMD [ARG...]"
    return ""


def _read_workflow(path: str) -> tuple[str, str]:
    """The definition's text and format ("" when its name does not say)."""
    if path == "-":
        return sys.stdin.read(), ""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise InvalidArgument(f"--workflow: cannot read {path}: {why}") from None
    fmt = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(Path(path).suffix.lower(), "")
    return text, fmt


def create(client: CortexClient, args: argparse.Namespace) -> int:
    every = timedelta(milliseconds=args.every) if args.every is not None else None
    window = (
        timedelta(milliseconds=args.catchup_window) if args.catchup_window is not None else None
    )
    task: pb.TaskSpec | None = None
    definition, fmt = "", ""
    if args.workflow is not None:
        definition, fmt = _read_workflow(args.workflow)
    else:
        task = task_spec(args)
    try:
        reply = client.create_schedule(
            args.name, cron=args.cron or "", every=every, timezone=args.timezone or "",
            task=task, workflow_definition=definition, workflow_format=fmt,
            overlap=args.overlap, catchup_window=window, paused=args.paused,
        )  # fmt: skip
    except InvalidArgument as err:
        raise InvalidArgument(named_by_flag(str(err))) from None
    schedule = reply.schedule
    if args.json:
        render.print_json({"created": reply.created, "schedule": schedule_json(schedule)})
        return 0
    note = "created" if reply.created else "exists already with these settings"
    render.console.print(f"{schedule.name} ({schedule.id}) {note}; {_next_text(schedule)}")
    return 0


# -- reading ----------------------------------------------------------------------


def _until(message: Message, field: str, now_s: float | None = None) -> str:
    """How long until a Timestamp field, in its largest unit ("in 42s",
    "in 5m"); "now" once past; empty when unset."""
    if not message.HasField(field):
        return ""
    seconds = getattr(message, field).ToMilliseconds() / 1000 - (now_s or time.time())
    if seconds < 1:
        return "now"
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"in {int(seconds // size)}{unit}"
    return f"in {int(seconds)}s"


def _ago(message: Message, field: str) -> str:
    age = render.age(message, field)
    return f"{age} ago" if age else ""


def _when(message: Message, field: str, relative: str) -> str:
    """A Timestamp field as local time with how far off it is; empty when unset."""
    moment = render.local_time(message, field)
    return f"{moment} ({relative})" if moment and relative else moment


def _next_fire(schedule: pb.Schedule) -> str:
    """When it fires next, as local time and how soon; "paused" while it is."""
    if schedule.paused:
        return "paused"
    return _when(schedule, "next_slot", _until(schedule, "next_slot")) or "none"


def _next_text(schedule: pb.Schedule) -> str:
    return "paused" if schedule.paused else f"next at {_next_fire(schedule)}"


def _counts(schedule: pb.Schedule) -> str:
    return f"{schedule.fired}/{schedule.missed}/{schedule.skipped}"


def _overlap(schedule: pb.Schedule) -> str:
    return enum_name(pb.ScheduleOverlap, schedule.overlap) or "skip"


def _target_text(schedule: pb.Schedule) -> str:
    if schedule.WhichOneof("target") == "task":
        spec = schedule.task
        return f"task: {render.command_text(spec) or f'({spec.type})'}"
    size = len(schedule.workflow_definition.encode())
    return f"workflow ({enum_name(pb.DefinitionFormat, schedule.workflow_format) or 'detected'}, {size:,} bytes)"


def print_schedules(schedules: list[pb.Schedule]) -> None:
    columns = [
        Column("name", keep=True),
        Column("timing", min_width=8, max_width=40),
        Column("overlap", keep=True),
        Column("paused", keep=True),
        Column("next", keep=True),
        Column("last fired", keep=True),
        Column("fired/missed/skipped", keep=True, justify="right"),
    ]
    rows = [
        [
            Text(s.name), Text(timing_text(s)), Text(_overlap(s)),
            Text("yes", style="yellow") if s.paused else Text("no"),
            Text(_until(s, "next_slot")), Text(_ago(s, "last_fired_at")), Text(_counts(s)),
        ]
        for s in schedules
    ]  # fmt: skip
    if rows:
        print_table(render.console, columns, rows)
    render.console.print(f"[dim]{render.counted(len(schedules), 'schedules')}[/]")


def print_schedule(schedule: pb.Schedule) -> None:
    """One schedule for people, then its recent firings, newest first."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")

    def row(key: str, value: str, style: str = "") -> None:
        if value:
            grid.add_row(key, Text(value, style=style))

    row("id", schedule.id)
    row("name", schedule.name)
    row("timing", timing_text(schedule))
    row("starts", _target_text(schedule))
    if schedule.WhichOneof("target") == "task":
        row("needs", render.constraints_text(schedule.task.constraints))
        row("keys", render.keys_text(schedule.task.concurrency_key, schedule.task.fairness_key))
    row("overlap", _overlap(schedule))
    row("catch-up window", format_duration_ms(schedule.catchup_window.ToMilliseconds()))
    row("paused", "yes" if schedule.paused else "no", "yellow" if schedule.paused else "")
    row("created_at", render.local_time(schedule, "create_time"))
    row("last slot", render.local_time(schedule, "last_slot"))
    row("last fired at", _when(schedule, "last_fired_at", _ago(schedule, "last_fired_at")))
    row("next fire", _next_fire(schedule))
    row("buffered slot", render.local_time(schedule, "buffered_slot"))
    row("fired", str(schedule.fired))
    row("missed", str(schedule.missed))
    row("skipped", str(schedule.skipped))
    row("active runs", render.bounded_list(list(schedule.active_runs), what="more runs"))
    render.console.print(grid)
    if schedule.recent:
        render.console.print("[bold]recent firings[/]")
        print_firings(list(schedule.recent))


def _slot_text(firing: pb.ScheduleFiring) -> str:
    slot = render.local_time(firing, "slot")
    if firing.count <= 1:
        return slot
    return f"{render.local_time(firing, 'first_slot')} … {slot} ({firing.count:,} slots)"


def print_firings(firings: list[pb.ScheduleFiring]) -> None:
    columns = [
        Column("slot", keep=True),
        Column("action", keep=True),
        Column("run", keep=True),
        Column("state", keep=True),
        Column("reason", min_width=6),
    ]
    rows = []
    for firing in firings:
        action = enum_name(pb.ScheduleFiringAction, firing.action) or "unknown"
        rows.append(
            [Text(_slot_text(firing)), Text(action, style=ACTION_STYLES.get(action, "")),
             Text(firing.task_id or firing.workflow_id), render.state_text(firing.run_state),
             Text(render.bounded(firing.reason, 200))]
        )  # fmt: skip
    print_table(render.console, columns, rows)


def _print_written(schedule: pb.Schedule, args: argparse.Namespace, done: str) -> None:
    if args.json:
        render.print_json(schedule_json(schedule))
    else:
        render.console.print(f"{schedule.name} {done}")


# -- the command ---------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if args.schedule_command == "create":
        problem = _create_problem(args)
        if problem:
            return usage_error(_PROG, problem)
    with connect(args, "linearizable") as client:
        command = args.schedule_command
        if command == "create":
            return create(client, args)
        if command == "list":
            schedules = list(client.list_schedules().schedules)
            fmt = render.output_format(args)
            if fmt in ("json", "yaml"):
                render.print_data({"schedules": [schedule_json(s) for s in schedules]}, fmt)
            elif fmt == "name":
                for schedule in schedules:
                    print(schedule.name)
            else:
                print_schedules(schedules)
            return 0
        if command == "get":
            schedule = client.get_schedule(args.schedule).schedule
            fmt = render.output_format(args)
            if fmt in ("json", "yaml"):
                render.print_data(schedule_json(schedule), fmt)
            else:
                print_schedule(schedule)
            return 0
        if command == "pause":
            _print_written(client.pause_schedule(args.schedule).schedule, args, "paused")
            return 0
        if command == "resume":
            schedule = client.resume_schedule(args.schedule).schedule
            _print_written(schedule, args, f"resumed; {_next_text(schedule)}")
            return 0
        if command == "delete":
            deleted = client.delete_schedule(args.schedule).schedule
            _print_written(deleted, args, "deleted (the runs it started stay)")
            return 0
        if command == "trigger":
            started = client.trigger_schedule(args.schedule)
            if args.json:
                render.print_json(
                    {"task_id": started.task_id or None, "workflow_id": started.workflow_id or None}
                )
            else:
                kind = "task" if started.task_id else "workflow"
                render.console.print(f"started {kind} {started.task_id or started.workflow_id}")
            return 0
    return 2
