"""The deterministic simulator (scripts/simulate.py, cortex/sim): the same seed
gives the same trace, a budget of seeds passes every invariant, the checker
catches storage that does not sync, and the seeds that found bugs stay fixed.
Seeds run through the script, which pins the hash seed for itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "simulate.py"


def simulate(*args: str, timeout: float = 600) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert (done.returncode == 0) == (not report["failed_seeds"])
    return report


def test_a_seed_replays_to_the_same_trace() -> None:
    first = simulate("--seeds", "11-13", "--duration", "15", "--jobs", "1")
    again = simulate("--seeds", "11-13", "--duration", "15", "--jobs", "2")
    assert first["trace_hashes"] == again["trace_hashes"]
    assert len(set(first["trace_hashes"].values())) == 3


@pytest.mark.parametrize(
    ("nodes", "mode", "seeds"),
    [
        ("3", "safety", "1-6"),
        ("3", "liveness", "1-4"),
        ("5", "safety", "1-2"),
        ("5", "liveness", "1-2"),
    ],  # fmt: skip
)
def test_a_budget_of_seeds_keeps_every_invariant(nodes: str, mode: str, seeds: str) -> None:
    report = simulate("--seeds", seeds, "--nodes", nodes, "--mode", mode, "--duration", "30")
    assert report["failed_seeds"] == []


def test_storage_that_does_not_sync_is_caught() -> None:
    """Seed 4 (20 simulated seconds) loses or forks acknowledged state after
    power cuts when storage acknowledges without syncing; with syncing it
    passes."""
    report = simulate("--seed", "4", "--duration", "20", "--unsafe-no-sync")
    invariants = {failure["invariant"] for failure in report["failed_seeds"]}
    assert invariants & {"applied-state-agrees", "no-acknowledged-write-lost"}, report
    assert simulate("--seed", "4", "--duration", "20")["failed_seeds"] == []


def test_a_scheduler_that_places_work_on_a_draining_node_is_caught() -> None:
    """The harness's switch makes the scheduler take draining nodes as active:
    invariant 4 fails on the rounds it proposes (seed 2 drains a node early)."""
    planted = simulate("--seed", "2", "--duration", "20", "--planted-bug", "assign-to-draining")
    invariants = {failure["invariant"] for failure in planted["failed_seeds"]}
    assert invariants == {"scheduler-respects-nodes"}, planted
    assert simulate("--seed", "2", "--duration", "20")["failed_seeds"] == []


@pytest.mark.parametrize(
    ("bug", "seed", "invariant"),
    [
        # A follower committed a deposed leader's entries from an append that
        # carried no log position to check them against: applied state forks.
        # (Seed 5 found it. The seeds that reach it move with the workload and
        # with the timing of the agent, of Raft's messages and of the
        # leader-only loops, with how elections go and with when a node
        # gives up on proposals it cannot get committed: today seeds 16, 22
        # and 26 of 1-60 do.)
        ("raft-unchecked-commit", "16", "applied-state-agrees"),
        # A node removed while it was down found its removal in its log on
        # restart, took it for an old one and joined again (its own join had
        # been accepted while it was down, so it never saw its row). The
        # seeds are today's workload's: a change to the workload moves them
        # (today 13 of seeds 1-30 do, 2 among them).
        ("rejoin-after-removal", "2", "one-completion-per-task"),
    ],
)
# The other Raft correction (late refusals may only move a leader's next index
# back) is covered by tests/unit/test_raft_incoming_guard.py: the seed that
# found it ran an earlier workload, and no seed of 1-200 in either mode
# reaches it with today's (`--planted-bug raft-late-refusals`).
def test_the_seeds_that_found_bugs_fail_without_the_fixes(
    bug: str, seed: str, invariant: str
) -> None:
    """Each fix, taken away alone, lets the seed that found it fail again;
    with every fix in place the seed passes."""
    planted = simulate("--seed", seed, "--planted-bug", bug)
    assert invariant in {failure["invariant"] for failure in planted["failed_seeds"]}, planted
    assert simulate("--seed", seed)["failed_seeds"] == []


def test_a_snapshot_finishing_while_the_leader_resends_entries_keeps_the_log() -> None:
    """Seed 207: a follower's snapshot of applied entries finished while an
    overlapping append had cut the log short of the snapshot's index, and
    dropping the log up to that index emptied it (the next append raised
    IndexError on the empty log)."""
    assert simulate("--seed", "207")["failed_seeds"] == []


@pytest.mark.parametrize(
    "seed",
    [
        # A NODE_JOIN the node proposed while offline committed after its
        # removal and brought it back (apply now wants the removal named).
        "65",
        # A workflow sent in parts, retried after a lost answer, was left
        # half-submitted: the retry's first entry found the key taken.
        "137",
        # A node that lost its database applied the start of an attempt its
        # earlier process ran only after the agent's first pass: the task
        # stayed running with nobody running it.
        "140",
    ],
)
def test_the_liveness_seeds_that_found_bugs_pass(seed: str) -> None:
    assert simulate("--seed", seed, "--mode", "liveness")["failed_seeds"] == []
