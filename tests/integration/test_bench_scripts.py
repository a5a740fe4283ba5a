"""The throughput and scale benchmarks run end to end, small: each starts its
own real 3-node cluster, and its `--json` object carries the figures the
project's aims are read from, with every task completed and the nodes'
digests equal. What the figures are is for the scripts to measure; here they
need only be present and consistent with the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.script_modules import SCRIPTS

pytestmark = pytest.mark.cluster

ROOT = SCRIPTS.parent


def run_json(script: str, *args: str, tmp_path: Path, timeout: float) -> dict[str, Any]:
    """Runs `scripts/<script>.py --json` with `args` and returns its object."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / f"{script}.py"), *args, "--json", "--data-dir",
         str(tmp_path / script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )  # fmt: skip
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    # The object is the output's last part, on one line or indented.
    start = proc.stdout.rfind("\n{") + 1
    assert proc.stdout.startswith("{", start), (
        f"{script} printed no JSON object:\n{proc.stdout[-3000:]}"
    )
    figures: dict[str, Any] = json.loads(proc.stdout[start:])
    return figures


CORE_FIGURES = (
    "tasks_per_s", "cpu_ms_per_task", "submit_to_running_p50_ms", "submit_to_running_p99_ms",
    "entries_per_s", "tasks_per_entry", "digests_equal", "mode", "concurrency",
)  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "args"),
    [
        ("batch", ("--tasks", "120", "--batch-size", "40", "--concurrency", "2")),
        ("single", ("--tasks", "60", "--concurrency", "4")),
    ],
)
def test_bench_core_reports_every_figure_of_a_run(
    mode: str, args: tuple[str, ...], tmp_path: Path
) -> None:
    figures = run_json("bench_core", "--mode", mode, *args, tmp_path=tmp_path, timeout=240)
    missing = [name for name in CORE_FIGURES if name not in figures]
    assert not missing, f"bench_core --json lacks {missing}"
    tasks = int(args[args.index("--tasks") + 1])
    assert figures["mode"] == mode
    assert figures["concurrency"] == int(args[args.index("--concurrency") + 1])
    assert figures["completed"] == tasks
    assert figures["digests_equal"] is True
    assert figures["problems"] == []
    assert figures["tasks_per_s"] > 0 and figures["entries_per_s"] > 0
    assert figures["cpu_ms_per_task"] > 0
    assert 0 <= figures["submit_to_running_p50_ms"] <= figures["submit_to_running_p99_ms"]
    # Every accepted task was carried by some entry: never more tasks per
    # entry than the run's tasks, and a batch's entries carry several.
    assert 0 < figures["tasks_per_entry"] <= tasks
    if mode == "batch":
        assert figures["tasks_per_entry"] > 1


def test_bench_scale_reports_every_figure_of_a_small_history(tmp_path: Path) -> None:
    tasks = 400
    figures = run_json(
        "bench_scale", "--tasks", str(tasks), "--samples", "5", "--cli-runs", "1",
        tmp_path=tmp_path, timeout=280,
    )  # fmt: skip
    # The history also holds the workflows' tasks the script adds.
    assert figures["tasks_finished"] == tasks + figures["workflow_tasks"] > tasks
    assert figures["digests_equal"] is True
    listings = ("list", "list_state", "list_node", "list_workflow", "list_recent")
    for name in (*listings, "get_task"):
        assert 0 < figures[f"{name}_p50_ms"] <= figures[f"{name}_p99_ms"], name
    for key in ("restart_s", "kill_restart_s"):
        assert figures[key] > 0, key
    assert figures["snapshot_bytes"] > 0 and figures["snapshot_restore_s"] > 0
    peaks = figures["peak_rss_mb"]
    assert len(peaks) == 3 and all(mb > 0 for mb in peaks.values()), peaks
