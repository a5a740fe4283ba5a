"""`cortex logs` (a task's output, optionally followed live across its
attempts) and `cortex events` (the event log, optionally followed)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC
from typing import BinaryIO

from cortex.api.client import CortexClient
from cortex.api.views import enum_value, event_change, event_detail, time_ms
from cortex.cli.connect import connect, poll_in_session
from cortex.errors import CortexError, InvalidArgument, Unavailable
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

TERMINAL = frozenset(
    {
        pb.TASK_STATE_COMPLETED,
        pb.TASK_STATE_FAILED,
        pb.TASK_STATE_CANCELLED,
        pb.TASK_STATE_SKIPPED,
        pb.TASK_STATE_DEAD_LETTER,
    }
)
WORKFLOW_TERMINAL = frozenset(
    {pb.WORKFLOW_STATE_COMPLETED, pb.WORKFLOW_STATE_FAILED, pb.WORKFLOW_STATE_CANCELLED}
)
_NEXT_ATTEMPT_POLL_S = 0.25


def _notice(text: str) -> None:
    sys.stderr.write(f"cortex: {text}\n")
    sys.stderr.flush()


def exit_status(end: pb.OutputEnd) -> int:
    """0 for a completed attempt, else its exit code (1 when it has none)."""
    if end.state == pb.TASK_STATE_COMPLETED:
        return 0
    return end.exit_code if 0 < end.exit_code < 256 else 1


class _Printer:
    """Writes chunks to the matching descriptor (task stdout to stdout, task
    stderr to stderr, byte for byte) or as JSON lines."""

    def __init__(self, as_json: bool) -> None:
        self._json = as_json
        self._out: dict[int, BinaryIO] = {
            pb.OUTPUT_STREAM_STDOUT: sys.stdout.buffer,
            pb.OUTPUT_STREAM_STDERR: sys.stderr.buffer,
        }

    def data(self, chunk: pb.StreamTaskOutputResponse) -> None:
        data = chunk.data
        if self._json:
            record = {
                "attempt": chunk.attempt,
                "stream": enum_name(pb.OutputStream, data.stream),
                "offset": data.offset,
                "ts_ms": time_ms(data, "time") or 0,
                "data": data.data.decode("utf-8", errors="replace"),
            }
            print(json.dumps(record), flush=True)
            return
        target = self._out.get(data.stream, sys.stdout.buffer)
        target.write(data.data)
        target.flush()

    def end(self, end: pb.OutputEnd) -> None:
        if self._json:
            record = {
                "end": {
                    "attempt": end.attempt,
                    "state": enum_name(pb.TaskState, end.state),
                    "exit_code": end.exit_code,
                    "error": end.error or None,
                    "total_bytes": end.total_bytes,
                    "interrupted": end.interrupted,
                }
            }
            print(json.dumps(record), flush=True)


def _stream_attempt(
    client: CortexClient, args: argparse.Namespace, attempt: int, printer: _Printer
) -> pb.OutputEnd:
    stream = (
        pb.OUTPUT_STREAM_STDOUT
        if args.stdout
        else pb.OUTPUT_STREAM_STDERR
        if args.stderr
        else pb.OUTPUT_STREAM_UNSPECIFIED
    )
    position = args.from_offset if attempt == args.attempt else 0
    for chunk in client.stream_task_output(
        args.task_id, attempt, position, args.follow, stream=stream
    ):
        if chunk.HasField("end"):
            printer.end(chunk.end)
            return chunk.end
        if chunk.data.offset > position and not stream:
            _notice(
                f"bytes {position}-{chunk.data.offset - 1} of attempt {chunk.attempt}"
                " are no longer kept (output retention)"
            )
        position = chunk.data.offset + len(chunk.data.data)
        printer.data(chunk)
    raise CortexError(f"the output stream of task {args.task_id} ended without an end message")


def _wait_next_attempt(client: CortexClient, task_id: str, after: int) -> pb.Task:
    """The task once it has an attempt after `after` or has ended."""
    while True:
        task = client.get_task(task_id).task
        if task.attempt > after or task.state in TERMINAL:
            return task
        time.sleep(_NEXT_ATTEMPT_POLL_S)


def _say_if_not_started(client: CortexClient, task_id: str) -> None:
    """One line saying why `logs -f` waits, for a task that has not run yet."""
    task = client.get_task(task_id).task
    if task.attempt or task.state in TERMINAL:
        return
    why = f" ({'; '.join(task.pending_reasons)})" if task.pending_reasons else ""
    _notice(
        f"task {task.id} is {enum_name(pb.TaskState, task.state)}{why}; waiting for it to start"
    )


def _say_never_ran(task_id: str, end: pb.OutputEnd, follow: bool) -> None:
    state = enum_name(pb.TaskState, end.state)
    if end.state in TERMINAL:
        why = f" ({end.error})" if end.error else ""
        _notice(f"task {task_id} was {state} before it ran{why}; it has no output")
    elif not follow:
        _notice(f"task {task_id} is {state} and has not run yet; -f waits for its output")


def run_logs(args: argparse.Namespace) -> int:
    if args.attempt < 0:
        raise InvalidArgument("--attempt must be 1 or more")
    if args.from_offset < 0:
        raise InvalidArgument("--from-offset must not be negative")
    printer = _Printer(args.json)
    try:
        with connect(args, "linearizable") as client:
            if args.follow and not args.attempt:
                _say_if_not_started(client, args.task_id)
            end = _stream_attempt(client, args, args.attempt, printer)
            poll_in_session(client, args)
            if end.attempt == 0:
                _say_never_ran(args.task_id, end, args.follow)
            # Following the task (not one attempt): go on with its retries.
            while args.follow and not args.attempt and end.state not in TERMINAL:
                how = "was interrupted" if end.interrupted else "ended"
                detail = f": {end.error}" if end.error else ""
                _notice(
                    f"attempt {end.attempt} {how}{detail}; waiting for attempt {end.attempt + 1}"
                )
                task = _wait_next_attempt(client, args.task_id, end.attempt)
                if task.attempt <= end.attempt:
                    _notice(f"task {task.id} is {enum_name(pb.TaskState, task.state)}")
                    return 0 if task.state == pb.TASK_STATE_COMPLETED else 1
                _notice(f"attempt {end.attempt + 1} runs on node {task.node_id or '?'}")
                end = _stream_attempt(client, args, end.attempt + 1, printer)
    except BrokenPipeError:
        # The reader went away (`cortex logs -f T | head`): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    if not args.follow:
        return 0
    if end.interrupted:
        _notice(f"attempt {end.attempt} was interrupted: {end.error}")
    return exit_status(end)


def _event_line(event: pb.Event) -> str:
    when = event.time.ToDatetime(tzinfo=UTC).isoformat(timespec="milliseconds")
    parts = [f"{event.seq:>6}", when, f"{enum_name(pb.EventType, event.type):<14}"]
    if event.task_id:
        parts.append(f"task={event.task_id}")
    if event.workflow_id:
        parts.append(f"workflow={event.workflow_id}")
    before, after = event_change(event)
    if before or after:
        parts.append(f"{before or '-'}->{after or '-'}")
    if event.node_id:
        parts.append(f"node={event.node_id}")
    if event.attempt:
        parts.append(f"attempt={event.attempt}")
    detail = event_detail(event)
    if detail is not None:
        parts.append(json.dumps(detail))
    return " ".join(parts)


def _event_json(event: pb.Event) -> dict[str, object]:
    before, after = event_change(event)
    return {
        "seq": event.seq,
        "event": enum_name(pb.EventType, event.type),
        "task_id": event.task_id or None,
        "workflow_id": event.workflow_id or None,
        "from_state": before,
        "to_state": after,
        "node": event.node_id or None,
        "attempt": event.attempt or None,
        "detail": event_detail(event),
        "ts_ms": time_ms(event, "time") or 0,
        "raft_index": event.raft_index,
        "entry_type": event.entry_type or None,
    }


_TASK_TERMINAL_NAMES = frozenset(enum_name(pb.TaskState, s) for s in TERMINAL)
_WORKFLOW_TERMINAL_NAMES = frozenset(enum_name(pb.WorkflowState, s) for s in WORKFLOW_TERMINAL)


class _Subject:
    """The task or workflow `events -f --task/--workflow` follows (the task
    when both are given), and whether it has ended: a task in a final state;
    a workflow in a final state with every task of it in one too (a
    cancelled workflow's tasks are cancelled in batches after it)."""

    def __init__(self, client: CortexClient, task_id: str, workflow_id: str) -> None:
        self._client = client
        self.task_id, self.workflow_id = task_id, workflow_id
        self.kind = "task" if task_id else "workflow"
        self.id = task_id or workflow_id
        # Once the workflow has ended: how many of its tasks are still to end.
        self._unfinished: int | None = None

    def state(self) -> tuple[str, bool]:
        """Its state's name, and whether it has ended."""
        # The node resolves an id prefix; events carry the full id.
        if self.kind == "task":
            task = self._client.get_task(self.id).task
            self.id = task.id
            return enum_name(pb.TaskState, task.state), task.state in TERMINAL
        workflow = self._client.get_workflow(self.id).workflow
        self.id = workflow.id
        name = enum_name(pb.WorkflowState, workflow.state)
        if workflow.state not in WORKFLOW_TERMINAL:
            return name, False
        self._unfinished = sum(c.count for c in workflow.task_counts if c.state not in TERMINAL)
        return name, self._unfinished == 0

    def may_have_ended(self, event: pb.Event) -> bool:
        """Whether `event` may be the subject's last, so its state is worth
        asking for (asking on every event would cost a read each)."""
        before, after = event_change(event)
        if self.kind == "task":
            return event.task_id == self.id and after in _TASK_TERMINAL_NAMES
        if event.WhichOneof("change") == "workflow_change":
            return after in _WORKFLOW_TERMINAL_NAMES
        if self._unfinished is None or not event.task_id:
            return False
        if after in _TASK_TERMINAL_NAMES and before not in _TASK_TERMINAL_NAMES:
            self._unfinished -= 1
        return self._unfinished <= 0


class _EventPrinter:
    def __init__(self, as_json: bool, types: list[int]) -> None:
        self._json = as_json
        self._types = frozenset(types)
        self.last_seq = 0

    def print(self, event: pb.Event) -> None:
        self.last_seq = event.seq
        if self._types and event.type not in self._types:
            return
        if self._json:
            print(json.dumps(_event_json(event)), flush=True)
        else:
            print(_event_line(event), flush=True)


def _follow_subject(
    client: CortexClient, subject: _Subject, printer: _EventPrinter, after_seq: int
) -> None:
    """Prints the subject's events until it has ended, then says so."""
    state, ended = subject.state()
    if not ended:
        _notice(f"{subject.kind} {subject.id} is {state}; following its events until it ends")
    printer.last_seq = after_seq
    # Unfiltered by type: the events that end the subject must come through.
    events = client.watch_events(
        subject.task_id, subject.workflow_id, after_seq=after_seq, from_start=not after_seq,
        follow=not ended,
    )  # fmt: skip
    try:
        for reply in events:
            printer.print(reply.event)
            if not ended and subject.may_have_ended(reply.event):
                state, ended = subject.state()
                if ended:
                    break
    finally:
        events.close()
    if not ended:
        raise Unavailable(
            f"the events of {subject.kind} {subject.id} stopped coming before it ended"
            " (the node stopped?)"
        )
    # What the entries that ended it wrote after the event that showed it.
    rest = client.watch_events(
        subject.task_id, subject.workflow_id, after_seq=printer.last_seq,
        from_start=not printer.last_seq, follow=False,
    )  # fmt: skip
    for reply in rest:
        printer.print(reply.event)
    _notice(f"{subject.kind} {subject.id} ended: {state}")


def run_events(args: argparse.Namespace) -> int:
    if args.after_seq < 0:
        raise InvalidArgument("--after-seq must not be negative")
    types = [enum_value(pb.EventType, name, "--event") for name in args.event]
    try:
        with connect(args, "linearizable") as client:
            if args.follow and (args.task or args.workflow):
                subject = _Subject(client, args.task or "", args.workflow or "")
                _follow_subject(client, subject, _EventPrinter(args.json, types), args.after_seq)
                return 0
            printer = _EventPrinter(args.json, [])
            for reply in client.watch_events(
                task_id=args.task or "",
                workflow_id=args.workflow or "",
                types=types,
                after_seq=args.after_seq,
                from_start=not args.after_seq,
                follow=args.follow,
            ):
                printer.print(reply.event)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0
