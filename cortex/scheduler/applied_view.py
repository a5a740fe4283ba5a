"""What placement reads of the replicated state, the nodes and the tasks
each has in hand, as the last applied batch left them: read on the leader
by the applying thread, on the writer's connection, right after each batch,
so a placement reads nothing itself.

A placement on a request's thread (`cortex.scheduler.at_proposal`) read
both from SQLite: ~150 and ~85 µs of its thread's CPU at one client, ~370
and ~200 µs at 32, where the same reads take ~30 µs each in a quiet
process. Each read after a commit finds its connection's page cache
dropped (SQLite drops it whenever the write-ahead log changed) and each
SQLite step lets go of the interpreter lock, to wait for it again behind
the node's other threads. The applying thread has the pages in hand.

The view is read by the first listener of each batch, before any other
listener runs: the scheduler's releases its held placements of the tasks
the batch changed (`Reservations.release`), and a proposer learns of its
batch's results only after the listeners ran. So a placement that finds a
placement no longer held finds it counted here, as it would in the
database. On a follower nothing is read (and the view is dropped): only
the leader places."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from cortex.state.machine import StateMachine
from cortex.state.queries import NodeView, NodeViews, counts_by_node
from cortex.state.task_states import ACTIVE_STATES
from cortex.state.transitions import TaskChange


@dataclass(frozen=True)
class AppliedNodes:
    """The nodes (removed ones left out) and the tasks assigned to or
    running on each node that has any, at one applied index."""

    index: int
    nodes: list[NodeView]
    active: dict[str, int]


class AppliedView:
    def __init__(self, machine: StateMachine, is_leader: Callable[[], bool]) -> None:
        self._machine = machine
        self._is_leader = is_leader
        self._node_views = NodeViews()
        self._seen: AppliedNodes | None = None
        machine.add_listener(self.on_change, first=True)

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """Reads the view after the batch at `index` (a `StateMachine`
        listener, the first: see above)."""
        # Dropped first: a read that fails leaves no view behind (placement
        # then reads the database), never the last batch's.
        self._seen = None
        if self._is_leader():
            self._seen = self._machine.read_as_applied(lambda conn: self._read(conn, index))

    def _read(self, conn: sqlite3.Connection, index: int) -> AppliedNodes:
        return AppliedNodes(index, self._node_views.read(conn), counts_by_node(conn, ACTIVE_STATES))

    def seen(self) -> AppliedNodes | None:
        """The view as of the last batch applied while this node led; None
        when there is none (the caller reads the database). Any thread."""
        return self._seen
