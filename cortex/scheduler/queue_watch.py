"""Whether the queue is known to be empty without reading it. Apply's
listener counts, on the Raft thread, the entries that left a task queued; a
reader that finds no task queued notes the count it saw before its read.
While the count has not moved since, nothing has been queued: a scheduling
round need not run for a freed slot, and a placement made with a submission
need not read the queue to see whether an older task waits."""

from __future__ import annotations


class QueueWatch:
    def __init__(self) -> None:
        # Applied entries that left a task queued.
        self.changes = 0
        # `changes` as it was before the last read that found nothing queued
        # (None: not known, as after a snapshot or on a new leader).
        self._empty_at: int | None = None

    def left_queued(self) -> None:
        """An applied entry left a task queued (the Raft thread)."""
        self.changes += 1

    def found_empty(self, seen: int) -> None:
        """A read made after `changes` was `seen` found no task queued: every
        change counted in `seen` was committed before that read."""
        self._empty_at = seen

    def forget(self) -> None:
        self._empty_at = None

    @property
    def known_empty(self) -> bool:
        return self._empty_at == self.changes
