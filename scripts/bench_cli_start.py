#!/usr/bin/env python3
"""What starting the `cortex` command costs before it does anything: each
command below runs `--runs` times as a process of its own against a port
nothing listens on (so it fails at its first call, after parsing its flags
and importing what it needs), and the median of its CPU seconds and wall
time is printed, with which of the heavy modules (pydantic, the config and
spec models, yaml) it imported.

    python scripts/bench_cli_start.py --runs 9
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

COMMANDS = (
    ("--help",),
    ("status",),
    ("task", "get", "abcdefgh"),
    ("task", "list"),
    ("task", "submit", "--", "echo", "hi"),
    ("task", "submit", "--priority", "3", "--", "echo", "hi"),
    ("workflow", "list"),
)
HEAVY = ("pydantic", "cortex.config", "cortex.spec", "yaml")
PROBE = """
import contextlib, io, sys
from cortex.cli.main import main
with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(",".join(name for name in sys.argv[0].split("+") if name in sys.modules))
"""


def run_once(command: Sequence[str]) -> tuple[float, float]:
    """One process of the command: CPU seconds and wall seconds."""
    argv = [sys.executable, "-m", "cortex.cli.main", "--node", "127.0.0.1:1", *command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def heavy_imported(command: Sequence[str]) -> str:
    probe = [sys.executable, "-c", PROBE.replace("sys.argv[0]", repr("+".join(HEAVY)))]
    done = subprocess.run(
        [*probe, "--node", "127.0.0.1:1", *command], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "none"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="processes per command (default 9)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    figures = {}
    for command in COMMANDS:
        runs = [run_once(command) for _ in range(args.runs)]
        name = "cortex " + " ".join(command)
        figures[name] = {
            "cpu_s": statistics.median(cpu for cpu, _ in runs),
            "wall_s": statistics.median(wall for _, wall in runs),
            "heavy_imports": heavy_imported(command),
        }
        if not args.json:
            shown = figures[name]
            print(
                f"{name:52} {shown['cpu_s']:5.2f} s CPU  {shown['wall_s']:5.2f} s wall"
                f"  heavy imports: {shown['heavy_imports']}"
            )
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
