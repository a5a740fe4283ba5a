#!/usr/bin/env python3
"""What a task spec's checks cost, at each place one is made: the edge's
validation of a submitted spec (`parse_task_spec`: the model and the walk
for NaN, infinity and lone surrogates), apply's check on every node
(`check_task_spec`, the walk left out when the batch's bytes showed none)
and the canonical text it stores (`dump`), and the agent's validation of
the spec it reads back at each attempt's start (`stored_task_spec`, without
the walk) beside the same validation with it. For a noop spec as submitted
(`{"type": "noop"}`) and a shell spec with a command, an environment and
labels. Prints CPU microseconds per call, the best of `--runs` runs.

    python scripts/bench_spec.py
    python scripts/bench_spec.py --calls 5000 --json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from cortex.spec import TaskSpec, parse_task_spec, stored_task_spec
from cortex.state.canonical import dump
from cortex.state.spec_rules import check_task_spec

SPECS: dict[str, dict[str, Any]] = {
    "noop": {"type": "noop"},
    "shell": {
        "type": "shell",
        "command": ["python3", "-c", "import sys; print(sys.argv)", "--input", "a.csv"],
        "env": {"STAGE": "extract", "REGION": "eu-west-1"},
        "labels": {"team": "data", "pipeline": "nightly"},
        "timeoutMs": 60_000,
    },
}


def _per_call_us(call: Callable[[], object], calls: int, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        began = time.process_time_ns()
        for _ in range(calls):
            call()
        best = min(best, (time.process_time_ns() - began) / calls / 1e3)
    return round(best, 2)


def measure(name: str, calls: int, runs: int) -> dict[str, Any]:
    submitted = SPECS[name]
    stored = check_task_spec(submitted)
    return {
        "spec": name,
        "edge_parse_us": _per_call_us(lambda: parse_task_spec(submitted), calls, runs),
        "apply_check_us": _per_call_us(
            lambda: check_task_spec(stored, plain_json=True), calls, runs
        ),
        "apply_dump_us": _per_call_us(lambda: dump(stored), calls, runs),
        "agent_validation_us": _per_call_us(lambda: stored_task_spec(stored), calls, runs),
        "agent_validation_walked_us": _per_call_us(
            lambda: TaskSpec.model_validate(stored), calls, runs
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per run (default 2000)")
    parser.add_argument("--runs", type=int, default=5, help="runs, the best kept (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per spec")
    args = parser.parse_args()
    for name in SPECS:
        figures = measure(name, args.calls, args.runs)
        if args.json:
            print(json.dumps(figures))
            continue
        print(f"{name} spec, CPU us per call (best of {args.runs} runs of {args.calls}):")
        print(f"  edge: parse_task_spec                      {figures['edge_parse_us']:8.2f}")
        print(f"  apply: check_task_spec (plain batch)       {figures['apply_check_us']:8.2f}")
        print(f"  apply: its canonical text (dump)           {figures['apply_dump_us']:8.2f}")
        print(f"  agent: stored_task_spec                    {figures['agent_validation_us']:8.2f}")
        print(
            "  agent: the same, walked for NaN/surrogates "
            f"{figures['agent_validation_walked_us']:8.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
