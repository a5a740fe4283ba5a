"""What every client of the public API shares besides messages: the session
(the highest Raft index seen, sent with every read so it reflects the
client's own writes on whichever node answers), the rotation over
addresses, and when a failed call is tried again."""

from __future__ import annotations

import enum
import itertools
import random
import threading
from collections.abc import Sequence
from typing import Any

import grpc

from cortex.api.channels import retry_after_s
from cortex.v1 import cortex_pb2 as pb

DEFAULT_PORT = 7200


def addresses(target: str | Sequence[str]) -> list[str]:
    """`host:port`, or several; a bare host gets the default port."""
    items = [target] if isinstance(target, str) else list(target)
    if not items:
        raise ValueError("Client needs at least one node address")
    return [_with_port(item.strip()) for item in items]


def _with_port(address: str) -> str:
    if address.startswith("["):  # [::1] or [::1]:7200
        _, _, rest = address.partition("]")
        port = rest.removeprefix(":")
    else:
        _, sep, port = address.rpartition(":")
        port = port if sep else ""
    if not port:
        return f"{address}:{DEFAULT_PORT}"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad node address {address!r}: the port must be 1-65535")
    return address


class Session:
    """The highest Raft index this client has seen in any answer; reads ask
    for at least that much (`ReadOptions.min_index`). Thread-safe."""

    def __init__(self, consistency: pb.ReadConsistency, index: int = 0) -> None:
        self.consistency = consistency
        self._index = index
        self._lock = threading.Lock()

    @property
    def index(self) -> int:
        return self._index

    def read_options(self) -> pb.ReadOptions:
        """What the next read asks for."""
        return pb.ReadOptions(consistency=self.consistency, min_index=self._index)

    def stamp(self, request: Any) -> Any:
        """Adds read options to a read request; other requests pass unchanged."""
        if "read_options" in request.DESCRIPTOR.fields_by_name:
            request.read_options.consistency = self.consistency
            request.read_options.min_index = max(request.read_options.min_index, self._index)
        return request

    def observe(self, response: Any, write: bool = False) -> None:
        """Takes the applied index an answer reports, and a write's commit
        index (the header's is at or past it: writes answer once applied on
        their node). Raft's own commit index (GetClusterStatus) is no use:
        entries of Raft's own (membership, a new leader's no-op) never reach
        the applied index a read waits for."""
        index = 0
        if "header" in response.DESCRIPTOR.fields_by_name and response.HasField("header"):
            index = response.header.applied_index
        if write:
            index = max(index, response.commit_index)
        self.observe_index(index)

    def observe_index(self, index: int) -> None:
        """Reads from now on reflect at least `index` (e.g. another client's
        `session.index`, handed over)."""
        if index > self._index:
            with self._lock:
                self._index = max(self._index, index)


class Rotation:
    """Round-robin over the client's addresses: each call starts at the next
    one, and each retry of a call moves on."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._next = itertools.count()

    def start(self) -> int:
        return next(self._next) % self._count


class Retry(enum.Enum):
    """Which failures a call may be tried again after."""

    # Reads, and writes made safe by an idempotency key or by being idempotent.
    SAFE = "safe"
    # Writes that must not be repeated once a node took them: only calls
    # that never reached a node are tried again.
    UNSENT_ONLY = "unsent-only"


_RETRY_BASE_S = 0.1
_RETRY_MAX_S = 2.0


def retry_pause(err: grpc.RpcError, attempt: int, kind: Retry) -> float | None:
    """How long to wait before trying a failed call again (on the next
    address), or None when it must not be: busy nodes are waited out by their
    hint; UNAVAILABLE and deadlines back off exponentially with jitter."""
    hint = retry_after_s(err)
    if hint is not None:
        return min(max(hint, _RETRY_BASE_S) * 2**attempt, _RETRY_MAX_S * 2)
    code = err.code()
    if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return None
    if kind is Retry.UNSENT_ONLY and not _never_sent(err):
        return None
    return min(_RETRY_BASE_S * 2**attempt, _RETRY_MAX_S) * random.uniform(0.5, 1.0)


def _never_sent(err: grpc.RpcError) -> bool:
    details = (err.details() or "").lower()
    return err.code() == grpc.StatusCode.UNAVAILABLE and details.startswith("failed to connect")
