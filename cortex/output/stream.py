"""StreamTaskOutput on any node: the node that executed the attempt serves it
from its output log (backlog, then live chunks, then an end message with the
attempt's final state); any other node relays the stream from that node's
peer listener."""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator
from pathlib import Path

from cortex.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from cortex.output.attempts import AttemptInfo, describe_attempt
from cortex.output.hub import LiveLog, OutputHub
from cortex.output.log import LogCursor, LogEnd, list_segments, recovered_end
from cortex.output.relay import NODE_HEADER, RelayClient, StreamContext, end_message
from cortex.output.ticker import StateTicker
from cortex.proto_enums import enum_name, enum_value
from cortex.state.queries import StateReader, TaskView
from cortex.state.task_states import TERMINAL_STATES
from cortex.v1 import cortex_pb2 as pb

log = logging.getLogger(__name__)

# How often a waiting stream checks that its client is still there.
POLL_S = 0.5
# How long an end message waits for the log to record the attempt's outcome
# after its process exited (the agent's report is a Raft round-trip away).
END_STATE_WAIT_S = 15.0
# How long a node asked by another for an attempt waits to apply it too.
CATCH_UP_S = 10.0


def _send_headers(context: StreamContext, node_id: str) -> None:
    """Headers go out at once, so a relaying node knows it reached us."""
    send = getattr(context, "send_initial_metadata", None)
    if send is not None:
        send(((NODE_HEADER, node_id),))


class OutputStreamer:
    def __init__(
        self,
        node_id: str,
        reader: StateReader,
        hub: OutputHub,
        ticker: StateTicker,
        relay: RelayClient,
        end_state_wait_s: float = END_STATE_WAIT_S,
    ) -> None:
        self._node_id = node_id
        self._reader = reader
        self._hub = hub
        self._ticker = ticker
        self._relay = relay
        self._end_state_wait_s = end_state_wait_s

    def stream(
        self,
        request: pb.StreamTaskOutputRequest,
        context: StreamContext,
        relayed_for: str | None = None,
    ) -> Iterator[pb.StreamTaskOutputResponse]:
        """The attempt's output; `relayed_for` names the node relaying it (then
        only what this node holds is served, so requests never loop)."""
        task = self._validate(request, context, relayed_for)
        _send_headers(context, self._node_id)
        yield from self._stream(task, request, context, relayed_for)

    def _validate(
        self,
        request: pb.StreamTaskOutputRequest,
        context: StreamContext,
        relayed_for: str | None,
    ) -> TaskView:
        if not request.task_id:
            raise InvalidArgument("task_id is empty")
        if len(request.task_id) > 128:
            raise InvalidArgument("task_id is longer than 128 characters")
        if request.attempt < 0:
            raise InvalidArgument(f"attempt must be 0 (the latest) or more, not {request.attempt}")
        if request.from_offset < 0:
            raise InvalidArgument(f"from_offset must not be negative, not {request.from_offset}")
        if request.stream not in pb.OutputStream.values():
            raise InvalidArgument(
                f"stream must be unset (both), OUTPUT_STREAM_STDOUT or OUTPUT_STREAM_STDERR,"
                f" not {request.stream}"
            )
        task = self._reader.get_task(request.task_id)
        if relayed_for is not None:
            task = self._catch_up(request, context, task)
        if task is None:
            raise NotFound(f"no task with id {request.task_id}")
        if request.attempt > task.attempt:
            raise NotFound(
                f"task {task.id} has no attempt {request.attempt}"
                f" ({_attempt_count(task.attempt)} so far)"
            )
        return task

    def _catch_up(
        self, request: pb.StreamTaskOutputRequest, context: StreamContext, task: TaskView | None
    ) -> TaskView | None:
        """A relaying node has seen the attempt it asks for; this node may
        not have applied it yet, so it waits (bounded) before saying no."""
        # By the clock: every batch applied wakes the wait, many a second.
        deadline = time.monotonic() + CATCH_UP_S
        while (task is None or request.attempt > task.attempt) and time.monotonic() < deadline:
            if not context.is_active() or self._ticker.closed:
                break
            seen = self._ticker.generation
            task = self._reader.get_task(request.task_id)
            if task is None or request.attempt > task.attempt:
                self._ticker.wait(seen, POLL_S)
        return task

    def _describe(self, task_id: str, number: int) -> AttemptInfo:
        task = self._reader.get_task(task_id)
        assert task is not None  # tasks are never deleted
        info = describe_attempt(task, self._reader.task_events(task_id), number)
        assert info is not None  # attempts never disappear
        return info

    def _stream(
        self,
        task: TaskView,
        request: pb.StreamTaskOutputRequest,
        context: StreamContext,
        relayed_for: str | None,
    ) -> Iterator[pb.StreamTaskOutputResponse]:
        number = request.attempt or task.attempt
        if number == 0:
            task = self._wait_first_attempt(task, request.follow, context)
            if task.attempt == 0:
                info = self._describe(task.id, 0)
                yield _end(info, 0, interrupted=False)
                return
            number = task.attempt
        info = self._describe(task.id, number)
        if info.node == self._node_id or relayed_for is not None:
            if info.node != self._node_id:
                raise FailedPrecondition(
                    f"attempt {number} of task {task.id} ran on node {info.node},"
                    f" not on {self._node_id} (asked by {relayed_for})"
                )
            yield from self._serve_local(info, request, context)
            return
        source = next((n for n in self._reader.nodes() if n.id == info.node), None)
        if source is None:
            raise FailedPrecondition(
                f"attempt {number} of task {task.id} ran on node {info.node}, which has left"
                " the cluster; its output left with it"
            )
        if not source.peer_address:
            raise Unavailable(
                f"the output of task {task.id} attempt {number} is on node {source.id}, which"
                " has not announced its peer address yet; retry"
            )
        forwarded = pb.StreamTaskOutputRequest()
        forwarded.CopyFrom(request)
        forwarded.attempt = number
        yield from self._relay.relay(
            source.peer_address,
            source.id,
            forwarded,
            context,
            lambda: self._describe(task.id, number),
        )

    def _wait_first_attempt(self, task: TaskView, follow: bool, context: StreamContext) -> TaskView:
        """A task that never ran: with follow, waits until it is assigned
        (or ends without running, e.g. cancelled while queued)."""
        while follow and task.attempt == 0 and task.state not in TERMINAL_STATES:
            if not context.is_active() or self._ticker.closed:
                break
            seen = self._ticker.generation
            current = self._reader.get_task(task.id)
            assert current is not None
            task = current
            if task.attempt == 0 and task.state not in TERMINAL_STATES:
                self._ticker.wait(seen, POLL_S)
        return task

    def _serve_local(
        self, info: AttemptInfo, request: pb.StreamTaskOutputRequest, context: StreamContext
    ) -> Iterator[pb.StreamTaskOutputResponse]:
        directory = self._hub.directory(info.task_id, info.number)
        live = self._hub.live(info.task_id, info.number)
        if live is None:
            if _has_log(directory):
                # A writer announces its log before it creates the files: one
                # that opened since we looked is live now, or has closed the
                # log with its end (a stream taking it for a log without a
                # writer ended at once, with no output and the state "assigned").
                live = self._hub.live(info.task_id, info.number)
            elif request.follow:
                live, info = self._wait_log_opens(info, context)
        only = enum_name(pb.OutputStream, request.stream) or None
        with LogCursor(directory, request.from_offset, only) as cursor:
            if live is not None:
                outcome = yield from self._follow_live(live, cursor, request.follow, context)
                if outcome is None and request.follow:
                    if self._ticker.closed and context.is_active():
                        yield _end(info, live.end, True, -1,
                                   f"node {self._node_id} is shutting down")  # fmt: skip
                    return  # or the client left
                total = outcome.total_bytes if outcome else live.end
            else:
                outcome = LogEnd.load(directory)
                total = outcome.total_bytes if outcome else recovered_end(directory)
                yield from _drain(cursor, total, info.number)
        # A log on disk that its writer never closed lost its writer: this
        # node died (or restarted) during the attempt. (Checked again, as a
        # writer may have opened or closed it since we looked.)
        interrupted = (
            outcome is None
            and live is None
            and _has_log(directory)
            and self._hub.live(info.task_id, info.number) is None
            and LogEnd.load(directory) is None
        )
        if outcome is not None and not interrupted:
            info = self._wait_attempt_over(info, context)
        exit_code = outcome.exit_code if outcome and outcome.exit_code is not None else None
        if exit_code is None:
            exit_code = -1 if interrupted else info.exit_code
        error = info.error or (outcome.error if outcome else None)
        if outcome is not None and outcome.write_error:
            error = f"{error}; {outcome.write_error}" if error else outcome.write_error
        if interrupted and not error:
            error = f"node {self._node_id} stopped during the attempt; its output ends here"
        yield _end(info, total, interrupted, exit_code, error)

    def _wait_log_opens(
        self, info: AttemptInfo, context: StreamContext
    ) -> tuple[LiveLog | None, AttemptInfo]:
        """Assigned but not started yet (or an executor that writes no log):
        waits for the log to open or the attempt to end."""
        while info.active and context.is_active() and not self._ticker.closed:
            live = self._hub.wait_opened(info.task_id, info.number, POLL_S)
            if live is not None:
                return live, info
            info = self._describe(info.task_id, info.number)
        return self._hub.live(info.task_id, info.number), info

    def _follow_live(
        self, live: LiveLog, cursor: LogCursor, follow: bool, context: StreamContext
    ) -> Generator[pb.StreamTaskOutputResponse, None, LogEnd | None]:
        """Streams a log while its writer appends; returns the writer's
        outcome once it closed, or None (not following, or the client left)."""
        while True:
            # Closed first: the writer's last advance precedes its close, so the
            # end read after seeing it closed is final.
            closed = live.closed
            end = live.end
            chunks = cursor.read(end)
            for chunk in chunks:
                yield _data(chunk.stream, chunk.offset, chunk.data, chunk.ts_ms, live.attempt)
            if chunks:
                continue
            if closed:
                return live.outcome
            if not follow or not context.is_active() or self._ticker.closed:
                return None
            live.wait_past(cursor.position, POLL_S)

    def _wait_attempt_over(self, info: AttemptInfo, context: StreamContext) -> AttemptInfo:
        """The attempt's process has exited; its outcome is on its way
        through Raft. Waits (bounded) so the end message can carry it."""
        # By the clock: every batch applied wakes the wait, and on a busy
        # cluster counting wakes as `POLL_S` each gave up within a tenth of a
        # second, the end message then carrying "running".
        deadline = time.monotonic() + self._end_state_wait_s
        while (
            info.active
            and time.monotonic() < deadline
            and context.is_active()
            and not self._ticker.closed
        ):
            seen = self._ticker.generation
            info = self._describe(info.task_id, info.number)
            if not info.active:
                break
            self._ticker.wait(seen, POLL_S)
        return info


def _drain(cursor: LogCursor, end: int, attempt: int) -> Iterator[pb.StreamTaskOutputResponse]:
    while True:
        chunks = cursor.read(end)
        if not chunks:
            return
        for chunk in chunks:
            yield _data(chunk.stream, chunk.offset, chunk.data, chunk.ts_ms, attempt)


def _has_log(directory: Path) -> bool:
    return bool(list_segments(directory)) or (directory / "end.json").exists()


def _attempt_count(attempts: int) -> str:
    return "it never ran" if attempts == 0 else f"it has {attempts} attempt" + "s" * (attempts > 1)


def _data(
    stream: str, offset: int, data: bytes, ts_ms: int, attempt: int
) -> pb.StreamTaskOutputResponse:
    piece = pb.OutputData(stream=enum_value(pb.OutputStream, stream), offset=offset, data=data)
    piece.time.FromMilliseconds(ts_ms)
    return pb.StreamTaskOutputResponse(attempt=attempt, data=piece)


def _end(
    info: AttemptInfo,
    total_bytes: int,
    interrupted: bool,
    exit_code: int | None = None,
    error: str | None = None,
) -> pb.StreamTaskOutputResponse:
    code = info.exit_code if exit_code is None else exit_code
    return end_message(
        info, total_bytes, interrupted, code, error if error is not None else info.error
    )
