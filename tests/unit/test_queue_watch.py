"""`QueueWatch`: the queue is known to be empty only while no applied entry
has left a task queued since a read found none, whatever order the readers
report in."""

from __future__ import annotations

from cortex.scheduler.queue_watch import QueueWatch


def test_known_empty_only_from_a_read_made_after_every_counted_change() -> None:
    watch = QueueWatch()
    assert not watch.known_empty  # nothing read yet
    seen = watch.changes
    watch.found_empty(seen)
    assert watch.known_empty
    watch.left_queued()
    assert not watch.known_empty

    # A reader that looked before that change and reports after it does
    # not make the queue known empty: its read may have missed the task.
    stale = seen
    fresh = watch.changes
    watch.found_empty(fresh)
    assert watch.known_empty
    watch.found_empty(stale)
    assert not watch.known_empty

    watch.found_empty(watch.changes)
    watch.forget()
    assert not watch.known_empty
