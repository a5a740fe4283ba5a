"""`GET /api/v1/cluster`: the leader and term, every member with its own
applied index and state digest (asked of each node over its peer listener,
all at once, each within a second), and the newest events. Members at the
same applied index must show the same digest; a member that cannot be asked
says why instead."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cortex.errors import CortexError
from cortex.membership.cluster_status import ClusterStatus, NodeStatusView
from cortex.membership.peer_calls import NodeState
from cortex.state.queries import EventView, StateReader

# How long one member may take to report its state.
MEMBER_TIMEOUT_S = 1.0
RECENT_EVENTS = 50
# Members are asked in parallel, up to this many at once.
MAX_PARALLEL_ASKS = 8

AskNodeState = Callable[[str, float], NodeState]


def cluster_json(cluster: ClusterStatus, reader: StateReader, ask: AskNodeState) -> dict[str, Any]:
    own = cluster.status()
    others = [view for view in own.nodes if view.node.id != own.node_id]
    states: dict[str, NodeState | str] = {
        own.node_id: NodeState(
            own.applied_index, own.state_digest, own.commit_index, own.term, own.raft_state
        )
    }
    if others:
        with ThreadPoolExecutor(min(len(others), MAX_PARALLEL_ASKS)) as pool:
            for view, state in zip(others, pool.map(lambda v: _ask(v, ask), others), strict=True):
                states[view.node.id] = state
    return {
        "cluster": {
            "node_id": own.node_id,
            "leader_id": own.leader_node_id,
            "term": own.term,
            "has_quorum": own.has_quorum,
            "members": [_member_json(view, states.get(view.node.id)) for view in own.nodes],
            "events": [_event_json(event) for event in reader.recent_events(RECENT_EVENTS)],
        }
    }


def _ask(view: NodeStatusView, ask: AskNodeState) -> NodeState | str:
    """The member's state, or why it could not be had."""
    if not view.node.peer_address:
        return "its peer address is not known yet"
    if view.node.status in ("offline", "removed"):
        return f"it is {view.node.status}"
    try:
        return ask(view.node.peer_address, MEMBER_TIMEOUT_S)
    except CortexError as err:
        return str(err)


def _member_json(view: NodeStatusView, state: NodeState | str | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "node_id": view.node.id,
        "status": view.node.status,
        "role": view.node.role,
        "grpc_address": view.node.grpc_address,
        "is_leader": view.is_leader,
        "connected": view.connected,
        "reachable": isinstance(state, NodeState),
        "applied_index": None,
        "commit_index": None,
        "state_digest": None,
        "term": None,
        "raft_state": None,
        "error": state if isinstance(state, str) else None,
    }
    if isinstance(state, NodeState):
        data |= {
            "applied_index": state.applied_index,
            "commit_index": state.commit_index,
            "state_digest": state.state_digest,
            "term": state.term,
            "raft_state": state.raft_state,
        }
    return data


def _event_json(event: EventView) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "raft_index": event.raft_index,
        "ts": event.ts,
        "task_id": event.task_id,
        "workflow_id": event.workflow_id,
        "event": event.event,
        "from_state": event.from_state,
        "to_state": event.to_state,
        "node": event.node,
        "attempt": event.attempt,
        "detail": event.detail,
    }
