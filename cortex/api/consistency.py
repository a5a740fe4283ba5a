"""Read consistency on the public API: every read waits until the node has
applied what its ReadOptions ask for (SESSION: `min_index`; LINEARIZABLE:
the leader's read index), and every response carries a ResponseHeader
saying which state it reflects and, as far as the node knows, how far
behind the leader that state may be. A write naming an id the node does not
know catches up to the leader's read index before it answers NOT_FOUND
(`caught_up_before_not_found`)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import grpc

from cortex.errors import InvalidArgument, Unavailable, UnknownId
from cortex.membership.board import ResourceBoard
from cortex.state.queries import NodeView, StateReader
from cortex.v1 import cortex_pb2 as pb

# Room left in a call's deadline for answering once the wait is over.
_ANSWER_MARGIN_S = 0.2


class AppliedState(Protocol):
    """What a read waits on: the state machine's applied index."""

    @property
    def applied_index(self) -> int: ...

    def wait_applied(self, index: int, timeout: float) -> bool: ...


class RaftView(Protocol):
    """What a read asks of the node's Raft group."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_address(self) -> str | None: ...

    @property
    def raftCommitIndex(self) -> int: ...  # noqa: N802 (pysyncobj's name)


# Returns an index at or past everything committed before the call (the
# leader's read index), within `timeout_s`; raises Unavailable otherwise.
ReadIndex = Callable[[float], int]


class ReadGate:
    """The servicer's one place for consistency: `before_read` at the start
    of every read, `header` in every response."""

    def __init__(
        self,
        node_id: str,
        state: AppliedState,
        raft: RaftView,
        read_index: ReadIndex,
        max_wait_s: float,
        leader_contact_age_s: Callable[[], float | None] = lambda: None,
        leader: Callable[[], NodeView | None] = lambda: None,
    ) -> None:
        self._node_id = node_id
        self._state = state
        self._raft = raft
        self._read_index = read_index
        self._max_wait_s = max_wait_s
        self._leader_contact_age_s = leader_contact_age_s
        self._leader = leader

    def before_read(
        self, options: pb.ReadOptions, context: grpc.ServicerContext | None
    ) -> pb.ReadConsistency:
        """Waits (bounded by the call's deadline and the node's propose
        timeout) until this node may answer a read with these options; returns
        the consistency it is served at. Raises Unavailable when it cannot
        get there in time."""
        consistency = options.consistency or pb.READ_CONSISTENCY_SESSION
        if consistency not in pb.ReadConsistency.values():
            raise InvalidArgument(
                f"read_options.consistency: unknown value {consistency}; expected"
                " STALE, SESSION or LINEARIZABLE"
            )
        if options.min_index < 0:
            raise InvalidArgument("read_options.min_index must not be negative")
        if consistency == pb.READ_CONSISTENCY_STALE:
            return consistency
        deadline = time.monotonic() + self._wait_s(context)
        target = options.min_index
        if consistency == pb.READ_CONSISTENCY_LINEARIZABLE:
            target = max(target, self._read_index(max(deadline - time.monotonic(), 0.0)))
        if self._state.applied_index < target and not self._state.wait_applied(
            target, max(deadline - time.monotonic(), 0.0)
        ):
            raise Unavailable(
                f"node {self._node_id} has applied Raft index {self._state.applied_index},"
                f" behind the index {target} this read needs"
                f" ({_consistency_name(consistency)}); it may be cut off from the leader:"
                " retry, ask another node, or read with consistency STALE"
            )
        return consistency

    def catch_up(self, context: grpc.ServicerContext | None) -> None:
        """Waits until this node has applied everything committed before the
        call (a LINEARIZABLE read's wait): for a write about to refuse an id
        this node does not know, which may only not have reached it yet."""
        self.before_read(pb.ReadOptions(consistency=pb.READ_CONSISTENCY_LINEARIZABLE), context)

    def read_index(self, timeout_s: float) -> int:
        """The leader's read index, for a node asking on behalf of its reader."""
        return self._read_index(timeout_s)

    def _wait_s(self, context: grpc.ServicerContext | None) -> float:
        remaining = context.time_remaining() if context is not None else None
        if remaining is None:
            return self._max_wait_s
        return max(min(self._max_wait_s, remaining - _ANSWER_MARGIN_S), 0.0)

    def header(
        self, consistency: pb.ReadConsistency = pb.READ_CONSISTENCY_UNSPECIFIED
    ) -> pb.ResponseHeader:
        """The header of a response answered now (`consistency` unset for writes)."""
        header = pb.ResponseHeader(
            node_id=self._node_id,
            applied_index=self._state.applied_index,
            consistency=consistency,
        )
        if self._raft.leader_address is None:
            return header
        header.leader_commit_index = int(self._raft.raftCommitIndex)
        leader = self._leader()
        if leader is not None:
            header.leader_id = leader.id
            header.leader_grpc_address = leader.grpc_address
        if not self._raft.is_leader:
            age = self._leader_contact_age_s()
            if age is not None:
                header.leader_contact_age.FromMilliseconds(round(age * 1000))
        return header


def _consistency_name(value: int) -> str:
    return pb.ReadConsistency.Name(value).removeprefix("READ_CONSISTENCY_").lower()  # type: ignore[arg-type]


Handler = TypeVar("Handler", bound=Callable[..., Any])


def caught_up_before_not_found(method: Handler) -> Handler:
    """For a write naming something that must exist (a task to cancel, a node
    to drain): when this node does not know it, it catches up with the leader
    (`ReadGate.catch_up`) and tries once more before answering NOT_FOUND. A
    write sent to a follower right after another node acknowledged what it
    names then finds it, whether or not the caller carries a session index.
    Only a lookup's UnknownId, raised before anything is proposed, is tried
    again (a refusal by apply is a plain NotFound), so the handler proposes
    at most once. Its class has `_reads`."""

    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except UnknownId:
            self._reads.catch_up(context)
            return method(self, request, context)

    return wrapper  # type: ignore[return-value]


class LeaderReadIndex:
    """The read index from wherever this node stands: its own barrier when it
    leads, else the leader's, asked over the peer listener."""

    def __init__(
        self,
        raft: RaftView,
        own: ReadIndex,
        ask: Callable[[str, float], int],
        reader: StateReader,
    ) -> None:
        self._raft = raft
        self._own = own
        self._ask = ask
        self._reader = reader

    def __call__(self, timeout_s: float) -> int:
        if self._raft.is_leader:
            return self._own(timeout_s)
        leader = self._raft.leader_address
        if leader is None:
            raise Unavailable(
                "no Raft leader is known to this node; a linearizable read needs one"
                " (retry, or read with consistency STALE)"
            )
        node = next((n for n in self._reader.nodes() if n.raft_address == leader), None)
        if node is None or not node.peer_address:
            raise Unavailable(f"the leader ({leader}) has no known peer address yet; retry shortly")
        return self._ask(node.peer_address, timeout_s)


class LeaderDirectory:
    """The leader's row in the node table, as this node knows it: its id and
    the gRPC address it registered. Every response's header asks, so the
    table is read when the Raft leader changes and otherwise at most once
    every `refresh_s` (and, until the leader has registered, at each ask):
    a leader that restarts with another gRPC address and wins again under
    the same Raft address registers anew, and headers name that address
    within `refresh_s` of its registration being applied here."""

    def __init__(
        self,
        raft: RaftView,
        reader: StateReader,
        refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._raft = raft
        self._reader = reader
        self._refresh_s = refresh_s
        self._clock = clock
        # (the leader's Raft address, its row, when it was read): replaced
        # whole, so a reader on another thread sees one or the other.
        self._known: tuple[str, NodeView, float] | None = None

    def __call__(self) -> NodeView | None:
        leader = self._raft.leader_address
        if leader is None:
            return None
        known = self._known
        now = self._clock()
        if known is None or known[0] != leader or now - known[2] >= self._refresh_s:
            node = next((n for n in self._reader.nodes() if n.raft_address == leader), None)
            if node is None:
                return None  # not registered yet: look again next time
            self._known = known = (leader, node, now)
        return known[1]


def leader_contact_age(
    leader: Callable[[], NodeView | None], board: ResourceBoard
) -> Callable[[], float | None]:
    """How long since the leader's last heartbeat reached this node."""

    def age() -> float | None:
        node = leader()
        report = None if node is None else board.get(node.id)
        return None if report is None else board.age_s(report)

    return age
