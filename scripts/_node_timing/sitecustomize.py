"""Timing hooks for the nodes `bench_core.py` starts with `--stages` or
`--path`: Python loads this module at start-up from any directory on
PYTHONPATH. In a process started with `--node-id` among its arguments (a
Cortex node), it installs the stage timing (`cortex_stage_timing`) when
CORTEX_STAGE_TIMING_DIR is set and the path timing (`cortex_path_timing`)
when CORTEX_PATH_TIMING_DIR is, each writing to that directory. Any other
process loads nothing."""

from __future__ import annotations

import importlib
import os
import sys

# Each hook's module beside this one, by the variable naming its directory.
HOOKS = {
    "CORTEX_STAGE_TIMING_DIR": "cortex_stage_timing",
    "CORTEX_PATH_TIMING_DIR": "cortex_path_timing",
}


def _node_id(argv: list[str]) -> str | None:
    return argv[argv.index("--node-id") + 1] if "--node-id" in argv[:-1] else None


def _main() -> None:
    wanted = {module: os.environ[name] for name, module in HOOKS.items() if os.environ.get(name)}
    if not wanted:
        return
    # `python -m cortex.cli.main ...`: the arguments are known before the module runs.
    with open("/proc/self/cmdline", "rb") as cmdline:
        argv = [part.decode(errors="replace") for part in cmdline.read().split(b"\0")]
    node_id = _node_id(argv)
    if node_id is None:
        return
    for module, out_dir in wanted.items():
        try:
            importlib.import_module(module).install(node_id, out_dir)
        except Exception as err:  # a measurement aid must never stop the node
            print(f"{module} not installed: {err}", file=sys.stderr)


_main()
