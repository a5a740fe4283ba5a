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
from typing import Any

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
# Runs `cortex` in this interpreter with the arguments given, then prints
# its exit code, what it wrote to stderr and which of the heavy modules
# (read from stdin) it imported, as JSON.
PROBE = """
import contextlib, io, json, sys
from cortex.cli.main import main
heavy = json.loads(sys.stdin.read())
with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"code": code, "error": err.getvalue(),
                  "loaded": [name for name in heavy if name in sys.modules]}))
"""


def probe(command: Sequence[str]) -> dict[str, Any]:
    """The command, in a fresh interpreter against a port nothing listens
    on: its exit code, its stderr and the heavy modules it imported."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--node", "127.0.0.1:1", *command],
        input=json.dumps(HEAVY),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run_once(command: Sequence[str]) -> tuple[float, float]:
    """One process of the command: CPU seconds and wall seconds."""
    argv = [sys.executable, "-m", "cortex.cli.main", "--node", "127.0.0.1:1", *command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


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
            "heavy_imports": ",".join(probe(command)["loaded"]) or "none",
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
