"""The rows of tasks a request on this node waits for, read by the applying
thread right after the batch that changed them, so the request's own thread
reads nothing once its proposal is applied.

A read on a request's thread under load is dear out of proportion to the
read: each SQLite step lets go of the interpreter lock, and the thread then
waits for it behind every other thread of the node. With 32 clients, reading
a just-submitted task back took ~120 µs of its thread's CPU and ~3 ms of wall
time, against ~35 µs for the same read and its view in a quiet process
(`tasks_as_applied` or `StateReader.get_task`). The applying thread reads
it on the writer's connection, its pages still in hand, before it wakes the
request (a `StateMachine` listener runs before the proposal's result is
delivered), after the listeners that only hand work off (an agent told of
its new attempt starts it meanwhile).

Each task is read once, as the first batch that changed it left it: its
submission's, with whatever else that batch did to it (an assignment the
leader placed with it), the state at the index the answer names
(`commit_index`). Read again after each later batch, a bulk submission's
tasks would be read hundreds at a time while the request waits for the rest
of them. A task no applied batch changed (a submission whose idempotency key
named an earlier task) is not here: the request reads that one itself."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from cortex.state.machine import StateMachine
from cortex.state.queries import TaskView
from cortex.state.transitions import TaskChange


class AppliedRows:
    """Collects, for the requests waiting on them, the rows of tasks as the
    first batch changing them leaves them."""

    def __init__(self, machine: StateMachine) -> None:
        self._read = machine.tasks_as_applied
        self._lock = threading.Lock()
        # The task ids awaited, each with its row as read (None: no batch has
        # changed the task since it was awaited).
        self._awaited: dict[str, TaskView | None] = {}
        machine.add_listener(self.on_change, last=True)

    @contextmanager
    def awaiting(self, task_ids: Iterable[str]) -> Iterator[dict[str, TaskView]]:
        """Awaits `task_ids` for the length of the block: the mapping it gives
        holds, once the block ends, the row of each task that an applied batch
        changed meanwhile (as the first such batch left it)."""
        ids = list(task_ids)
        rows: dict[str, TaskView] = {}
        with self._lock:
            self._awaited.update(dict.fromkeys(ids))
        try:
            yield rows
        finally:
            with self._lock:
                for task_id in ids:
                    row = self._awaited.pop(task_id, None)
                    if row is not None:
                        rows[task_id] = row

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """Reads the awaited tasks the batch at `index` changed, those not
        read yet (on the applying thread: a `StateMachine` listener)."""
        if not self._awaited:
            return
        with self._lock:
            awaited = self._awaited
            unread = [
                c.task_id for c in changes if c.task_id in awaited and awaited[c.task_id] is None
            ]
        if not unread:
            return
        rows = self._read(list(dict.fromkeys(unread)))
        with self._lock:
            for row in rows:
                if row.id in self._awaited:
                    self._awaited[row.id] = row
