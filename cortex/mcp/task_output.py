"""One read of a task's output for `stream_task_output`: what arrived since
an offset within a wait, where to go on from, and whether the attempt is
over. An offset past the end of the output is answered with the true end."""

from __future__ import annotations

import time
from contextlib import closing
from typing import Any

import grpc

from cortex.api.client import TERMINAL_STATES, CortexClient
from cortex.errors import CortexError
from cortex.mcp.tool_errors import cortex_tool_error
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb

__all__ = ["attempt_over", "read_output"]

# An end message also closes a read that does not follow: then the attempt
# may still be going on.
_ACTIVE = frozenset({pb.TASK_STATE_ASSIGNED, pb.TASK_STATE_RUNNING})
_NOT_STARTED = frozenset({pb.TASK_STATE_PENDING, pb.TASK_STATE_QUEUED})


def attempt_over(end: pb.OutputEnd) -> bool:
    """Whether the attempt an end message closes has ended (no more output
    will come), rather than the read having reached what is written so far."""
    if end.interrupted:
        return True
    if end.attempt == 0:  # the task never ran
        return end.state not in _NOT_STARTED
    return end.state not in _ACTIVE


def _stream_end(
    client: CortexClient, task_id: str, attempt: int, offset: int
) -> pb.OutputEnd | None:
    """The end message of a read that does not follow, from `offset`: the
    output's size so far and the task's state; None when output arrives
    first (the output reaches `offset` after all)."""
    chunks = client.stream_task_output(
        task_id, attempt, offset, follow=False, timeout_s=client.timeout_s
    )
    with closing(chunks):
        for chunk in chunks:
            return chunk.end if chunk.HasField("end") else None
    return None


def _waited_out(err: CortexError) -> bool:
    """Whether a followed read ended because its wait was over."""
    status = err.__context__
    if isinstance(status, grpc.Call):
        return bool(status.code() == grpc.StatusCode.DEADLINE_EXCEEDED)
    return "deadline" in str(err).lower()


def read_output(
    client: CortexClient,
    task_id: str,
    from_offset: int,
    attempt: int,
    wait_s: float,
    max_bytes: int,
) -> dict[str, Any]:
    """Up to `max_bytes` of the attempt's output from `from_offset`, waiting
    up to `wait_s` for some to arrive."""
    data, next_offset, end, current_attempt = bytearray(), from_offset, None, attempt
    follow = wait_s > 0
    deadline = time.monotonic() + wait_s
    # A followed read ends when the wait is over; one that does not follow
    # ends by itself, with the end message.
    chunks = client.stream_task_output(task_id, attempt, from_offset, follow=follow,
                                       timeout_s=wait_s if follow else client.timeout_s)  # fmt: skip
    try:
        # Closed on leaving, so a followed stream ends on the node at once.
        with closing(chunks):
            for chunk in chunks:
                current_attempt = chunk.attempt or current_attempt
                if chunk.HasField("end"):
                    end = chunk.end
                    break
                data += chunk.data.data
                next_offset = chunk.data.offset + len(chunk.data.data)
                if len(data) >= max_bytes or (follow and data and time.monotonic() >= deadline):
                    break
    except CortexError as err:
        if not (follow and _waited_out(err)):
            raise cortex_tool_error(err) from None
    if end is None and not data:
        # Nothing new: at the end so far, or past it. A read that does not
        # follow says which, with the size so far and the task's state.
        try:
            end = _stream_end(client, task_id, current_attempt, from_offset)
        except CortexError as err:
            raise cortex_tool_error(err) from None
    out: dict[str, Any] = {
        "task_id": task_id,
        "attempt": end.attempt if end is not None and end.attempt else current_attempt,
        "output": bytes(data).decode("utf-8", errors="replace"),
        "next_offset": next_offset,
        "done": False,
        "state": None,
    }
    if end is None:
        return out
    over = attempt_over(end)
    state = enum_name(pb.TaskState, end.state) or None
    if not data:
        out["next_offset"] = min(from_offset, end.total_bytes)
    out.update(done=over, state=state, task_finished=end.state in TERMINAL_STATES)
    if over:
        out.update(end_offset=end.total_bytes, exit_code=end.exit_code if end.HasField("exit_code") else None,
                   error=end.error or None, interrupted=end.interrupted)  # fmt: skip
    if not data and from_offset > end.total_bytes:
        so_far = "" if over else " so far"
        now = f"the attempt has ended (task {state})" if over else f"the task is still {state}"
        out["note"] = (f"from_offset {from_offset} is past the end of the output{so_far} "
                       f"({end.total_bytes} bytes); {now}; next_offset is the end")  # fmt: skip
    return out
