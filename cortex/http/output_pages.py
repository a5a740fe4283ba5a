"""An attempt's output as pages for polling clients (the web UI): what was
written from an offset until now, read through the same stream as
StreamTaskOutput without following it, so output on another node is relayed
from there. A page ends at `MAX_PAGE_BYTES`, at the output so far, or at
the attempt's end."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass

from cortex.output import StreamingService
from cortex.output.attempts import ACTIVE
from cortex.proto_enums import enum_name, enum_value
from cortex.v1 import cortex_pb2 as pb

MAX_PAGE_BYTES = 256 * 1024
# A relay from a node that went silent is cut after this long: the page then
# holds what arrived, and the client asks again.
READ_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class OutputEnd:
    """How the attempt's output ended, or where it stands for one still
    running (`state` then an active one)."""

    state: str
    exit_code: int | None
    error: str | None
    total_bytes: int
    interrupted: bool


@dataclass(frozen=True)
class OutputPage:
    task_id: str
    attempt: int
    # The bytes of the chosen stream (or both) from `offset` up to
    # `next_offset`, in the attempt's combined output.
    data: bytes
    offset: int
    next_offset: int
    end: OutputEnd | None
    # Stopped at the size limit: more is ready at `next_offset` now.
    more: bool

    @property
    def done(self) -> bool:
        """Nothing more will be written: the attempt is over (or its node
        was lost) and this page reached its end."""
        return (
            self.end is not None
            and not self.more
            and (self.end.interrupted or self.end.state not in ACTIVE)
        )


class _PageContext:
    """The part of a gRPC context the stream uses: active until the page is
    read, its callbacks (a relay's cancel) run then or at the timeout."""

    def __init__(self) -> None:
        self._active = True
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def is_active(self) -> bool:
        return self._active

    def add_callback(self, callback: Callable[[], None]) -> bool:
        with self._lock:
            if not self._active:
                return False
            self._callbacks.append(callback)
            return True

    def close(self) -> None:
        with self._lock:
            self._active = False
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


def read_output_page(
    streaming: StreamingService,
    task_id: str,
    attempt: int,
    offset: int,
    stream: str | None,
    max_bytes: int = MAX_PAGE_BYTES,
) -> OutputPage:
    """A page of attempt `attempt` (0: the latest) of the task with the full
    id `task_id`. Raises what StreamTaskOutput raises (NotFound for an
    attempt that does not exist, Unavailable for an unreachable node ...)."""
    request = pb.StreamTaskOutputRequest(
        task_id=task_id,
        attempt=attempt,
        from_offset=offset,
        follow=False,
        stream=enum_value(pb.OutputStream, stream),
    )
    context = _PageContext()
    timer = threading.Timer(READ_TIMEOUT_S, context.close)
    timer.daemon = True
    timer.start()
    messages = streaming.task_output(request, context)
    pieces: list[pb.OutputData] = []
    size, number, end, more = 0, attempt, None, False
    try:
        for message in messages:
            number = message.attempt
            if message.HasField("end"):
                end = _end(message.end)
                break
            if size >= max_bytes:
                more = True
                break
            pieces.append(message.data)
            size += len(message.data.data)
    finally:
        timer.cancel()
        if isinstance(messages, Generator):
            messages.close()  # ends a relay at once, and the stream's count
        context.close()
    data = b"".join(piece.data for piece in pieces)
    next_offset = pieces[-1].offset + len(pieces[-1].data) if pieces else offset
    finished = end is not None and (end.interrupted or end.state not in ACTIVE)
    if pieces and not finished:
        # A character cut by the page's end is left for the next page.
        cut = min(_incomplete_tail(data), len(pieces[-1].data))
        data, next_offset = data[: len(data) - cut], next_offset - cut
    return OutputPage(task_id, number, data, offset, next_offset, end, more)


def _end(message: pb.OutputEnd) -> OutputEnd:
    return OutputEnd(
        state=enum_name(pb.TaskState, message.state),
        exit_code=message.exit_code if message.HasField("exit_code") else None,
        error=message.error or None,
        total_bytes=message.total_bytes,
        interrupted=message.interrupted,
    )


def _incomplete_tail(data: bytes) -> int:
    """How many bytes at the end of `data` begin a UTF-8 character that
    does not end there (0 when none)."""
    for back in range(1, min(len(data), 4) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: a character starts here
            needed = 2 if byte >= 0xC0 else 1
            needed = 3 if byte >= 0xE0 else needed
            needed = 4 if byte >= 0xF0 else needed
            return back if needed > back else 0
    return 0
