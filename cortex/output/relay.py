"""Relaying an attempt's output from the node that executed it. The relay
asks the source's peer listener (which serves only what that node holds, so
requests never loop), naming itself in a `cortex-relay` header, resumes at
the exact byte after a dropped connection, and ends with `interrupted` when
the source is gone.

A source can also go silent without closing the connection (a partition): a
watchdog cuts a relay that has received nothing for `stall_grace_s` once the
log says the attempt is over, e.g. after the leader re-queued it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from cortex.errors import (
    CortexError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TlsError,
    Unavailable,
)
from cortex.output.attempts import ACTIVE, AttemptInfo
from cortex.proto_enums import enum_value
from cortex.state.transitions import TaskChange
from cortex.v1 import cortex_pb2 as pb

log = logging.getLogger(__name__)

RELAY_HEADER = "cortex-relay"
# Sent first by the node serving a stream: which node answered.
NODE_HEADER = "cortex-node"
# Waits before reconnecting to a source that dropped the stream.
RECONNECT_DELAYS_S = (0.2, 0.5, 1.0)
_PASSED_THROUGH: dict[grpc.StatusCode, type[CortexError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
}


class RelayCalls(Protocol):
    """How a relay reaches the node that executed an attempt: its peer
    listener (`cortex.api.peer_client.PeerClient`)."""

    node_id: str

    def stream_output(
        self,
        address: str,
        request: pb.StreamTaskOutputRequest,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> Any:
        """The call: iterate it for the source's StreamTaskOutputResponse
        messages, `initial_metadata()` for its headers, `cancel()` to stop."""
        ...

    def error(self, address: str, err: grpc.RpcError) -> CortexError:
        """The Cortex error for a failed call to `address`."""
        ...

    def connect_error(self, address: str, detail: str) -> CortexError | None:
        """The error for a call that never connected (naming TLS when a
        handshake failed); None when `detail` is not a failure to connect."""
        ...


class StreamContext(Protocol):
    """The part of `grpc.ServicerContext` a stream uses."""

    def is_active(self) -> bool: ...

    def add_callback(self, callback: Callable[[], None]) -> bool: ...


@dataclass(eq=False)
class _Relay:
    task_id: str
    attempt: int
    last_message_at: float = field(default_factory=time.monotonic)
    attempt_over_at: float | None = None
    call: Any = None
    cut: bool = False


def end_message(
    info: AttemptInfo,
    total_bytes: int,
    interrupted: bool,
    exit_code: int | None,
    error: str | None,
) -> pb.StreamTaskOutputResponse:
    """The last message of an attempt's output."""
    end = pb.OutputEnd(
        attempt=info.number,
        state=enum_value(pb.TaskState, info.state),
        error=error or "",
        total_bytes=total_bytes,
        interrupted=interrupted,
    )
    if exit_code is not None:
        end.exit_code = exit_code
    return pb.StreamTaskOutputResponse(attempt=info.number, end=end)


def source_lost_end(
    info: AttemptInfo, total_bytes: int, reason: str
) -> pb.StreamTaskOutputResponse:
    exit_code = -1 if info.exit_code is None else info.exit_code
    return end_message(info, total_bytes, True, exit_code, reason)


class RelayClient:
    def __init__(self, peers: RelayCalls, stall_grace_s: float = 5.0) -> None:
        self._node_id = peers.node_id
        self._peers = peers
        self._stall_grace_s = stall_grace_s
        self._lock = threading.Lock()
        self._relays: set[_Relay] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="output-relay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            relays = list(self._relays)
        for relay in relays:
            if relay.call is not None:
                relay.call.cancel()

    def _describe(self, address: str, code: grpc.StatusCode, detail: str) -> str:
        """Why a call to a source failed, naming TLS when a handshake did."""
        failed = self._peers.connect_error(address, detail)
        if isinstance(failed, TlsError):
            return str(failed)
        return f"{code.name.lower()}: {detail}"

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """StateMachine listener (Raft thread): notes relayed attempts that ended."""
        if not changes:
            return
        with self._lock:
            if not self._relays:
                return
            by_task: dict[str, list[_Relay]] = {}
            for relay in self._relays:
                by_task.setdefault(relay.task_id, []).append(relay)
        now = time.monotonic()
        for change in changes:
            for relay in by_task.get(change.task_id, ()):
                over = change.attempt != relay.attempt or change.state not in ACTIVE
                if over and relay.attempt_over_at is None:
                    relay.attempt_over_at = now

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            now = time.monotonic()
            with self._lock:
                stalled = [
                    r
                    for r in self._relays
                    if r.attempt_over_at is not None
                    and now - max(r.attempt_over_at, r.last_message_at) > self._stall_grace_s
                ]
            for relay in stalled:
                log.warning("task %s attempt %d: source silent after the attempt ended; "
                            "ending the relay", relay.task_id, relay.attempt)  # fmt: skip
                relay.cut = True
                if relay.call is not None:
                    relay.call.cancel()

    def relay(
        self,
        address: str,
        source_node: str,
        request: pb.StreamTaskOutputRequest,
        context: StreamContext,
        describe: Callable[[], AttemptInfo],
    ) -> Iterator[pb.StreamTaskOutputResponse]:
        """Yields the source's chunks and end message. A source that cannot
        be reached at all raises Unavailable; one lost midway ends the stream
        with `interrupted`. `describe` gives the attempt's state at that point."""
        relay = _Relay(request.task_id, request.attempt)
        with self._lock:
            self._relays.add(relay)
        position = request.from_offset
        reached = False
        failures = 0
        first_error = ""
        try:
            while not self._stop.is_set():
                forwarded = pb.StreamTaskOutputRequest()
                forwarded.CopyFrom(request)
                forwarded.from_offset = position
                call = self._peers.stream_output(
                    address, forwarded, ((RELAY_HEADER, self._node_id),)
                )
                relay.call = call
                if not context.add_callback(call.cancel):
                    call.cancel()
                    return
                try:
                    # Sources send their headers first, so this tells a
                    # source that answered from one that could not be reached.
                    headers = dict(call.initial_metadata() or ())
                    reached = reached or NODE_HEADER in headers
                    for chunk in call:
                        relay.last_message_at = time.monotonic()
                        failures, first_error = 0, ""
                        if chunk.HasField("data"):
                            position = chunk.data.offset + len(chunk.data.data)
                        yield chunk
                        if chunk.HasField("end"):
                            return
                    error = "it ended the stream without an end message"
                except grpc.RpcError as err:
                    if not context.is_active():
                        return
                    code = err.code()
                    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and not relay.cut:
                        raise self._peers.error(address, err) from None  # busy: say so
                    if code in _PASSED_THROUGH and not relay.cut:
                        raise _PASSED_THROUGH[code](err.details() or str(code)) from None
                    error = (
                        "it went silent after the attempt ended"
                        if relay.cut
                        else self._describe(address, code, err.details() or "")
                    )
                first_error = first_error or error
                if relay.cut or failures >= len(RECONNECT_DELAYS_S):
                    break
                self._stop.wait(RECONNECT_DELAYS_S[failures])
                failures += 1
                if not context.is_active():
                    return
            else:
                error = first_error = "this node is shutting down"
            reason = f"lost the output stream from node {source_node} ({address}): {first_error}"
            if error != first_error:
                reason += f"; reconnecting failed: {error}"
            if not reached:
                raise Unavailable(
                    f"the output of task {request.task_id} attempt {request.attempt} is on node"
                    f" {source_node} ({address}), which cannot be reached: {error}"
                )
            log.warning("task %s attempt %d: %s", request.task_id, request.attempt, reason)
            yield source_lost_end(describe(), position, reason)
        finally:
            with self._lock:
                self._relays.discard(relay)
