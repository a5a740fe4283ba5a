"""A real one-node Raft group ticked by hand in the test's thread
(`auto_tick=False`), for tests that look at the order of what one tick does."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from cortex.raft import RaftGroup, RaftSettings
from cortex.state import StateMachine
from cortex.state import entries as e
from tests.cluster import free_ports


def one_node_group(tmp_path: Path, machine: StateMachine, secret: str) -> RaftGroup:
    """A group of this node alone on a free loopback port, keeping its Raft
    files in `tmp_path`; nothing ticks it but `tick_until`."""
    return RaftGroup(
        RaftSettings(
            self_address=f"127.0.0.1:{free_ports(1)[0]}",
            peers=[],
            data_dir=str(tmp_path),
            secret=secret,
            auto_tick=False,
        ),
        machine,
    )


def noop_batch(task_id: str) -> bytes:
    """A batch of one noop submission."""
    return e.encode_batch([e.Entry.create(e.TaskSubmit(task_id, {"type": "noop"}), "n1")])


def tick_until(
    group: RaftGroup, done: Callable[[], bool], what: str, timeout_s: float = 15.0
) -> None:
    """Ticks `group` until `done()` holds; fails after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        group.doTick(0.01)
