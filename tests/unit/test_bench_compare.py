"""scripts/bench_compare.py: the order of each pair alternates, and the
summary gives each side's median and range and the change of the medians,
signed so that positive is better whichever way a figure improves."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.script_modules import load_script


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    return load_script("bench_compare")


def test_pairs_alternate_which_side_runs_first(compare: ModuleType) -> None:
    before, after = compare.Side("before", Path(".")), compare.Side("after", Path("."))
    orders = [[s.name for s in compare.pair_order(i, before, after)] for i in range(4)]
    assert orders == [["before", "after"], ["after", "before"]] * 2


def test_the_summary_is_medians_ranges_and_changes_for_the_better(compare: ModuleType) -> None:
    before, after = compare.Side("before", Path(".")), compare.Side("after", Path("."))
    before.runs = [
        {"tasks_per_s": v, "cpu_ms_per_task": c} for v, c in [(300, 5), (320, 6), (310, 7)]
    ]
    after.runs = [
        {"tasks_per_s": v, "cpu_ms_per_task": c} for v, c in [(372, 4), (400, 3), (390, 5)]
    ]
    rows = {row["figure"]: row for row in compare.summary(before, after)}
    assert rows["tasks_per_s"]["before"] == (310, 300, 320)
    assert rows["tasks_per_s"]["after"] == (390, 372, 400)
    assert rows["tasks_per_s"]["better_by_percent"] == pytest.approx(80 / 310 * 100)
    # Less CPU is better: a drop from 6 to 4 ms is a third better.
    assert rows["cpu_ms_per_task"]["better_by_percent"] == pytest.approx(100 / 3)
    assert rows["tasks_per_entry"]["before"] is None
    assert rows["tasks_per_entry"]["better_by_percent"] is None


def test_a_directory_without_the_benchmark_is_refused(
    compare: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        compare.parse_args(["--before", str(tmp_path), "--", "--tasks", "10"])
    assert "is not a Cortex checkout" in capsys.readouterr().err


def test_pair_ratios_are_after_over_before_pair_by_pair(compare: ModuleType) -> None:
    before, after = compare.Side("before", Path(".")), compare.Side("after", Path("."))
    before.runs = [{"tasks_per_s": v} for v in (400, 500, 200)]
    after.runs = [{"tasks_per_s": v} for v in (440, 450, 260)]
    assert compare.pair_ratios(before, after) == pytest.approx([1.1, 0.9, 1.3])


def test_one_checkout_compares_two_settings_of_it(
    compare: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    args, bench_args = compare.parse_args(
        ["--before-args=--no-route-writes", "--", "--tasks", "10"]
    )
    assert args.before.resolve() == args.after.resolve() == compare.HERE
    assert (args.before_args, args.after_args, bench_args) == (
        "--no-route-writes",
        "",
        ["--tasks", "10"],
    )
    with pytest.raises(SystemExit):
        compare.parse_args(["--", "--tasks", "10"])
    assert "both sides run the same" in capsys.readouterr().err
