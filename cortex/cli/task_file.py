"""`cortex task submit --from-file FILE`: the tasks of a JSON Lines file (or
standard input), one task spec object per line as the API documents it
(`{"command": ["make", "test"], "timeoutMs": 60000, "retryPolicy": {...}}`),
optionally with an `idempotencyKey`. Every line is checked before anything is
sent; then the tasks go in calls of up to 1000. A line without a key gets one
made of the file's path and the line itself, so running the file again
(after a failure, or a fix to one line) submits none of its tasks twice."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from cortex.api.channels import status_code
from cortex.api.client import CortexClient
from cortex.api.convert import spec_to_proto
from cortex.cli import render
from cortex.cli.options import usage_error
from cortex.cli.parser import OneTaskFlag
from cortex.cli.tables import Column, print_table
from cortex.errors import CortexError, InvalidArgument
from cortex.requests import MAX_SUBMIT_BATCH, check_idempotency_key
from cortex.v1 import cortex_pb2 as pb

STDIN = "-"
_KEY_FIELDS = ("idempotencyKey", "idempotency_key")
# How a node names one task of a call: `tasks[3].spec...`, `tasks[3] rejected: ...`.
_TASK_INDEX = re.compile(r"^tasks\[(\d+)\](?: rejected)?[.:]?\s*")


class BadFile(Exception):
    """The file cannot be read, or a line of it is not a task the API would
    take; nothing was sent."""


class BadLine(BadFile):
    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")


@dataclass(frozen=True)
class FileTask:
    line: int
    spec: pb.TaskSpec
    idempotency_key: str


@dataclass(frozen=True)
class LineOutcome:
    """What became of one line's task: the task, or why it alone was refused."""

    line: int
    task_id: str
    created: bool
    error: str = ""
    code: str = ""


def conflicting_flags(args: argparse.Namespace) -> list[str]:
    """The flags given with --from-file that only describe a single task."""
    return given_flags(args.one_task_flags, args)


def given_flags(flags: Sequence[OneTaskFlag], args: argparse.Namespace) -> list[str]:
    """Those of `flags` given a value other than their default, as written."""
    return [one.flag for one in flags if _given(one, args)]


def _given(one: OneTaskFlag, args: argparse.Namespace) -> bool:
    value = getattr(args, one.dest)
    if one.dest == "argv":
        return bool([word for word in value if word != "--"])
    return bool(value != one.default)


def read_tasks(source: str) -> list[FileTask]:
    """The tasks of the file at `source` ("-": standard input), blank lines
    skipped; BadLine for the first line that is not one."""
    content = sys.stdin.buffer.read() if source == STDIN else _read(source)
    # A line's derived key is the digest of the file's path (of all of
    # standard input) and the line, and how many equal lines came before it:
    # rerunning a file, even with lines edited, added or moved, submits only
    # the lines not submitted before; another file is another set of tasks.
    if source == STDIN:
        scope = hashlib.sha256(content).digest()
    else:
        scope = os.path.abspath(source).encode("utf-8", "surrogateescape")
    tasks = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(content.splitlines(), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise BadLine(number, f"not valid UTF-8 (byte {err.start + 1})") from None
        if text.strip():
            digest = hashlib.sha256(scope + b"\0" + raw.strip()).hexdigest()[:32]
            seen[digest] = seen.get(digest, 0) + 1
            tasks.append(_task(number, text, f"file-{digest}-{seen[digest]}"))
    return tasks


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as err:
        raise BadFile(f"argument --from-file: cannot read {path}: {err.strerror}") from None


def _task(number: int, text: str, derived_key: str) -> FileTask:
    # pydantic's models: imported by the one command that needs them.
    from cortex.spec import parse_task_spec

    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise BadLine(number, f"not valid JSON: {err.msg} (column {err.colno})") from None
    if not isinstance(data, dict):
        raise BadLine(number, f"must be a JSON object (a task spec), not {_json_kind(data)}")
    key = _given_key(number, data)
    try:
        check_idempotency_key(key)
        spec = parse_task_spec(data)
    except InvalidArgument as err:
        raise BadLine(number, str(err)) from None
    return FileTask(number, spec_to_proto(spec.model_dump(mode="json")), key or derived_key)


def _given_key(number: int, data: dict[str, Any]) -> str | None:
    """The line's own idempotency key, taken out of its spec."""
    named = [field for field in _KEY_FIELDS if field in data]
    if len(named) > 1:
        raise BadLine(number, "give idempotencyKey or idempotency_key, not both")
    if not named:
        return None
    key = data.pop(named[0])
    if not isinstance(key, str) or not key:
        raise BadLine(number, f"{named[0]}: must be a non-empty string")
    return key


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a boolean" if isinstance(value, bool) else "a number"


def submit_file(client: CortexClient, args: argparse.Namespace) -> int:
    """Exit code 2 for a bad line or flag (nothing submitted), 1 when any
    task was refused or a call failed, 0 when every task was taken."""
    conflicts = conflicting_flags(args)
    if conflicts:
        return _usage_error(
            f"--from-file cannot be combined with {', '.join(conflicts)}: each line of the"
            " file describes its own task"
        )
    fmt = render.output_format(args)
    try:
        tasks = read_tasks(args.from_file)
    except BadFile as err:
        return _usage_error(str(err))
    outcomes: list[LineOutcome] = []
    for start in range(0, len(tasks), MAX_SUBMIT_BATCH):
        chunk = tasks[start : start + MAX_SUBMIT_BATCH]
        try:
            reply = client.submit_tasks(
                [task.spec for task in chunk], [task.idempotency_key for task in chunk]
            )
        except CortexError as err:
            bad_line = _named_line(str(err), chunk) if isinstance(err, InvalidArgument) else None
            if bad_line is not None and not outcomes:
                return _usage_error(bad_line)
            _show(outcomes, fmt)
            again = " (running the file again submits them, no line twice)"
            rest = f"lines {chunk[0].line}-{tasks[-1].line}"
            print(f"cortex: {bad_line or err}; {rest} were not submitted{again}", file=sys.stderr)
            return 1
        outcomes += [
            _outcome(task, result) for task, result in zip(chunk, reply.results, strict=True)
        ]
    _show(outcomes, fmt)
    return 1 if any(outcome.error for outcome in outcomes) else 0


def _usage_error(problem: str) -> int:
    return usage_error("cortex task submit", problem)


def _named_line(message: str, chunk: list[FileTask]) -> str | None:
    """A refusal of a call naming its `tasks[i]`, naming the task's line
    instead; None when it names no task."""
    found = _TASK_INDEX.match(message)
    if found is None or int(found.group(1)) >= len(chunk):
        return None
    return f"line {chunk[int(found.group(1))].line}: {message[found.end() :]}"


def _outcome(task: FileTask, result: pb.SubmitTasksResult) -> LineOutcome:
    if result.HasField("task"):
        return LineOutcome(task.line, result.task.id, result.created)
    problem = _TASK_INDEX.sub("", result.error, 1)
    code = status_code(result.error_code).name
    return LineOutcome(task.line, "", False, problem, code)


def _show(outcomes: list[LineOutcome], fmt: str) -> None:
    if fmt == "json":
        render.print_json({"tasks": [_outcome_json(outcome) for outcome in outcomes]})
        return
    if outcomes:
        columns = [
            Column("line", keep=True, justify="right"),
            Column("id", keep=True),
            # Never cut: a refusal says what to fix.
            Column("result", keep=True),
        ]
        print_table(render.console, columns, [_row(outcome) for outcome in outcomes])
    render.console.print(f"[dim]{_summary(outcomes)}[/]")


def _outcome_json(outcome: LineOutcome) -> dict[str, Any]:
    if outcome.error:
        return {"line": outcome.line, "error": outcome.error, "code": outcome.code}
    return {"line": outcome.line, "id": outcome.task_id, "created": outcome.created}


def _row(outcome: LineOutcome) -> list[Text]:
    if outcome.error:
        result = Text(f"refused ({outcome.code}): {outcome.error}", style="red")
    elif outcome.created:
        result = Text("created")
    else:
        result = Text("existing (same idempotency key)", style="dim")
    return [Text(str(outcome.line)), Text(outcome.task_id), result]


def _summary(outcomes: list[LineOutcome]) -> str:
    refused = sum(1 for outcome in outcomes if outcome.error)
    created = sum(1 for outcome in outcomes if outcome.created)
    existing = len(outcomes) - refused - created
    return f"{created:,} created, {existing:,} existing, {refused:,} refused"
