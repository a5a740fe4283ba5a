"""WatchEvents over a real StateMachine: filters by task, workflow and event
name, where a watch starts, the backlog bound, and live events woken by the
state listener."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.errors import InvalidArgument, NotFound
from cortex.output.events import (
    BACKLOG_END_HEADER,
    EventFeed,
    EventFilter,
    EventWatch,
    EventWatcher,
)
from cortex.output.ticker import StateTicker
from cortex.state.entries import (
    Entry,
    NodeJoin,
    Payload,
    TaskAssign,
    TaskCancel,
    TaskStarted,
    TaskSubmit,
    encode_batch,
)
from cortex.state.machine import StateMachine
from cortex.state.queries import EventView
from tests.cluster import wait_until

SHELL = {"command": ["true"]}


class Caller:
    def __init__(self) -> None:
        self.active = True
        self.headers: dict[str, str] = {}

    def is_active(self) -> bool:
        return self.active

    def add_callback(self, callback: Any) -> bool:
        return True

    def send_initial_metadata(self, headers: Any) -> None:
        self.headers.update(headers)


class State:
    def __init__(self, root: Path) -> None:
        self.machine = StateMachine(str(root / "state.db"))
        self.ticker = StateTicker()
        self.machine.add_listener(self.ticker.on_change)
        self.feed = EventFeed(self.machine.path)
        self.watcher = EventWatcher(self.feed, self.ticker)
        self.index = 0

    def apply(self, *payloads: Payload) -> None:
        self.index += 1
        self.machine.apply_batch(
            self.index, encode_batch([Entry.create(p, node="n1", ts=5) for p in payloads])
        )

    def watch(
        self,
        caller: Caller | None = None,
        task_id: str | None = None,
        workflow_id: str | None = None,
        events: tuple[str, ...] = (),
        **request: Any,
    ) -> Iterator[EventView]:
        where = EventFilter(task_id, workflow_id, events)
        return self.watcher.watch(EventWatch(where, **request), caller or Caller())


@pytest.fixture
def state(tmp_path: Path) -> Iterator[State]:
    s = State(tmp_path)
    s.apply(NodeJoin("n1", "127.0.0.1:1", "127.0.0.1:2"))
    s.apply(TaskSubmit("a", SHELL), TaskSubmit("b", SHELL, workflow_id="w1", workflow_key="k"))
    s.apply(TaskAssign([{"task_id": "a", "node": "n1", "attempt": 1}]))
    s.apply(TaskStarted("a", 1, "n1"))
    yield s
    s.ticker.close()
    s.machine.close()


def take(events: Iterator[EventView], count: int) -> list[EventView]:
    out = []
    for event in events:
        out.append(event)
        if len(out) == count:
            break
    return out


def test_filters_select_by_task_workflow_and_event_name(state: State) -> None:
    everything, cursor = state.feed.after(0, EventFilter())
    assert [(e.event, e.task_id) for e in everything] == [
        ("node_joined", None), ("submitted", "a"), ("submitted", "b"), ("assigned", "a"),
        ("started", "a"),
    ]  # fmt: skip
    assert cursor == everything[-1].seq and everything[2].workflow_id == "w1"
    assert everything[0].entry_type == "NODE_JOIN" and everything[0].node == "n1"
    by_task, _ = state.feed.after(0, EventFilter(task_id="a"))
    assert [e.event for e in by_task] == ["submitted", "assigned", "started"]
    by_workflow, _ = state.feed.after(0, EventFilter(workflow_id="w1"))
    assert [(e.event, e.task_id) for e in by_workflow] == [("submitted", "b")]
    by_name, _ = state.feed.after(0, EventFilter(events=("submitted", "node_joined")))
    assert len(by_name) == 3
    # Nothing matches: the cursor still moves past what was read.
    none, cursor = state.feed.after(0, EventFilter(task_id="a", events=("failed",)))
    assert none == [] and cursor == everything[-1].seq


def test_pages_continue_where_the_last_one_ended(state: State) -> None:
    first, cursor = state.feed.after(0, EventFilter(), limit=4)
    rest, _ = state.feed.after(cursor, EventFilter(), limit=4)
    assert [e.seq for e in first + rest] == list(range(1, 6))


def test_a_watch_from_the_start_sends_the_backlog_bound_then_live_events(state: State) -> None:
    caller = Caller()
    events = state.watch(caller, task_id="a", from_start=True, follow=True)
    backlog = take(events, 3)
    assert caller.headers[BACKLOG_END_HEADER] == str(backlog[-1].seq)
    got: list[EventView] = []
    reader = threading.Thread(target=lambda: got.extend(take(events, 1)))
    reader.start()
    state.apply(TaskCancel("a"))
    reader.join(10)
    assert [e.event for e in got] == ["cancelled"]


def test_a_watch_from_now_sees_only_new_events(state: State) -> None:
    caller = Caller()
    events = state.watch(caller, follow=True)
    got: list[EventView] = []
    reader = threading.Thread(target=lambda: got.extend(take(events, 2)))
    reader.start()
    wait_until(lambda: caller.headers, 10, what="the watch to start")  # "now" is fixed
    state.apply(TaskSubmit("c", SHELL))
    state.apply(NodeJoin("n2", "127.0.0.1:3", "127.0.0.1:4"))
    reader.join(10)
    assert [(e.event, e.task_id or e.node) for e in got] == [
        ("submitted", "c"),
        ("node_joined", "n2"),
    ]
    assert caller.headers[BACKLOG_END_HEADER] == "0"
    # after_seq resumes right after a known event.
    resumed = take(state.watch(after_seq=got[0].seq), 1)
    assert resumed[0].seq == got[1].seq


def test_without_follow_a_watch_ends_after_the_events_that_exist(state: State) -> None:
    everything = list(state.watch(from_start=True))
    assert [e.seq for e in everything] == list(range(1, 6))
    assert [e.event for e in state.watch(task_id="a", from_start=True)] == [
        e.event for e in everything if e.task_id == "a"
    ]
    assert list(state.watch()) == []  # from now, nothing yet
    state.apply(TaskSubmit("c", SHELL))
    assert [e.task_id for e in state.watch(after_seq=5)] == ["c"]


def test_a_watch_ends_when_its_client_leaves(state: State) -> None:
    caller = Caller()
    done = threading.Event()

    def watch() -> None:
        for _ in state.watch(caller, follow=True):
            pass
        done.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    caller.active = False
    watcher.join(10)
    assert done.is_set()


def test_bad_watch_requests(state: State) -> None:
    with pytest.raises(NotFound, match="no task with id x"):
        take(state.watch(task_id="x"), 1)
    with pytest.raises(NotFound, match="no workflow with id x"):
        take(state.watch(workflow_id="x"), 1)
    with pytest.raises(InvalidArgument, match="after_seq"):
        take(state.watch(after_seq=-1), 1)
    with pytest.raises(InvalidArgument, match="event name is empty"):
        take(state.watch(events=(" ",)), 1)
