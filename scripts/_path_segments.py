"""A task's way from its submission to its attempt's start, cut into the
stretches between what the nodes noted (`scripts/_node_timing`): each event
is `["propose", ns, [task ids]]`, `["log", ns, index, [task ids]]`,
`["apply", began_ns, ended_ns, index, [task ids]]` or `["start", ns, task
id]`, by node.

For a task placed with its submission (one entry submits and assigns it):

1. proposed -> in the leader's log: from the proposing node's proposal to
   the leader logging the entry, in four parts: until the batch leaves the
   proposing node's proposer (`send`: it waits while a batch of that node
   is in flight), on to the leader placing it (a follower's batch is
   forwarded; the leader's own is placed at once), the placement, and on
   to the log;
2. -> committed: until the first node starts applying the entry, which
   none does before a majority holds it (the leader sends the commit on
   before it applies, so a follower may be first);
3. -> apply starts where it runs: until the node the task was placed on
   starts applying the entry (none when it was the first);
4. apply there: how long that node's apply of the entry took;
5. -> attempt starts: until that node's agent starts the attempt.

A task placed by a later scheduling round is only counted (its stretches
are the round's, not the submission's)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

STRETCHES = (
    "proposed -> in the leader's log",
    "  proposed -> leaves its proposer",
    "  -> the leader places it",
    "  placement",
    "  -> logged",
    "-> committed (a node applies)",
    "-> apply starts where it runs",
    "apply where it runs",
    "-> attempt starts",
)
TOTAL = "proposed -> attempt starts"


@dataclass
class TaskPath:
    """Milliseconds of each stretch, one value per task, and the same
    totals split by where the task was proposed and where it ran (each
    `leader` or `follower`)."""

    stretches: dict[str, list[float]] = field(
        default_factory=lambda: {name: [] for name in (*STRETCHES, TOTAL)}
    )
    totals_by_role: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    # Tasks with every event, of which those placed by a later round.
    traced: int = 0
    placed_later: int = 0


def _ms(start_ns: int, end_ns: int) -> float:
    return (end_ns - start_ns) / 1e6


def path_of_tasks(events: Mapping[str, Iterable[list[Any]]]) -> TaskPath:
    """The stretches of every task all of whose events were noted."""
    proposed: dict[str, tuple[str, int]] = {}
    started: dict[str, tuple[str, int]] = {}
    sent: dict[tuple[str, str], int] = {}
    placed: dict[tuple[str, str], tuple[int, int]] = {}
    logged: dict[str, dict[int, int]] = {}
    applied: dict[str, dict[int, tuple[int, int]]] = {}
    indexes: dict[str, set[int]] = {}
    for node, noted in events.items():
        logged[node], applied[node] = {}, {}
        for event in noted:
            kind = event[0]
            if kind == "propose":
                for task_id in event[2]:
                    proposed.setdefault(task_id, (node, event[1]))
            elif kind == "send":
                for task_id in event[2]:
                    sent.setdefault((node, task_id), event[1])
            elif kind == "place":
                for task_id in event[3]:
                    placed.setdefault((node, task_id), (event[1], event[2]))
            elif kind == "log":
                logged[node].setdefault(event[2], event[1])
            elif kind == "apply":
                applied[node][event[3]] = (event[1], event[2])
                for task_id in event[4]:
                    indexes.setdefault(task_id, set()).add(event[3])
            elif kind == "start":
                started.setdefault(event[2], (node, event[1]))
    path = TaskPath()
    for task_id, (proposer, proposed_ns) in proposed.items():
        if task_id not in indexes or task_id not in started:
            continue
        index = min(indexes[task_id])
        runner, started_ns = started[task_id]
        logs = [(logged[node][index], node) for node in logged if index in logged[node]]
        if not logs or index not in applied.get(runner, {}):
            continue
        logged_ns, leader = min(logs)
        path.traced += 1
        if any(
            later > index and later in applied[runner] and applied[runner][later][1] <= started_ns
            for later in indexes[task_id]
        ):
            path.placed_later += 1  # a later entry, a scheduling round's, placed it
            continue
        commit_ns = min(applied[node][index][0] for node in applied if index in applied[node])
        run_began, run_ended = applied[runner][index]
        # Without a noted send or placement (a node that does not place),
        # the parts are left out and the whole stays.
        sent_ns = sent.get((proposer, task_id))
        place = placed.get((leader, task_id))
        parts = (
            (
                _ms(proposed_ns, sent_ns),
                _ms(sent_ns, place[0]),
                _ms(place[0], place[1]),
                _ms(place[1], logged_ns),
            )
            if sent_ns is not None and place is not None
            else (None, None, None, None)
        )
        for name, value in zip(
            STRETCHES,
            (
                _ms(proposed_ns, logged_ns),
                *parts,
                _ms(logged_ns, commit_ns),
                _ms(commit_ns, run_began),
                _ms(run_began, run_ended),
                _ms(run_ended, started_ns),
            ),
            strict=True,
        ):
            if value is not None:
                path.stretches[name].append(value)
        total = _ms(proposed_ns, started_ns)
        path.stretches[TOTAL].append(total)
        roles = (
            "leader" if proposer == leader else "follower",
            "leader" if runner == leader else "follower",
        )
        path.totals_by_role.setdefault(roles, []).append(total)
    return path
