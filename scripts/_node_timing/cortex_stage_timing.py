"""Stage timing for the nodes `bench_core.py --stages` starts (installed by
`sitecustomize` beside it when CORTEX_STAGE_TIMING_DIR is set): wraps named
stages of the node's work (`STAGES`) and counts each one's calls and the CPU
of the thread running them (`time.thread_time_ns`, so waiting for the GIL,
the disk or a message is not counted). The totals go to `<dir>/<node-id>.json`
every `DUMP_S` seconds. Nothing else changes.

Stages nest: a stage's CPU includes the stages it calls (apply holds the
transaction, which holds the handlers)."""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

DUMP_S = 0.2
# (module, class, attribute, stage): what is timed.
STAGES = (
    ("pysyncobj.syncobj", "SyncObj", "_onTick", "raft tick"),
    ("pysyncobj.poller", "PollPoller", "poll", "raft poll (receiving inside)"),
    ("cortex.raft.transport", "DurableTransport", "_onMessageReceived", "raft message handled"),
    ("cortex.raft.transport", "DurableTransport", "_deliver", "raft message sent"),
    ("pysyncobj.syncobj", "SyncObj", "_SyncObj__sendAppendEntries", "raft appends sent (leader)"),
    ("pysyncobj.syncobj", "SyncObj", "_checkCommandsToApply", "raft command queue"),
    ("cortex.raft.group", "RaftGroup", "_applyCommand", "raft command in (placement)"),
    ("cortex.scheduler.at_proposal", "PlacementAtProposal", "place", "placement at submission"),
    ("cortex.state.queries", "StateReader", "nodes", "read: nodes"),
    ("cortex.state.queries", "StateReader", "queued_ids", "read: queued ids"),
    ("cortex.state.queries", "StateReader", "active_counts_by_node", "read: active counts"),
    ("cortex.state.queries", "StateReader", "get_task", "read: one task"),
    ("cortex.state.queries", "StateReader", "get_tasks", "read: tasks by id"),
    ("cortex.state.machine", "StateMachine", "tasks_as_applied", "read: tasks as applied"),
    ("cortex.raft.journal", "DurableJournal", "add", "journal append"),
    ("cortex.raft.journal", "DurableJournal", "sync", "journal sync"),
    ("cortex.raft.group", "RaftGroup", "_apply_next", "apply"),
    ("cortex.state.machine", "StateMachine", "_apply_in_transaction", "apply: transaction"),
    ("cortex.state.machine", "StateMachine", "_apply_entries", "apply: handlers"),
    ("cortex.api.servicer", "CortexServicer", "SubmitTask", "SubmitTask"),
    (
        "cortex.task_operations",
        "TaskOperations",
        "_known_submission",
        "submit: idempotency key pre-check",
    ),
    ("cortex.raft.proposer", "Proposer", "propose", "submit: proposing (and waiting)"),
    (
        "cortex.task_operations",
        "TaskOperations",
        "_accepted_tasks",
        "submit: accepted tasks read back",
    ),
    ("cortex.task_operations", "TaskOperations", "pending_reasons_all", "pending reasons"),
    ("cortex.agent.runner", "Agent", "_start_fresh", "agent: starting what was assigned"),
    ("cortex.agent.runner", "Agent", "_start", "agent: one attempt's start"),
)


def install(node_id: str, out_dir: str) -> None:
    totals: dict[str, list[int]] = {}
    clock = time.thread_time_ns

    def timed(stage: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = clock()
            try:
                return method(*args, **kwargs)
            finally:
                spent = clock() - began
                total = totals.get(stage)
                if total is None:
                    totals[stage] = [1, spent]
                else:
                    total[0] += 1
                    total[1] += spent

        return wrapper

    for module_name, class_name, attribute, stage in STAGES:
        owner = getattr(importlib.import_module(module_name), class_name)
        setattr(owner, attribute, timed(stage, getattr(owner, attribute)))
    _time_listeners(timed)
    path = os.path.join(out_dir, f"{node_id}.json")

    def dump() -> None:
        while True:
            time.sleep(DUMP_S)
            snapshot = {stage: list(total) for stage, total in list(totals.items())}
            temporary = f"{path}.tmp"
            with open(temporary, "w") as out:
                json.dump({"at_ns": time.time_ns(), "stages": snapshot}, out)
            os.replace(temporary, path)

    threading.Thread(target=dump, name="stage-timing", daemon=True).start()


def _time_listeners(timed: Callable[[str, Callable[..., Any]], Callable[..., Any]]) -> None:
    """Each state listener (run on the Raft thread after every apply) as a
    stage of its own, named by its qualified name."""
    from cortex.state.machine import StateMachine

    add_listener = StateMachine.add_listener

    def add_timed_listener(
        machine: StateMachine,
        listener: Callable[..., Any],
        last: bool = False,
        first: bool = False,
    ) -> None:
        name = getattr(listener, "__qualname__", type(listener).__name__)
        add_listener(machine, timed(f"apply: listener {name}", listener), last, first)

    StateMachine.add_listener = add_timed_listener  # type: ignore[method-assign,assignment]
