"""Submitting many tasks at once (SubmitTasks), shared by the blocking and
the asyncio client: the calls a list of tasks takes, every task with an
idempotency key, and each task's outcome, numbered from the start of the
whole list."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf.json_format import ParseError

from cortex.api.channels import error_for_status, status_code
from cortex.client import requests as rq
from cortex.client.models import Task
from cortex.errors import CortexError, InvalidArgument
from cortex.requests import MAX_SUBMIT_BATCH
from cortex.v1 import cortex_pb2 as pb

# One task to submit: submit_task's arguments as a mapping, `command`
# included (`{"command": ["make", "test"], "priority": 8}`).
TaskDescription = Mapping[str, Any]
# What became of one task: the task as applied, or the error that refused
# it alone.
Submitted = Task | CortexError

# How a node names one task of a call: `tasks[3].spec...`, `tasks[3] rejected: ...`.
_TASK_INDEX = re.compile(r"^tasks\[(\d+)\]")


def submit_requests(tasks: Sequence[TaskDescription]) -> list[tuple[int, pb.SubmitTasksRequest]]:
    """The SubmitTasks calls for `tasks`, in order, each with the position of
    its first task in `tasks`: at most MAX_SUBMIT_BATCH tasks a call, each
    under its own idempotency key or a new one, so a call tried again never
    creates a task twice. A description submit_task would not take raises
    InvalidArgument naming it (`tasks[3]: ...`) before anything is sent."""
    items = [_submit_request(number, task) for number, task in enumerate(tasks)]
    return [
        (start, pb.SubmitTasksRequest(tasks=items[start : start + MAX_SUBMIT_BATCH]))
        for start in range(0, len(items), MAX_SUBMIT_BATCH)
    ]


def _submit_request(number: int, task: TaskDescription) -> pb.SubmitTaskRequest:
    if not isinstance(task, Mapping):
        raise InvalidArgument(
            f"tasks[{number}]: describe a task as a mapping of submit_task's arguments"
            f" ({{'command': [...], ...}}), not {type(task).__name__}"
        )
    options = dict(task)
    # A noop task needs no command: the node refuses a shell task without one.
    command = options.pop("command", ())
    key = options.pop("idempotency_key", None)
    try:
        spec = rq.task_spec(command, **options)
    except (TypeError, ValueError, ParseError) as err:
        raise InvalidArgument(f"tasks[{number}]: {err}") from None
    return pb.SubmitTaskRequest(spec=spec, idempotency_key=key or rq.new_idempotency_key())


def outcomes(response: pb.SubmitTasksResponse, start: int) -> list[Submitted]:
    """Each task's outcome in a call whose first task is `start` in the list."""
    return [_outcome(result, start) for result in response.results]


def _outcome(result: pb.SubmitTasksResult, start: int) -> Submitted:
    if result.HasField("task"):
        return Task.from_proto(result.task)
    return error_for_status(status_code(result.error_code), numbered(result.error, start))


def numbered(message: str, start: int) -> str:
    """A node's message naming `tasks[i]` of its call, naming the same task's
    position in the whole list instead."""
    return _TASK_INDEX.sub(lambda found: f"tasks[{int(found.group(1)) + start}]", message, 1)


def refused_call(err: CortexError, start: int) -> CortexError:
    """The error of a whole call, naming tasks by their place in the list
    (InvalidArgument names the one at fault)."""
    if start and isinstance(err, InvalidArgument):
        return InvalidArgument(numbered(str(err), start))
    return err
