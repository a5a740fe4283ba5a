"""scripts/_path_segments.py: a task's way from its proposal to its
attempt's start, cut at the times the nodes noted (the leader is the node
that logged the entry first, the commit the first apply of it), and tasks
placed by a later entry only counted."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.script_modules import load_script

MS = 1_000_000


@pytest.fixture(scope="module")
def segments() -> ModuleType:
    return load_script("_path_segments")


def _events() -> dict[str, list[list[object]]]:
    """Task a: proposed on f1, placed on f1 by its submission's entry 7.
    Task b: submitted in entry 8, placed on f2 by a round's entry 9. Task
    c: never started."""
    return {
        "leader": [
            ["place", 600_000, 800_000, ["a"]],
            ["log", 1 * MS, 7, ["a"]],
            ["apply", 3_200_000, 4_500_000, 7, ["a"]],
            ["log", 11 * MS, 8, ["b", "c"]],
            ["apply", 12 * MS, 13 * MS, 8, ["b", "c"]],
            ["log", 14 * MS, 9, ["b"]],
            ["apply", 15 * MS, 16 * MS, 9, ["b"]],
        ],
        "f1": [
            ["propose", 0, ["a"]],
            ["send", 200_000, ["a"]],
            ["log", 1_500_000, 7, ["a"]],
            ["apply", 3_500_000, 4_400_000, 7, ["a"]],
            ["start", 5 * MS, "a"],
            ["propose", 10 * MS, ["b", "c"]],
        ],
        "f2": [
            ["log", 1_400_000, 7, ["a"]],
            ["apply", 3 * MS, 4 * MS, 7, ["a"]],
            ["apply", 12 * MS, 13 * MS, 8, ["b", "c"]],
            ["apply", 15 * MS, 16 * MS, 9, ["b"]],
            ["start", 17 * MS, "b"],
        ],
    }


def test_each_stretch_runs_from_one_noted_time_to_the_next(segments: ModuleType) -> None:
    path = segments.path_of_tasks(_events())
    got = {name: [round(v, 3) for v in values] for name, values in path.stretches.items()}
    assert got == {
        "proposed -> in the leader's log": [1.0],
        "  proposed -> leaves its proposer": [0.2],
        "  -> the leader places it": [0.4],
        "  placement": [0.2],
        "  -> logged": [0.2],
        "-> committed (a node applies)": [2.0],  # f2 applied first, at 3 ms
        "-> apply starts where it runs": [0.5],
        "apply where it runs": [0.9],
        "-> attempt starts": [0.6],
        "proposed -> attempt starts": [5.0],
    }
    assert path.totals_by_role == {("follower", "follower"): [5.0]}


def test_without_a_placement_noted_only_the_whole_first_stretch_is_given(
    segments: ModuleType,
) -> None:
    events = _events()
    events["leader"] = [e for e in events["leader"] if e[0] != "place"]
    path = segments.path_of_tasks(events)
    assert path.stretches["proposed -> in the leader's log"] == [1.0]
    assert path.stretches["  placement"] == []


def test_a_task_placed_by_a_later_round_is_only_counted(segments: ModuleType) -> None:
    path = segments.path_of_tasks(_events())
    assert (path.traced, path.placed_later) == (2, 1)
