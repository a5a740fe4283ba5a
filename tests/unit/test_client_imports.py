"""A CLI command or a program using the Python client loads what a client
needs, not the node: every `cortex task list` used to load the state
machine with every handler of apply, the Raft group, psutil, the TLS
certificate parser and the YAML parser, about a third of its start. Nor do
they load pydantic and the models (`cortex.config`, `cortex.spec`), another
third, unless a flag the models bound (such as `--priority`) is given.
Checked in a fresh interpreter (this one has loaded everything already)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.script_modules import load_script

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
# The models and what they are made with: a client command needs them only
# for a flag they bound.
MODELS = ("pydantic", "cortex.config", "cortex.spec")
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


def _loaded_after(
    imports: tuple[str, ...], setup: str = "", watched: tuple[str, ...] = NODE_ONLY
) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"{setup}\n"
        f"for name in {list(imports)!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps([m for m in {list(watched)!r} if m in sys.modules]))\n"
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


def test_client_commands_and_the_parser_load_no_model() -> None:
    setup = "from cortex.cli.parser import build_parser\nbuild_parser()"
    assert _loaded_after(CLIENT_MODULES, setup, watched=MODELS) == []


# `scripts/bench_cli_start.py` measures this start; its probe runs a command
# in a fresh interpreter against a port nothing listens on.
probe = load_script("bench_cli_start").probe


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["task", "get", "abcdefgh"],
        ["task", "list", "--state", "running"],
        ["task", "submit", "--label", "team=a", "--", "echo", "hi"],
        ["task", "cancel", "abcdefgh"],
        ["dlq", "list"],
        ["workflow", "list"],
        ["node", "list"],
    ],
    ids=" ".join,
)
def test_a_command_that_needs_no_model_does_not_import_one(argv: list[str]) -> None:
    result = probe(argv)
    # It got as far as calling the node (nothing listens there).
    assert result["code"] == 1 and "cannot reach" in str(result["error"]), result
    assert result["loaded"] == [], result


def test_a_flag_bounded_by_a_model_still_checks_its_value() -> None:
    result = probe(["task", "submit", "--priority", "11", "--", "echo", "hi"])
    assert result["code"] == 2, result
    assert "--priority" in str(result["error"]) and "from 0 to 10" in str(result["error"]), result
