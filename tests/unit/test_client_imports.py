"""A CLI command or a program using the Python client loads what a client
needs, not the node: every `cortex task list` used to load the state
machine with every handler of apply, the Raft group, psutil, the TLS
certificate parser and the YAML parser, about a third of its start. Checked
in a fresh interpreter (this one has loaded everything already)."""

from __future__ import annotations

import json
import subprocess
import sys

# Modules a node needs and a client does not.
NODE_ONLY = (
    "cortex.state.machine",
    "cortex.state.entries",
    "cortex.state.transitions",
    "cortex.raft",
    "cortex.membership",
    "cortex.scheduler",
    "pysyncobj",
    "psutil",
    "cryptography",
    "yaml",
    "py_mini_racer",
    "mcp",
)
# What a client command imports on its way to the call.
CLIENT_MODULES = (
    "cortex.cli.main",
    "cortex.cli.parser",
    "cortex.cli.tasks",
    "cortex.cli.workflows",
    "cortex.cli.nodes",
    "cortex.cli.schedules",
    "cortex.cli.limits",
    "cortex.cli.logs",
    "cortex.client",
)


def _loaded_after(imports: tuple[str, ...], setup: str = "") -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"{setup}\n"
        f"for name in {list(imports)!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps([m for m in {list(NODE_ONLY)!r} if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(done.stdout))


def test_client_commands_and_the_python_client_load_no_node_module() -> None:
    assert _loaded_after(CLIENT_MODULES) == []


def test_the_parser_is_built_without_loading_the_node() -> None:
    # Building it reads the bounds of schedules and limits for the flags' checks.
    setup = "from cortex.cli.parser import build_parser\nbuild_parser()"
    assert _loaded_after(("cortex.cli.render",), setup) == []


def test_the_check_sees_a_node_module_loaded() -> None:
    assert _loaded_after(("cortex.state.machine",)) == [
        "cortex.state.machine",
        "cortex.state.entries",
        "cortex.state.transitions",
    ]
