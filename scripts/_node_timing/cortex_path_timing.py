"""Path timing for the nodes `bench_core.py --path` starts (installed by
`sitecustomize` beside it when CORTEX_PATH_TIMING_DIR is set): notes the
wall-clock time (`time.time_ns`, one clock for every process of the
machine) of each point a task passes on its way from its submission to its
attempt's start:

- `propose`: this node proposes the task's submission (`Proposer._submit`);
- `send`: the batch holding it leaves this node's proposer for Raft
  (`RaftGroup.propose_batch`: at once, or after the batch in flight);
- `place`: the leader places the batch's tasks (`PlacementAtProposal.place`,
  start and end; the leader's own batch as it leaves its proposer, a
  follower's as the leader takes it);
- `log`: this node's Raft journal takes an entry naming the task (the
  leader as it logs it, a follower as the append reaches it);
- `apply`: this node applies an entry naming the task (start and end);
- `start`: this node's agent starts an attempt of the task.

Entries are named by their Raft index and the tasks by their ids, found in
the entries' JSON. The events go to `<dir>/<node-id>.jsonl`, one JSON array
a line, every `DUMP_S` seconds, each batch followed by a `flushed` line
with the time it was written. Nothing else changes. The lookups cost the
Raft thread a few microseconds per entry: meant for the latency runs
(`--concurrency 1`), not for throughput."""

from __future__ import annotations

import importlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any

DUMP_S = 0.2
_TASK_ID = re.compile(rb'"task_id":"([^"\\]+)"')


def _task_ids(*blobs: bytes) -> list[str]:
    return sorted({found.decode() for blob in blobs for found in _TASK_ID.findall(blob)})


def install(node_id: str, out_dir: str) -> None:
    events: list[list[Any]] = []
    clock = time.time_ns

    def wrap(module: str, owner: str, name: str, around: Callable[..., Any]) -> None:
        cls = getattr(importlib.import_module(module), owner)
        original = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return around(original, *args, **kwargs)

        setattr(cls, name, wrapper)

    def proposed(
        original: Callable[..., Any], proposer: Any, entries: list[Any], *args: Any, **kw: Any
    ) -> Any:
        at = clock()
        ids = [
            entry.payload.get("task_id")
            for entry in entries
            if entry.type == "TASK_SUBMIT" and isinstance(entry.payload, dict)
        ]
        if ids:
            events.append(["propose", at, [i for i in ids if isinstance(i, str)]])
        return original(proposer, entries, *args, **kw)

    def sent(original: Callable[..., Any], group: Any, data: bytes, callback: Any) -> Any:
        ids = _task_ids(data)
        if ids:
            events.append(["send", clock(), ids])
        return original(group, data, callback)

    def placed(original: Callable[..., Any], placer: Any, data: bytes) -> Any:
        began = clock()
        result = original(placer, data)
        ids = _task_ids(data)
        if ids:
            events.append(["place", began, clock(), ids])
        return result

    def logged(
        original: Callable[..., Any], journal: Any, command: bytes, idx: int, term: int
    ) -> Any:
        result = original(journal, command, idx, term)
        if isinstance(command, (bytes, bytearray)):
            ids = _task_ids(bytes(command))
            if ids:
                events.append(["log", clock(), idx, ids])
        return result

    def applied(
        original: Callable[..., Any], machine: Any, index: int, batches: list[bytes]
    ) -> Any:
        began = clock()
        result = original(machine, index, batches)
        ended = clock()
        ids = _task_ids(*batches)
        if ids and result is not None:
            events.append(["apply", began, ended, index, ids])
        return result

    def started(original: Callable[..., Any], agent: Any, task: Any, *args: Any, **kw: Any) -> Any:
        events.append(["start", clock(), task.id])
        return original(agent, task, *args, **kw)

    wrap("cortex.raft.proposer", "Proposer", "_submit", proposed)
    wrap("cortex.raft.group", "RaftGroup", "propose_batch", sent)
    wrap("cortex.scheduler.at_proposal", "PlacementAtProposal", "place", placed)
    wrap("cortex.raft.journal", "DurableJournal", "add", logged)
    wrap("cortex.state.machine", "StateMachine", "apply_batches", applied)
    wrap("cortex.agent.runner", "Agent", "_start", started)
    path = os.path.join(out_dir, f"{node_id}.jsonl")

    def dump() -> None:
        written = 0
        while True:
            time.sleep(DUMP_S)
            new = events[written:]
            written += len(new)
            with open(path, "a") as out:
                for event in new:
                    out.write(json.dumps(event) + "\n")
                out.write(json.dumps(["flushed", clock()]) + "\n")

    threading.Thread(target=dump, name="path-timing", daemon=True).start()
