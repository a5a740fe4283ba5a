"""The attempts assigned to a node beyond the ones it runs: they wait here,
best first (priority, then the order the agent found them), for one of the
node's slots, until the log moves them away.

An attempt waits as the agent read it: what an attempt starts from does not
change while it stays assigned to the node. The Raft listener (`drop_moved`)
takes away the ones the log moves, and a read the log overtakes cannot add
an attempt back: the tasks the agent is reading are marked first
(`reading`), and one the log moves meanwhile is not added. Rows the Raft
thread read ahead, as the batch that assigned their attempts here left them
(`read_ahead`), are handed to the read of their tasks in the same step as
the tasks are marked, and dropped like waiting attempts when the log moves
them first: either way the agent never adds a row the log has overtaken.
Thread-safe: the agent's loop adds and takes, the Raft thread reads ahead
and drops."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cortex.state.queries import TaskView
from cortex.state.transitions import TaskChange

# Rows read ahead kept at most, until a read takes them or the log moves them.
MOST_READ_AHEAD = 1024


@dataclass(frozen=True)
class _Waiting:
    task: TaskView
    order: tuple[int, int]


class WaitingAttempts:
    def __init__(self, node_id: str) -> None:
        self._node_id = node_id
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting] = {}
        self._found = 0
        # The tasks being read, and those of them the log took from this
        # node meanwhile (the read may predate that).
        self._reading: frozenset[str] = frozenset()
        self._moved_while_read: set[str] = set()
        # Rows of attempts assigned here, read ahead by the Raft thread, by task id.
        self._read_ahead: dict[str, TaskView] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)

    def __bool__(self) -> bool:
        return bool(self._waiting)  # a dict's size reads safely without the lock

    @contextmanager
    def reading(self, task_ids: Iterable[str]) -> Iterator[dict[str, TaskView]]:
        """While the agent reads these tasks to `add` them: gives the rows
        read ahead of those among them, which it need not read."""
        ids = list(task_ids)
        with self._lock:
            self._reading = frozenset(ids)
            # In the order asked: the order attempts of one priority wait in.
            ahead = {
                task_id: self._read_ahead.pop(task_id)
                for task_id in ids
                if task_id in self._read_ahead
            }
        try:
            yield ahead
        finally:
            with self._lock:
                self._reading, self._moved_while_read = frozenset(), set()

    def add(self, task: TaskView) -> None:
        """`task`'s attempt, read as assigned here, waits (once), unless the
        log moved the task while it was read."""
        with self._lock:
            if task.id in self._moved_while_read:
                return
            waiting = self._waiting.get(task.id)
            if waiting is None or waiting.task.attempt != task.attempt:
                self._found += 1
                self._waiting[task.id] = _Waiting(task, (-task.priority, self._found))

    def read_ahead(self, rows: Iterable[TaskView]) -> None:
        """Rows of attempts an applied batch assigned here, as it left them
        (read after that batch's `drop_moved`), for the next read of their
        tasks; dropped when the log moves them first."""
        with self._lock:
            for row in rows:
                if len(self._read_ahead) < MOST_READ_AHEAD:
                    self._read_ahead[row.id] = row

    def forget_read_ahead(self) -> None:
        """Drops every row read ahead (the next read looks at every attempt)."""
        with self._lock:
            self._read_ahead.clear()

    def drop_moved(self, changes: Iterable[TaskChange]) -> None:
        """Each task's last change of an applied entry (`last_changes`): a
        waiting attempt, or a row read ahead, that the log moved from this
        node, or ended, waits no more. Nothing to look at while nothing waits
        or is read (the Raft thread calls this after every entry): a read
        that begins after this look reads the entry's outcome."""
        if not self._waiting and not self._reading and not self._read_ahead:
            return
        with self._lock:
            for change in changes:
                here = change.node == self._node_id and change.state == "assigned"
                if change.task_id in self._reading and not here:
                    self._moved_while_read.add(change.task_id)
                waiting = self._waiting.get(change.task_id)
                if waiting is not None and not (here and change.attempt == waiting.task.attempt):
                    del self._waiting[change.task_id]
                ahead = self._read_ahead.get(change.task_id)
                if ahead is not None and not (here and change.attempt == ahead.attempt):
                    del self._read_ahead[change.task_id]

    def keep_only(self, held: set[tuple[str, int]]) -> None:
        """Drops the attempts not among `held` (a full read of the node's)."""
        with self._lock:
            self._waiting = {
                task_id: waiting
                for task_id, waiting in self._waiting.items()
                if (task_id, waiting.task.attempt) in held
            }

    def take(self, most: int | None) -> list[TaskView]:
        """The best `most` waiting attempts (None: all), no longer waiting."""
        with self._lock:
            best = sorted(self._waiting.values(), key=lambda waiting: waiting.order)
            chosen = best if most is None else best[:most]
            for waiting in chosen:
                del self._waiting[waiting.task.id]
        return [waiting.task for waiting in chosen]
